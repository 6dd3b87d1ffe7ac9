"""CPU elementwise ops: unary activations/math and broadcasting binary ops.

Every kernel writes into its planned output with numpy's ``out=`` (no temporaries
beyond a scratch buffer sized at resize). Formulas: ONNX operators.md.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.parallel import Blocks, parallel, split, workers
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import InputError


def apply_activation(kind: str, params, y: np.ndarray, scratch: np.ndarray | None = None) -> None:
    """In place: ``y = act(y)`` for a fused or standalone activation.

    ``kind``: Relu, Clip (params min, max), HardSigmoid (alpha, beta), HardSwish
    (``x * max(0, min(1, x/6 + 1/2))``), Sigmoid, LeakyRelu (alpha), Tanh.
    ``scratch`` (same shape as ``y``) is needed for HardSwish.
    """
    if kind == "" or kind is None:
        return
    if kind == "Relu":
        np.maximum(y, 0, out=y)
    elif kind == "Clip":
        lo, hi = params
        np.clip(y, lo, hi, out=y)
    elif kind == "HardSigmoid":
        alpha, beta = params
        np.multiply(y, alpha, out=y)
        np.add(y, beta, out=y)
        np.clip(y, 0, 1, out=y)
    elif kind == "HardSwish":
        np.multiply(y, 1 / 6, out=scratch)
        np.add(scratch, 0.5, out=scratch)
        np.clip(scratch, 0, 1, out=scratch)
        np.multiply(y, scratch, out=y)
    elif kind == "Sigmoid":
        _sigmoid(y, y)
    elif kind == "LeakyRelu":
        (alpha,) = params
        np.multiply(y, np.where(y < 0, y.dtype.type(alpha), y.dtype.type(1)), out=y)
    elif kind == "Tanh":
        np.tanh(y, out=y)
    else:
        raise ValueError(f"unknown activation {kind}")


def bias_activation(exe, y2, bias, act, scratch):
    """Bias (``(M, 1)``, may be None) and activation on ``y2: (N*M, L)``-like rows, split over threads."""
    if bias is None and not act[0]:
        return

    def part(r0, r1):
        rows = y2[:, r0:r1]
        if bias is not None:
            np.add(rows, bias[r0:r1], out=rows)
        apply_activation(*act, rows, None if scratch is None else scratch[:, r0:r1])

    parallel(exe.backend, [lambda r=r: part(*r) for r in split(y2.shape[1], workers(exe.backend, y2.size))])


def _sigmoid(x: np.ndarray, out: np.ndarray) -> None:
    """Numerically stable logistic: ``0.5 * (1 + tanh(x / 2))``."""
    np.multiply(x, 0.5, out=out)
    np.tanh(out, out=out)
    np.add(out, 1, out=out)
    np.multiply(out, 0.5, out=out)


ACTIVATION_PARAMS = {
    "HardSigmoid": lambda a: (a["alpha"], a["beta"]),
    "LeakyRelu": lambda a: (a["alpha"],),
}


@cpu_execution("Relu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "LeakyRelu")
class Activation(Execution):
    """Unary activations, copied into the output then applied in place."""

    def on_resize(self, inputs, outputs):
        self.params = ACTIVATION_PARAMS.get(self.op.type, lambda a: ())(self.attrs)
        scratch = self.backend.workspace().like(outputs[0]) if self.op.type == "HardSwish" else None
        self.run = Blocks(self.backend, self._apply, outputs[0], [inputs[0], scratch])

    def _apply(self, y, x, scratch):
        if self.op.type == "Relu":
            np.maximum(x, 0, out=y)
        elif self.op.type == "Sigmoid":
            _sigmoid(x, y)
        else:
            np.copyto(y, x)
            apply_activation(self.op.type, self.params, y, scratch)

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("Sqrt")
class Sqrt(Execution):
    """``Y = sqrt(X)`` (NaN for negatives, as the spec says)."""

    def on_execute(self, inputs, outputs):
        np.sqrt(inputs[0], out=outputs[0])


@cpu_execution("Identity")
class Identity(Execution):
    """``Y = X``; a no-op when the planner made Y share X's buffer."""

    def on_resize(self, inputs, outputs):
        self.shared = np.shares_memory(inputs[0], outputs[0]) if inputs[0].size else True

    def on_execute(self, inputs, outputs):
        if not self.shared:
            np.copyto(outputs[0], inputs[0])


_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@cpu_execution("Add", "Sub", "Mul", "Div", "Pow")
class Binary(Execution):
    """``C = A op B`` with numpy broadcasting; integer Div truncates toward zero (C semantics)."""

    def on_resize(self, inputs, outputs):
        a, b = self.input_infos
        t = self.op.type
        if t == "Div":
            self.fn = np.divide if a.dtype.kind == "f" else _int_div
        elif t == "Pow":
            self.fn = _pow
        else:
            self.fn = _BINARY[t]
        fn = self.fn
        self.run = Blocks(self.backend, lambda c, a, b: fn(a, b, out=c), outputs[0], inputs[:2])

    def on_execute(self, inputs, outputs):
        self.run()


def _int_div(a, b, out):
    """Integer division truncating toward zero, as onnxruntime computes it.

    Raises ``InputError`` on a zero divisor (undefined in ONNX; onnxruntime refuses it).
    """
    if not np.all(b):
        raise InputError("integer Div by zero")
    np.copyto(out, np.trunc(np.true_divide(a, b)).astype(out.dtype))


def _pow(a, b, out):
    """``a ** b`` in ``a``'s dtype (the exponent is cast, opset 12+)."""
    if a.dtype.kind == "f":
        np.power(a, b.astype(a.dtype, copy=False), out=out)
    else:
        np.copyto(out, np.power(a.astype(np.float64), b.astype(np.float64)).astype(out.dtype))


@cpu_execution("Clip")
class Clip(Execution):
    """``output = min(max(input, min), max)``; an absent bound is the dtype's lowest / highest
    value (ONNX Clip-11+: ``numeric_limits::lowest()`` / ``max()``, so +-inf become +-FLT_MAX
    in float32, as onnxruntime does). NaN stays NaN."""

    def on_execute(self, inputs, outputs):
        x = inputs[0]
        info = np.finfo(x.dtype) if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype)
        lo = inputs[1] if len(inputs) > 1 and inputs[1] is not None else info.min
        hi = inputs[2] if len(inputs) > 2 and inputs[2] is not None else info.max
        np.clip(x, lo, hi, out=outputs[0])

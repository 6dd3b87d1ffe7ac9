"""CPU elementwise ops: Identity and the broadcasting arithmetic binary ops (the unary
ones are in ``activation.py``).

Every kernel writes into its planned output with numpy's ``out=`` (no temporaries
beyond a scratch buffer sized at resize). Formulas: ONNX operators.md.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.parallel import blocks
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import InputError


@cpu_execution("Identity")
class Identity(Execution):
    """``Y = X``; a no-op when the planner made Y share X's buffer."""

    uses_blas = False  # CPUBackend.execute_partition leaves BLAS alone

    def on_resize(self, inputs, outputs):
        self.shared = np.shares_memory(inputs[0], outputs[0]) if inputs[0].size else True

    def on_execute(self, inputs, outputs):
        if not self.shared:
            np.copyto(outputs[0], inputs[0])


_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@cpu_execution("Add", "Sub", "Mul", "Div", "Pow")
class Binary(Execution):
    """``C = A op B`` with numpy broadcasting; integer Div truncates toward zero (C semantics)."""

    uses_blas = False  # CPUBackend.execute_partition leaves BLAS alone

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
        self.run = blocks(self.backend, lambda c, a, b: fn(a, b, out=c), outputs[0], inputs[:2])

    def on_execute(self, inputs, outputs):
        self.run()


def _int_div(a, b, out):
    """Integer division truncating toward zero, as onnxruntime computes it (C division): floor
    division, plus one where it was inexact and the signs differ; exact for every int64 (a
    float quotient is not beyond 2**53); MIN / -1 wraps to MIN.

    Raises ``InputError`` on a zero divisor (undefined in ONNX; onnxruntime refuses it).
    """
    if not np.all(b):
        raise InputError("integer Div by zero")
    with np.errstate(over="ignore"):
        np.floor_divide(a, b, out=out)
    out += (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))


def _pow(a, b, out):
    """``a ** b`` in ``a``'s dtype (the exponent is cast, opset 12+)."""
    if a.dtype.kind == "f":
        np.power(a, b.astype(a.dtype, copy=False), out=out)
    else:
        np.copyto(out, np.power(a.astype(np.float64), b.astype(np.float64)).astype(out.dtype))

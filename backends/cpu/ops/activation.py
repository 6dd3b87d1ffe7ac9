"""CPU kernels of the activation table (``mnnpy.ops.activation``): one NumPy function per op.

A kernel ``fn(y, x, a0, a1, *scratch)`` writes ``y = f(x)`` with numpy's ``out=`` (``y``
may be ``x``: the fused activations of Conv run in place); ``a0, a1`` are the op's
scalars (``Activation.scalars``, zeros where it has fewer); ``scratch`` are buffers shaped
like ``y`` (dtype ``None``: ``y``'s), taken from the workspace at resize. Kernels marked
``f32`` compute float16 in float32 and round once, as onnxruntime does. Formulas:
ONNX operators.md.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.parallel import blocks, parallel, split, workers
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.ops.activation import ACTIVATIONS

F32 = np.dtype(np.float32)


@dataclass(frozen=True)
class Kernel:
    """``fn(y, x, a0, a1, *scratch)``; ``scratch``: the scratch buffers' dtypes (``None``: y's)."""

    fn: Callable
    scratch: tuple = ()
    f32: bool = False


KERNELS: dict[str, Kernel] = {}


def kernel(*names: str, scratch: tuple = (), f32: bool = False):
    """Decorator registering ``fn`` as the CPU kernel of the activations ``names``
    (``ValueError`` for a name registered twice)."""

    def deco(fn):
        for name in names:
            if name in KERNELS:
                raise ValueError(f"CPU activation kernel for {name} registered twice")
            KERNELS[name] = Kernel(fn, scratch, f32)
        return fn

    return deco


_UFUNC = {
    "Abs": np.absolute,
    "Neg": np.negative,
    "Sign": np.sign,
    "Exp": np.exp,
    "Log": np.log,
    "Reciprocal": np.reciprocal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.rint,  # round half to even
    "Sqrt": np.sqrt,  # NaN for negatives, as the spec says
    "Tanh": np.tanh,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
}

for _name, _f in _UFUNC.items():
    kernel(_name)(lambda y, x, a0, a1, f=_f: f(x, out=y))


_ZEROS: dict[np.dtype, np.ndarray] = {}  # dtype -> a 0-d zero of it (a Python 0 costs ufuncs 0.3 µs a call)


@kernel("Relu")
def relu(y, x, a0, a1):
    """``max(x, 0)`` (NaN stays NaN)."""
    zero = _ZEROS.get(y.dtype)
    if zero is None:
        zero = _ZEROS.setdefault(y.dtype, np.zeros((), y.dtype))
    np.maximum(x, zero, out=y)


@kernel("Clip")
def clip(y, x, lo, hi):
    """``min(max(x, lo), hi)``; NaN stays NaN."""
    np.clip(x, lo, hi, out=y)


@kernel("LeakyRelu")
def leaky_relu(y, x, alpha, a1):
    """``x * (alpha if x < 0 else 1)``."""
    np.multiply(x, np.where(x < 0, y.dtype.type(alpha), y.dtype.type(1)), out=y)


@kernel("Sigmoid")
def sigmoid(y, x, a0, a1):
    """Numerically stable logistic: ``0.5 * (1 + tanh(x / 2))``."""
    np.multiply(x, 0.5, out=y)
    np.tanh(y, out=y)
    np.add(y, 1, out=y)
    np.multiply(y, 0.5, out=y)


@kernel("HardSigmoid")
def hard_sigmoid(y, x, alpha, beta):
    """``clip(alpha * x + beta, 0, 1)``."""
    np.multiply(x, alpha, out=y)
    np.add(y, beta, out=y)
    np.clip(y, 0, 1, out=y)


@kernel("HardSwish", scratch=(None,))
def hard_swish(y, x, scale, shift, s):
    """``scale * x * clip(x / 6 + 1/2, 0, 1) + shift`` (ONNX: scale 1, shift 0)."""
    hard_sigmoid(s, x, 1 / 6, 0.5)
    np.multiply(x, s, out=y)
    if scale != 1:
        np.multiply(y, scale, out=y)
    if shift != 0:
        np.add(y, shift, out=y)


@kernel("Swish", scratch=(None,), f32=True)
def swish(y, x, alpha, a1, s):
    """``x * sigmoid(alpha * x) = x / (1 + exp(-alpha * x))``."""
    np.multiply(x, -alpha, out=s)
    np.exp(s, out=s)
    np.add(s, 1, out=s)
    np.divide(x, s, out=y)


@functools.cache
def scipy_erf():
    """``scipy.special.erf``, imported on first use: importing SciPy costs about 0.2 s a
    process, which models without Erf or Gelu should not pay. ``Activation.on_resize``
    calls it first for the ops in ``LAZY_IMPORTS``, so no run imports it."""
    import scipy.special

    return scipy.special.erf


LAZY_IMPORTS = {"Erf": scipy_erf, "Gelu": scipy_erf}


@kernel("Erf", f32=True)
def erf(y, x, a0, a1):
    scipy_erf()(x, out=y)


@kernel("Softplus", f32=True)
def softplus(y, x, a0, a1):
    """``log(1 + exp(x))``, overflow-free."""
    np.logaddexp(x, 0, out=y)


@kernel("Softsign", scratch=(None,), f32=True)
def softsign(y, x, a0, a1, s):
    """``x / (1 + |x|)``."""
    np.absolute(x, out=s)
    np.add(s, 1, out=s)
    np.divide(x, s, out=y)


def _elu_parts(y, x, s, alpha, inner=1.0):
    """``y = max(x, 0) + alpha * expm1(min(x, 0) / inner)`` (no masks; no overflow). The
    product is taken only where ``expm1`` is negative: for ``x >= 0`` the term is 0 even when
    ``alpha`` is infinite (0 * inf would be NaN; onnxruntime gives ``x``)."""
    np.minimum(x, 0, out=s)
    if inner != 1.0:
        np.divide(s, inner, out=s)
    np.expm1(s, out=s)
    np.multiply(s, alpha, out=s, where=s < 0)
    np.maximum(x, 0, out=y)
    np.add(y, s, out=y)


@kernel("Elu", scratch=(None,), f32=True)
def elu(y, x, alpha, a1, s):
    _elu_parts(y, x, s, alpha)


@kernel("Celu", scratch=(None,), f32=True)
def celu(y, x, alpha, a1, s):
    _elu_parts(y, x, s, alpha, alpha)


@kernel("Selu", scratch=(None,), f32=True)
def selu(y, x, alpha, gamma, s):
    _elu_parts(y, x, s, alpha)
    np.multiply(y, gamma, out=y)


@kernel("ThresholdedRelu", scratch=(np.bool_,))
def thresholded_relu(y, x, alpha, a1, mask):
    """``x`` where ``x > alpha`` else 0 (NaN too)."""
    np.greater(x, alpha, out=mask)
    np.logical_not(mask, out=mask)
    np.copyto(y, x)
    np.copyto(y, 0, where=mask)


@kernel("Gelu", scratch=(None,), f32=True)
def gelu(y, x, tanh_form, a1, s):
    """``0.5 * x * (1 + erf(x / sqrt(2)))``; with ``tanh_form`` (approximate='tanh')
    ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))``."""
    if tanh_form:
        np.multiply(x, x, out=s)
        np.multiply(s, 0.044715, out=s)
        np.add(s, 1, out=s)
        np.multiply(s, x, out=s)
        np.multiply(s, math.sqrt(2 / math.pi), out=s)
        np.tanh(s, out=s)
    else:
        np.multiply(x, 1 / math.sqrt(2), out=s)
        scipy_erf()(s, out=s)
    np.add(s, 1, out=s)
    np.multiply(s, 0.5, out=s)
    np.multiply(x, s, out=y)


@kernel("Mish", scratch=(None,), f32=True)
def mish(y, x, a0, a1, s):
    """``x * tanh(softplus(x))``."""
    np.logaddexp(x, 0, out=s)
    np.tanh(s, out=s)
    np.multiply(x, s, out=y)


def _padded(params) -> tuple[float, float]:
    p = tuple(params) + (0.0, 0.0)
    return p[0], p[1]


def needs_scratch(kind: str | None) -> bool:
    """Whether the in-place activation ``kind`` needs a scratch buffer (``apply_activation``)."""
    return bool(kind) and bool(KERNELS[kind].scratch)


def apply_activation(kind: str | None, params, y: np.ndarray, scratch: np.ndarray | None = None) -> None:
    """In place: ``y = act(y)`` for a fused activation (Conv's ``activation`` with its
    ``activation_params``; none for ``""``). ``scratch`` (shaped like ``y``) is needed where
    ``needs_scratch(kind)``. ``KeyError`` for an unknown kind."""
    if not kind:
        return
    k = KERNELS[kind]
    k.fn(y, y, *_padded(params), *([scratch] if k.scratch else []))


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


@cpu_execution(*(name for name, a in ACTIVATIONS.items() if not a.bounds))
class Activation(Execution):
    """``Y = f(X)`` by the op's kernel, split over threads for large outputs; float16 through
    float32 buffers for ``f32`` kernels."""

    uses_blas = False  # CPUBackend.execute_partition leaves BLAS alone

    def on_resize(self, inputs, outputs):
        k = KERNELS[self.op.type]
        if self.op.type in LAZY_IMPORTS:
            LAZY_IMPORTS[self.op.type]()
        a0, a1 = _padded(ACTIVATIONS[self.op.type].scalars(self.attrs))
        y = outputs[0]
        ws = self.backend.workspace()
        if k.f32 and y.dtype == np.float16:
            xf, yf = ws.take(y.shape, F32), ws.take(y.shape, F32)
            scratch = [ws.take(y.shape, F32 if d is None else d) for d in k.scratch]

            def fn(y, x, xf, yf, *s):
                np.copyto(xf, x)
                k.fn(yf, xf, a0, a1, *s)
                np.copyto(y, yf, casting="unsafe")

            self.run = blocks(self.backend, fn, y, [inputs[0], xf, yf, *scratch])
        else:
            scratch = [ws.take(y.shape, y.dtype if d is None else d) for d in k.scratch]
            self.run = blocks(self.backend, lambda y, x, *s: k.fn(y, x, a0, a1, *s), y, [inputs[0], *scratch])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("Clip")
class Clip(Execution):
    """``output = min(max(input, min), max)``; an absent bound is the dtype's lowest / highest
    value (ONNX Clip-11+: ``numeric_limits::lowest()`` / ``max()``, so +-inf become +-FLT_MAX
    in float32, as onnxruntime does); the bounds may be computed at run time. NaN stays NaN."""

    uses_blas = False  # CPUBackend.execute_partition leaves BLAS alone

    def on_execute(self, inputs, outputs):
        x = inputs[0]
        info = np.finfo(x.dtype) if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype)
        lo = inputs[1] if len(inputs) > 1 and inputs[1] is not None else info.min
        hi = inputs[2] if len(inputs) > 2 and inputs[2] is not None else info.max
        clip(outputs[0], x, lo, hi)

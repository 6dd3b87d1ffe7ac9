"""CPU elementwise math, logic and comparison ops (formulas: ONNX operators.md).

Every kernel writes into its planned output with numpy's ``out=``/``np.copyto``;
temporaries are workspace buffers shaped like the output, taken at resize, and the
work is split over the backend's pool for large outputs (``Blocks``). Composite float
formulas (Erf, Softplus, Elu, Gelu, ...) on float16 are computed in float32 and rounded
once, as onnxruntime does.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special

from mnnpy.backend import Execution
from mnnpy.backends.cpu.parallel import Blocks
from mnnpy.backends.cpu.registry import cpu_execution

F32 = np.dtype(np.float32)

# -- unary ----------------------------------------------------------------------------

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
    "Not": np.logical_not,
    "IsNaN": np.isnan,
    "BitwiseNot": np.invert,  # integers: ~X
}


def _erf(y, x):
    scipy.special.erf(x, out=y)


def _softplus(y, x):
    """``log(1 + exp(x))``, overflow-free."""
    np.logaddexp(x, 0, out=y)


def _softsign(y, x, s):
    """``x / (1 + |x|)``."""
    np.absolute(x, out=s)
    np.add(s, 1, out=s)
    np.divide(x, s, out=y)


def _elu_parts(y, x, s, alpha, inner=1.0):
    """``y = max(x, 0) + alpha * expm1(min(x, 0) / inner)`` (no masks; no overflow)."""
    np.minimum(x, 0, out=s)
    if inner != 1.0:
        np.divide(s, inner, out=s)
    np.expm1(s, out=s)
    np.multiply(s, alpha, out=s)
    np.maximum(x, 0, out=y)
    np.add(y, s, out=y)


def _mish(y, x, s):
    """``x * tanh(softplus(x))``."""
    np.logaddexp(x, 0, out=s)
    np.tanh(s, out=s)
    np.multiply(x, s, out=y)


def _gelu(y, x, s):
    """``0.5 * x * (1 + erf(x / sqrt(2)))``."""
    np.multiply(x, 1 / math.sqrt(2), out=s)
    scipy.special.erf(s, out=s)
    np.add(s, 1, out=s)
    np.multiply(s, 0.5, out=s)
    np.multiply(x, s, out=y)


def _gelu_tanh(y, x, s):
    """``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))``."""
    np.multiply(x, x, out=s)
    np.multiply(s, 0.044715, out=s)
    np.add(s, 1, out=s)
    np.multiply(s, x, out=s)
    np.multiply(s, math.sqrt(2 / math.pi), out=s)
    np.tanh(s, out=s)
    np.add(s, 1, out=s)
    np.multiply(s, 0.5, out=s)
    np.multiply(x, s, out=y)


def _composite(op_type: str, attrs: dict):
    """``(core(y, x, *scratch), number of scratch buffers)`` for a composite float op."""
    if op_type == "Erf":
        return _erf, 0
    if op_type == "Softplus":
        return _softplus, 0
    if op_type == "Softsign":
        return _softsign, 1
    if op_type == "Mish":
        return _mish, 1
    if op_type == "Elu":
        alpha = attrs["alpha"]
        return (lambda y, x, s: _elu_parts(y, x, s, alpha)), 1
    if op_type == "Celu":
        alpha = attrs["alpha"]
        return (lambda y, x, s: _elu_parts(y, x, s, alpha, alpha)), 1
    if op_type == "Selu":
        alpha, gamma = attrs["alpha"], attrs["gamma"]

        def selu(y, x, s):
            _elu_parts(y, x, s, alpha)
            np.multiply(y, gamma, out=y)

        return selu, 1
    if op_type == "Gelu":
        return (_gelu_tanh if attrs["approximate"] == "tanh" else _gelu), 1
    raise KeyError(op_type)


COMPOSITE = ("Erf", "Softplus", "Softsign", "Mish", "Elu", "Celu", "Selu", "Gelu")


@cpu_execution(*_UFUNC)
class Unary(Execution):
    """``Y = f(X)`` for one numpy ufunc (Round: half to even; Sign: -1/0/1, NaN stays NaN)."""

    def on_resize(self, inputs, outputs):
        f = _UFUNC[self.op.type]
        self.run = Blocks(self.backend, lambda y, x: f(x, out=y), outputs[0], [inputs[0]])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution(*COMPOSITE)
class Composite(Execution):
    """Float activations built from several ufuncs into workspace temporaries; float16 is
    computed in float32 (converted in and out through workspace buffers)."""

    def on_resize(self, inputs, outputs):
        core, n_scratch = _composite(self.op.type, self.attrs)
        y = outputs[0]
        ws = self.backend.workspace()
        if y.dtype == np.float16:
            xf, yf = ws.take(y.shape, F32), ws.take(y.shape, F32)
            scratch = [ws.take(y.shape, F32) for _ in range(n_scratch)]

            def fn(y, x, xf, yf, *s):
                np.copyto(xf, x)
                core(yf, xf, *s)
                np.copyto(y, yf, casting="unsafe")

            self.run = Blocks(self.backend, fn, y, [inputs[0], xf, yf, *scratch])
        else:
            scratch = [ws.like(y) for _ in range(n_scratch)]
            self.run = Blocks(self.backend, core, y, [inputs[0], *scratch])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("ThresholdedRelu")
class ThresholdedRelu(Execution):
    """``Y = X`` where ``X > alpha`` else 0."""

    def on_resize(self, inputs, outputs):
        alpha = self.attrs["alpha"]
        mask = self.backend.workspace().take(outputs[0].shape, np.bool_)

        def fn(y, x, m):
            np.greater(x, alpha, out=m)
            y.fill(0)
            np.copyto(y, x, where=m)

        self.run = Blocks(self.backend, fn, outputs[0], [inputs[0], mask])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("IsInf")
class IsInf(Execution):
    """``Y = X == +inf`` (``detect_positive``) or ``X == -inf`` (``detect_negative``)."""

    def on_resize(self, inputs, outputs):
        pos, neg = self.attrs["detect_positive"], self.attrs["detect_negative"]
        if pos and neg:
            fn = lambda y, x: np.isinf(x, out=y)  # noqa: E731
        elif pos:
            fn = lambda y, x: np.equal(x, np.inf, out=y)  # noqa: E731
        elif neg:
            fn = lambda y, x: np.equal(x, -np.inf, out=y)  # noqa: E731
        else:
            fn = lambda y, x: y.fill(False)  # noqa: E731
        self.run = Blocks(self.backend, fn, outputs[0], [inputs[0]])

    def on_execute(self, inputs, outputs):
        self.run()


# -- binary -----------------------------------------------------------------------------

_BINARY = {
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
    "Equal": np.equal,
    "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
    "Less": np.less,
    "LessOrEqual": np.less_equal,
}


@cpu_execution(*_BINARY, "BitShift", "Mod")
class Binary(Execution):
    """``C = A op B`` with numpy broadcasting.

    BitShift: numpy's shifts are the spec's (arithmetic right shift for signed types;
    a shift that is negative or at least the bit width gives the sign fill: -1 for a
    right shift of a negative value, else 0). Mod: ``fmod=0`` is ``np.mod`` (sign of
    the divisor, ``A - floor(A/B)*B``), ``fmod=1`` is C ``fmod`` (sign of the dividend);
    an integer divisor of 0 gives 0.
    """

    def on_resize(self, inputs, outputs):
        t = self.op.type
        if t == "BitShift":
            f = np.left_shift if self.attrs["direction"] == "LEFT" else np.right_shift
        elif t == "Mod":
            f = np.fmod if self.attrs["fmod"] else np.mod
        else:
            f = _BINARY[t]
        self.run = Blocks(self.backend, lambda c, a, b: f(a, b, out=c), outputs[0], inputs[:2])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("PRelu")
class PRelu(Execution):
    """``Y = max(X, 0) + slope * min(X, 0)`` (= ``slope * X`` where ``X < 0``, else ``X``)."""

    def on_resize(self, inputs, outputs):
        s = self.backend.workspace().like(outputs[0])

        def fn(y, x, slope, s):
            np.minimum(x, 0, out=s)
            np.multiply(s, slope, out=s)
            np.maximum(x, 0, out=y)
            np.add(y, s, out=y)

        self.run = Blocks(self.backend, fn, outputs[0], [inputs[0], inputs[1], s])

    def on_execute(self, inputs, outputs):
        self.run()


# -- variadic, Where, CastLike ------------------------------------------------------------

_VARIADIC = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}


@cpu_execution(*_VARIADIC)
class Variadic(Execution):
    """``Y = x0 op x1 op ...`` with numpy broadcasting (Max/Min propagate NaN); Mean divides
    the sum by the input count (integer Mean truncates)."""

    def on_resize(self, inputs, outputs):
        f, n, mean = _VARIADIC[self.op.type], len(inputs), self.op.type == "Mean"

        def fn(y, *xs):
            if n == 1:
                np.copyto(y, xs[0])
            else:
                f(xs[0], xs[1], out=y)
                for x in xs[2:]:
                    f(y, x, out=y)
            if mean and n > 1:
                np.divide(y, n, out=y, casting="unsafe")

        self.run = Blocks(self.backend, fn, outputs[0], list(inputs))

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("Where")
class Where(Execution):
    """``output = X`` where ``condition`` else ``Y``, all broadcast together."""

    def on_resize(self, inputs, outputs):
        def fn(out, c, x, y):
            np.copyto(out, y)
            np.copyto(out, x, where=c)

        self.run = Blocks(self.backend, fn, outputs[0], inputs[:3])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("CastLike")
class CastLike(Execution):
    """``output = input`` converted to ``target_type``'s dtype, as Cast converts (float -> int
    truncates toward zero, anything -> bool is ``!= 0``, float -> float16 rounds to nearest even)."""

    def on_resize(self, inputs, outputs):
        self.run = Blocks(self.backend, lambda y, x: np.copyto(y, x, casting="unsafe"), outputs[0], [inputs[0]])

    def on_execute(self, inputs, outputs):
        with np.errstate(invalid="ignore", over="ignore"):
            self.run()

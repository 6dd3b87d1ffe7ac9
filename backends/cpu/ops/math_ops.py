"""CPU elementwise math, logic and comparison ops (formulas: ONNX operators.md).

Every kernel writes into its planned output with numpy's ``out=``/``np.copyto``;
temporaries are workspace buffers shaped like the output, taken at resize, and the
work is split over the backend's pool for large outputs (``parallel.blocks``). The unary math ops
and activations are in ``activation.py``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.parallel import blocks
from mnnpy.backends.cpu.registry import cpu_execution

# -- unary ----------------------------------------------------------------------------

_UFUNC = {"Not": np.logical_not, "IsNaN": np.isnan, "BitwiseNot": np.invert}  # BitwiseNot: integers, ~X


@cpu_execution(*_UFUNC)
class Unary(Execution):
    """``Y = f(X)`` for one numpy ufunc."""

    def on_resize(self, inputs, outputs):
        f = _UFUNC[self.op.type]
        self.run = blocks(self.backend, lambda y, x: f(x, out=y), outputs[0], [inputs[0]])

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
        self.run = blocks(self.backend, fn, outputs[0], [inputs[0]])

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
        self.run = blocks(self.backend, lambda c, a, b: f(a, b, out=c), outputs[0], inputs[:2])

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

        self.run = blocks(self.backend, fn, outputs[0], [inputs[0], inputs[1], s])

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

        self.run = blocks(self.backend, fn, outputs[0], list(inputs))

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("Where")
class Where(Execution):
    """``output = X`` where ``condition`` else ``Y``, all broadcast together."""

    def on_resize(self, inputs, outputs):
        def fn(out, c, x, y):
            np.copyto(out, y)
            np.copyto(out, x, where=c)

        self.run = blocks(self.backend, fn, outputs[0], inputs[:3])

    def on_execute(self, inputs, outputs):
        self.run()


@cpu_execution("CastLike")
class CastLike(Execution):
    """``output = input`` converted to ``target_type``'s dtype, as Cast converts (float -> int
    truncates toward zero, anything -> bool is ``!= 0``, float -> float16 rounds to nearest even)."""

    def on_resize(self, inputs, outputs):
        self.run = blocks(self.backend, lambda y, x: np.copyto(y, x, casting="unsafe"), outputs[0], [inputs[0]])

    def on_execute(self, inputs, outputs):
        with np.errstate(invalid="ignore", over="ignore"):
            self.run()

"""Families of the generator that write what the converter rewrites (``converter/passes``):
a Conv or ConvTranspose followed by BatchNormalization, a constant scale or shift (of a
per-channel shape, or of a shape that is not per-channel and must not fold, either operand
order) or an activation; a scalar affine op feeding a Conv; hard-swish, swish and layer
normalisation spelled out in elementwise ops; ops on constants only (folded at convert
time). Each leaves its result in the pool as the other families do."""

from __future__ import annotations

import math

from mnnpy.tools.cts import families as f
from mnnpy.tools.cts.builder import FLOAT, Builder, T

ACTIVATIONS = {
    "Relu": lambda b: {},
    "LeakyRelu": lambda b: {"alpha": 0.1},
    "Sigmoid": lambda b: {},
    "Tanh": lambda b: {},
    "HardSwish": lambda b: {},
    "HardSigmoid": lambda b: {"alpha": 0.2, "beta": 0.5},
    "Elu": lambda b: {},
    "Clip": None,
}


def _conv(b: Builder) -> T | None:
    """A new Conv or ConvTranspose (from ``families``), the newest tensor of the pool."""
    before = len(b.nodes)
    if not (f.conv_transpose(b) if b.chance(0.25) else f.conv(b)):
        return None
    return b.pool[-1] if len(b.nodes) > before else None


def conv_epilogue(b: Builder) -> bool:
    """Conv/ConvTranspose, then BatchNormalization, an activation, or an Add/Sub/Mul/Div by a
    constant of shape (M,1,1), (1,M,1,1), a scalar, or one that is not per channel
    ((1,1,1,W), (W,)), the constant first half the time."""
    y = _conv(b)
    if y is None:
        return False
    n, m, *spatial = y.shape
    kind = b.choice(("bn", "act", "affine", "affine"))
    if kind == "bn":
        ins = [y.name] + [b.const(FLOAT, [m], dist="normal") for _ in range(3)]
        ins.append(b.const(FLOAT, [m], dist="uniform", low=0.5, high=2.0))
        b.node("BatchNormalization", ins, [(FLOAT, y.shape)], mag=3 * y.mag + 3)
        return True
    if kind == "act":
        op = b.choice(list(ACTIVATIONS))
        if op == "Clip":
            lo, hi = b.choice(((0.0, 6.0), (-1.0, 1.0), (0.0, None)))
            ins = [y.name, b.const(FLOAT, [], [lo])] + ([b.const(FLOAT, [], [hi])] if hi is not None else [])
            b.node("Clip", ins, [(FLOAT, y.shape)], mag=y.mag)
        else:
            b.node(op, [y.name], [(FLOAT, y.shape)], mag=y.mag, **ACTIVATIONS[op](b))
        return True
    op = b.choice(("Add", "Sub", "Mul", "Div"))
    rank = len(y.shape)
    shapes = [(m, *[1] * (rank - 2)), (1, m, *[1] * (rank - 2)), (), (1,) * rank, (*[1] * (rank - 1), y.shape[-1])]
    shape = b.choice(shapes)
    c = (
        b.const(FLOAT, shape, dist="uniform", low=0.5, high=1.5)
        if op == "Div" or b.chance(0.5)
        else b.const(FLOAT, shape, dist="normal")
    )
    first = op != "Div" and b.chance(0.5) or op == "Div" and b.chance(0.2)
    if first and op == "Div":  # c / y: y's values near 0 are guarded
        den, _ = b.positive(y)
        b.node("Div", [c, den], [(FLOAT, y.shape)], mag=4.0)
        return True
    b.node(op, [c, y.name] if first else [y.name, c], [(FLOAT, y.shape)], mag=3 * y.mag + 2)
    return True


def affine_into_conv(b: Builder) -> bool:
    """``Conv(x * a + b)`` (or ``x / a``, ``x - b``) with scalar constants: folded into the
    Conv where it has no padding."""
    x = b.pick(f._spatial, max_mag=100)
    if x is None:
        return False
    before = len(b.pool)
    scale = b.const(FLOAT, [], [b.choice((0.5, 2.0, -1.5))])
    (s,) = b.node(b.choice(("Mul", "Div")), [x.name, scale], [(FLOAT, x.shape)], mag=2 * x.mag)
    (t,) = b.node(
        b.choice(("Add", "Sub")), [s.name, b.const(FLOAT, [], [b.choice((0.25, -1.0))])], [(FLOAT, x.shape)], mag=2 * x.mag + 1
    )
    return _on(b, [t], f.conv, before)


def _on(b: Builder, pool: list[T], family, before: int) -> bool:
    """Draw ``family`` reading only ``pool``; then the pool is what it was up to ``before``,
    plus ``pool`` and what the family made."""
    saved = b.pool[:before]
    b.pool = list(pool)
    try:
        family(b)
    finally:
        b.pool = saved + b.pool
    return True


def spelled_out(b: Builder) -> bool:
    """Hard-swish (``x * Clip(x + 3, 0, 6) / 6`` or ``x * HardSigmoid(x)``), swish
    (``x * Sigmoid(x)``) or layer normalisation over the last k axes, in elementwise ops."""
    x = b.pick(lambda t: len(t.shape) >= 1, max_mag=100)
    if x is None:
        return False
    kind = b.choice(("hardswish", "hardsigmoid", "swish", "layernorm"))
    before, same = len(b.pool), [(FLOAT, x.shape)]
    if kind == "hardswish":
        (a,) = b.node("Add", [x.name, b.const(FLOAT, [], [3.0])], same)
        (c,) = b.node("Clip", [a.name, b.const(FLOAT, [], [0.0]), b.const(FLOAT, [], [6.0])], same)
        (p,) = b.node("Mul", [x.name, c.name], same)
        (y,) = b.node("Div", [p.name, b.const(FLOAT, [], [6.0])], same, mag=x.mag)
    elif kind in ("hardsigmoid", "swish"):
        op, attrs = ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}) if kind == "hardsigmoid" else ("Sigmoid", {})
        (g,) = b.node(op, [x.name], same, **attrs)
        (y,) = b.node("Mul", [g.name, x.name] if b.chance(0.5) else [x.name, g.name], same, mag=x.mag)
    else:
        rank = len(x.shape)
        k = int(b.rng.integers(1, rank + 1))
        if math.prod(x.shape[-k:]) < 2:
            return False
        axes = b.const("int64", [k], list(range(-k, 0)))
        red = [(FLOAT, (*x.shape[:-k], *[1] * k))]
        attrs = {} if b.spec["opset"] >= 18 else {"axes": list(range(-k, 0))}

        def mean(t):
            return b.node("ReduceMean", [t] + ([axes] if b.spec["opset"] >= 18 else []), red, **attrs)[0].name

        d = b.node("Sub", [x.name, mean(x.name)], same)[0].name
        v = mean(b.node("Pow", [d, b.const(FLOAT, [], [2.0])], same)[0].name)
        sd = b.node("Sqrt", [b.node("Add", [v, b.const(FLOAT, [], [1e-5])], red)[0].name], red)[0].name
        n = b.node("Div", [d, sd], same)[0].name
        gamma, beta = (b.const(FLOAT, x.shape[-k:], dist="normal") for _ in range(2))
        (y,) = b.node("Add", [b.node("Mul", [n, gamma], same)[0].name, beta], same, mag=10.0)
    b.pool[before:] = [y]  # the pattern's intermediates are read by it only
    return True


def on_constants(b: Builder) -> bool:
    """An op family drawn on a pool of constants only (the converter folds it): a constant
    joins the pool for one draw of a unary, binary, movement or reduction family."""
    from mnnpy.tools.cts import movement as mv

    shape = b.dims(int(b.rng.integers(1, 4)), 2048)
    c = T(b.const(FLOAT, shape, dist="normal"), FLOAT, shape, True, 4.0)
    return _on(b, [c], b.choice((f.unary, f.binary, f.reduce, mv.transpose, mv.slice_, mv.reshape)), len(b.pool))

"""Families of the generator for indexing, shape and less common ops: ScatterElements and
ScatterND (distinct indices, every reduction of the opset), GatherND (batch_dims),
OneHot, Shape/Size/ConstantOfShape/Range, Einsum, Compress, ReverseSequence, the inverse
trigonometric ops on bounded values, and IsInf/IsNaN of an exact division by zero."""

from __future__ import annotations

import math

import numpy as np

from mnnpy.tools.cts.builder import BOOL, FLOAT, INTS, MAX_ELEMENTS, Builder, axis_of

NUMERIC = (FLOAT, *INTS)


def _distinct_along(b: Builder, shape: tuple, axis: int, size: int) -> np.ndarray:
    """int64 indices of ``shape`` into an axis of ``size``, distinct along ``axis`` (each
    line a prefix of a permutation), negative half the time."""
    keys = b.rng.random((*shape[:axis], size, *shape[axis + 1 :]))
    idx = np.argsort(keys, axis=axis).take(range(shape[axis]), axis=axis)
    return np.where(b.rng.random(idx.shape) < 0.5, idx - size, idx)


def scatter_elements(b: Builder) -> bool:
    """ScatterElements of a float or integer tensor along an axis, indices distinct along it
    (so no reduction order matters), updates a constant; reduction none, add or mul (opset
    18: max and min too)."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=NUMERIC, max_mag=100)
    if x is None:
        return False
    rank = len(x.shape)
    ax = axis_of(b, rank)
    shape = tuple(int(b.rng.integers(1, d + 1)) for d in x.shape)
    idx = _distinct_along(b, shape, ax % rank, x.shape[ax % rank])
    reductions = ("none", "add", "mul", *(("max", "min") if b.spec["opset"] >= 18 else ()))
    red = b.choice(reductions)
    attrs = {"axis": ax, **({"reduction": red} if red != "none" or b.chance(0.5) else {})}
    ins = [x.name, b.const("int64", shape, idx), b.const_like(x.dtype, shape, 3.0)]
    exact = red in ("none", "max", "min") and x.exact or x.dtype != FLOAT
    b.node("ScatterElements", ins, [(x.dtype, x.shape)], exact, 4 * x.mag + 4, **attrs)
    return True


def scatter_nd(b: Builder) -> bool:
    """ScatterND: 1 to 6 distinct index tuples into the first k dims of a float or integer
    tensor, updates a constant; reduction none, add or mul (opset 18: max and min too)."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=NUMERIC, max_mag=100)
    if x is None:
        return False
    k = int(b.rng.integers(1, len(x.shape) + 1))
    cells = math.prod(x.shape[:k])
    m = int(b.rng.integers(1, min(cells, 6) + 1))
    flat = b.rng.choice(cells, size=m, replace=False)
    idx = np.stack(np.unravel_index(flat, x.shape[:k]), axis=-1).astype(np.int64)
    red = b.choice(("none", "add", "mul", *(("max", "min") if b.spec["opset"] >= 18 else ())))
    upd = (m, *x.shape[k:])
    ins = [x.name, b.const("int64", [m, k], idx), b.const_like(x.dtype, upd, 3.0)]
    exact = red in ("none", "max", "min") and x.exact or x.dtype != FLOAT
    b.node("ScatterND", ins, [(x.dtype, x.shape)], exact, 4 * x.mag + 4, **({"reduction": red} if red != "none" else {}))
    return True


def gather_nd(b: Builder) -> bool:
    """GatherND with batch_dims 0 or 1: index tuples of length 1 to the rest of the rank
    (negative ones sometimes) in an index tensor of rank 1 to 2 beyond the batch dims."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=(*NUMERIC, BOOL))
    if x is None:
        return False
    bd = int(len(x.shape) >= 2 and b.chance(0.3))
    k = int(b.rng.integers(1, len(x.shape) - bd + 1))
    lead = [int(b.choice((1, 2, 3))) for _ in range(int(b.rng.integers(0, 2)))]
    dims = x.shape[bd : bd + k]
    shape = (*x.shape[:bd], *lead, k)
    idx = np.stack([b.rng.integers(-d if b.chance(0.3) else 0, d, size=shape[:-1]) for d in dims], axis=-1)
    out = (*x.shape[:bd], *lead, *x.shape[bd + k :])
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node("GatherND", [x.name, b.const("int64", shape, idx)], [(x.dtype, out)], x.exact, x.mag, batch_dims=bd)
    return True


def one_hot(b: Builder) -> bool:
    """OneHot of an int64 tensor of rank >= 1 (values within ``[0, depth)`` after a Mod; depth 3, 7 or 13,
    an int64 scalar) with constant float or int64 off/on values, along a random axis (the
    type combinations onnxruntime implements)."""
    x = b.pick(lambda t: len(t.shape) >= 1 and t.size * 13 <= MAX_ELEMENTS, dtype="int64")
    if x is None:
        return False
    depth = int(b.choice((3, 7, 13)))
    (r,) = b.node("Mod", [x.name, b.const(x.dtype, [], [depth])], [(x.dtype, x.shape)], True, depth)
    b.pool.remove(r)
    rank = len(x.shape) + 1
    ax = axis_of(b, rank)
    vdtype = b.choice((FLOAT, "int64"))
    values = b.const(vdtype, [2], [-1, 2] if b.chance(0.5) else [0, 1])
    shape = list(x.shape)
    shape.insert(ax % rank, depth)
    ins = [r.name, b.const("int64", [], [depth]), values]
    b.node("OneHot", ins, [(vdtype, tuple(shape))], True, 2, axis=ax)
    return True


def shape_ops(b: Builder) -> bool:
    """Shape (start/end sometimes) of a pool tensor, then ConstantOfShape of it (a float or
    int value) half the time; or Size; or Range of constant start, limit and delta."""
    kind = b.choice(("shape", "shape", "size", "range"))
    if kind == "range":
        dtype = b.choice((FLOAT, "int64", "int32"))
        start, delta = int(b.rng.integers(-5, 6)), int(b.choice((1, 2, 3, -1, -2)))
        n = int(b.rng.integers(1, 14))
        scale = 0.5 if dtype == FLOAT else 1
        vals = [start * scale, (start + n * delta) * scale, delta * scale]
        ins = [b.const(dtype, [], [v]) for v in vals]
        b.node("Range", ins, [(dtype, (n,))], True, abs(start) + 14 * 3)
        return True
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=(*NUMERIC, BOOL))
    if x is None:
        return False
    rank = len(x.shape)
    if kind == "size":
        b.node("Size", [x.name], [("int64", ())], True, x.size)
        return True
    lo = int(b.rng.integers(-rank, rank)) if b.chance(0.3) else 0
    hi = int(b.rng.integers(lo % rank + 1, rank + 1)) if b.chance(0.3) else rank
    attrs = {**({"start": lo} if lo else {}), **({"end": hi} if hi != rank else {})}
    dims = x.shape[lo % rank : hi]
    (s,) = b.node("Shape", [x.name], [("int64", (len(dims),))], True, max(dims), **attrs)
    if b.chance(0.5):
        dtype = b.choice((FLOAT, "int32", "int64"))
        value = {"tensor": {"dtype": dtype, "values": [1.5 if dtype == FLOAT else -3]}}
        b.node("ConstantOfShape", [s.name], [(dtype, dims)], True, 3, value=value)
    return True


EINSUM = {  # rank of the first operand -> (equation, second operand's shape from the first's, output shape)
    2: (
        ("ij,jk->ik", lambda s: (s[1], 5), lambda s: (s[0], 5)),
        ("ij,kj->ik", lambda s: (3, s[1]), lambda s: (s[0], 3)),
        ("ij,ij->i", lambda s: s, lambda s: (s[0],)),
        ("ij->ji", None, lambda s: (s[1], s[0])),
        ("ij->", None, lambda s: ()),
    ),
    3: (
        ("bij,bjk->bik", lambda s: (s[0], s[2], 3), lambda s: (s[0], s[1], 3)),
        ("bij,jk->bik", lambda s: (s[2], 3), lambda s: (s[0], s[1], 3)),
        ("bij->bj", None, lambda s: (s[0], s[2])),
    ),
}


def einsum(b: Builder) -> bool:
    """Einsum of a 2-D or 3-D tensor: matrix products with a constant (batched, transposed),
    a row-wise dot, a transpose or a sum (``EINSUM``)."""
    x = b.pick(lambda t: len(t.shape) in EINSUM, max_mag=100)
    if x is None:
        return False
    eq, other, out = b.choice(EINSUM[len(x.shape)])
    ins = [x.name] + ([b.const(FLOAT, other(x.shape), dist="normal", scale=0.5)] if other else [])
    bound = x.mag * math.prod(x.shape) if eq.endswith("->") or "->bj" in eq else x.mag * 2 * max(x.shape)
    b.node("Einsum", ins, [(FLOAT, out(x.shape))], False, bound, equation=eq)
    return True


def compress(b: Builder) -> bool:
    """Compress by a constant bool condition (at least one true; shorter than the axis
    sometimes) along an axis, or of the flattened tensor."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=(*NUMERIC, BOOL))
    if x is None:
        return False
    axis = axis_of(b, len(x.shape)) if b.chance(0.7) else None
    n = x.shape[axis] if axis is not None else x.size
    n = int(b.rng.integers(1, n + 1))
    cond = b.rng.random(n) < 0.5
    cond[int(b.rng.integers(n))] = True
    kept = int(cond.sum())
    out = (kept,) if axis is None else tuple(kept if i == axis % len(x.shape) else d for i, d in enumerate(x.shape))
    attrs = {} if axis is None else {"axis": axis}
    b.node("Compress", [x.name, b.const(BOOL, [n], cond)], [(x.dtype, out)], x.exact, x.mag, **attrs)
    return True


def reverse_sequence(b: Builder) -> bool:
    """ReverseSequence of a tensor of rank >= 2 (time and batch axes 0 and 1 either way),
    lengths a constant within the time axis."""
    x = b.pick(lambda t: len(t.shape) >= 2, dtype=(*NUMERIC, BOOL))
    if x is None:
        return False
    time_axis = int(b.chance(0.5))
    lens = b.rng.integers(1, x.shape[time_axis] + 1, size=x.shape[1 - time_axis])
    attrs = {"time_axis": time_axis, "batch_axis": 1 - time_axis}
    b.node("ReverseSequence", [x.name, b.const("int64", [len(lens)], lens)], [(x.dtype, x.shape)], x.exact, x.mag, **attrs)
    return True


def inverse_trig(b: Builder) -> bool:
    """Asin, Acos or Atanh of ``0.9 * Tanh(x)`` (inside the domain, away from its ends) or
    Tan of ``1.2 * Tanh(x)`` (inside ``(-pi/2, pi/2)``)."""
    x = b.pick(max_mag=1e4)
    if x is None:
        return False
    op = b.choice(("Asin", "Acos", "Atanh", "Tan"))
    same = [(FLOAT, x.shape)]
    (t,) = b.node("Tanh", [x.name], same, mag=1.0)
    (s,) = b.node("Mul", [t.name, b.const(FLOAT, [], [1.2 if op == "Tan" else 0.9])], same, mag=1.2)
    b.pool.remove(t)
    b.pool.remove(s)
    b.node(op, [s.name], same, mag=3.0)
    return True


def non_finite(b: Builder) -> bool:
    """IsInf (detect_negative/detect_positive sometimes off) or IsNaN of an exact tensor
    divided by a zero constant (0/0 is NaN, the rest infinite), a bool result."""
    x = b.pick(exact=True)
    if x is None:
        return False
    (q,) = b.node("Div", [x.name, b.const(FLOAT, [], [0.0])], [(FLOAT, x.shape)], True, math.inf)
    b.pool.remove(q)
    b.spec.setdefault("_internal", []).append(q.name)  # never a graph output: not finite
    if b.chance(0.3):
        b.node("IsNaN", [q.name], [(BOOL, x.shape)], True, 1)
        return True
    attrs = {k: 0 for k in ("detect_negative", "detect_positive") if b.chance(0.25)}
    b.node("IsInf", [q.name], [(BOOL, x.shape)], True, 1, **attrs)
    return True

"""Shape and data-movement ops: Expand, Tile, Range, GatherElements, GatherND, ScatterND,
ScatterElements, OneHot, DepthToSpace, SpaceToDepth, Trilu, CumSum, NonZero, EyeLike, Size,
Einsum (ONNX operators.md, the newest opset's form of each)."""

from __future__ import annotations

import math

import numpy as np

from mnnpy import dtypes
from mnnpy.ops.common import broadcast, norm_axis
from mnnpy.ops.flops import MOVES, numel, per_element, per_input_element
from mnnpy.ops.registry import Attr, In, op_schema

INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
SMALL = 4096  # elements: outputs known from shapes alone are published up to this size


def _ints(ctx, i) -> list[int]:
    return [int(v) for v in np.asarray(ctx.value(i)).reshape(-1)]


def _scalar(ctx, i, what: str):
    v = np.asarray(ctx.value(i))
    if v.size != 1:
        ctx.fail(f"{what} must hold one element, got shape {v.shape}")
    return v.reshape(-1)[0]


def _index_dtype(ctx, i: int, what: str = "indices") -> None:
    if ctx.dtypes[i] not in INDEX_DTYPES:
        ctx.fail(f"{what} must be int32/int64, got {ctx.dtypes[i]}")


@op_schema("Expand", ["input", In("shape", value=True)], ["output"], flops=MOVES)
def expand(ctx):
    """Expand: ``out.shape = broadcast(input.shape, shape)`` (bidirectional: a 1 in ``shape`` keeps the input dim)."""
    target = _ints(ctx, 1)
    if any(d < 0 for d in target):
        ctx.fail(f"shape {target} has a negative dim")
    return [(broadcast(ctx, [ctx.shapes[0], tuple(target)]), ctx.dtypes[0])]


@op_schema("Tile", ["input", In("repeats", value=True)], ["output"], flops=MOVES)
def tile(ctx):
    """Tile: ``out.shape[i] = input.shape[i] * repeats[i]``; one non-negative repeat per axis."""
    x, reps = ctx.shapes[0], _ints(ctx, 1)
    if len(reps) != len(x):
        ctx.fail(f"repeats {reps} must have one entry per input axis ({len(x)})")
    if any(r < 0 for r in reps):
        ctx.fail(f"repeats {reps} must be non-negative")
    return [(tuple(d * r for d, r in zip(x, reps)), ctx.dtypes[0])]


def range_count(ctx, start, limit, delta) -> int:
    """``max(ceil((limit - start) / delta), 0)``: exact for integers, float64 for floats."""
    if delta == 0:
        ctx.fail("delta must not be 0")
    if isinstance(start, (np.integer, int)):
        start, limit, delta = int(start), int(limit), int(delta)
        return max(-((start - limit) // delta), 0)
    n = math.ceil((float(limit) - float(start)) / float(delta))
    if not math.isfinite(n):
        ctx.fail("start, limit and delta must be finite")
    return max(int(n), 0)


@op_schema(
    "Range",
    [In("start", value=True), In("limit", value=True), In("delta", value=True)],
    ["output"],
    attrs={"stash_type": Attr("int", 1, (1, 11))},
    flops=per_element(1),
)
def range_(ctx):
    """Range: ``n = max(ceil((limit - start) / delta), 0)`` elements ``start + i * delta``."""
    if not ctx.dtypes[0] == ctx.dtypes[1] == ctx.dtypes[2]:
        ctx.fail("start, limit and delta must have one dtype")
    start, limit, delta = (_scalar(ctx, i, n) for i, n in enumerate(("start", "limit", "delta")))
    return [((range_count(ctx, start, limit, delta),), ctx.dtypes[0])]


@op_schema("GatherElements", ["data", "indices"], ["output"], attrs={"axis": Attr("int", 0)}, flops=MOVES)
def gather_elements(ctx):
    """GatherElements: ``out[i..] = data[i.. with axis -> indices[i..]]``; out.shape = indices.shape."""
    x, idx = ctx.shapes[0], ctx.shapes[1]
    if len(x) == 0 or len(idx) != len(x):
        ctx.fail("data and indices must have the same rank >= 1")
    norm_axis(ctx, ctx.attrs["axis"], len(x))
    _index_dtype(ctx, 1)
    return [(tuple(idx), ctx.dtypes[0])]


def gather_nd_shape(ctx) -> tuple[int, ...]:
    """GatherND's output shape: ``indices.shape[:-1] + data.shape[b + indices.shape[-1]:]``."""
    x, idx, b = ctx.shapes[0], ctx.shapes[1], ctx.attrs["batch_dims"]
    if len(x) < 1 or len(idx) < 1:
        ctx.fail("data and indices must have rank >= 1")
    if not 0 <= b < min(len(x), len(idx)):
        ctx.fail(f"batch_dims {b} must be in [0, min(rank(data), rank(indices)))")
    if tuple(x[:b]) != tuple(idx[:b]):
        ctx.fail(f"the first batch_dims={b} dims of data and indices must agree")
    last = idx[-1]
    if last > len(x) - b:
        ctx.fail(f"indices.shape[-1]={last} exceeds rank(data) - batch_dims = {len(x) - b}")
    return tuple(idx[:-1]) + tuple(x[b + last :])


@op_schema("GatherND", ["data", "indices"], ["output"], attrs={"batch_dims": Attr("int", 0)}, flops=MOVES)
def gather_nd(ctx):
    """GatherND: gather slices of ``data`` addressed by the last dim of ``indices`` (int64)."""
    if ctx.dtypes[1] != np.dtype(np.int64):
        ctx.fail(f"indices must be int64, got {ctx.dtypes[1]}")
    return [(gather_nd_shape(ctx), ctx.dtypes[0])]


REDUCTIONS = ("none", "add", "mul", "max", "min")


def scatter_flops(ctx, outs) -> float:
    """none (``reduction='none'``), else 1 per element of ``updates``"""
    return 0.0 if ctx.attrs["reduction"] == "none" else float(numel(ctx.shapes[2]))


@op_schema(
    "ScatterND",
    ["data", "indices", "updates"],
    ["output"],
    attrs={"reduction": Attr("string", "none", REDUCTIONS)},
    same_rank=(0,),
    flops=scatter_flops,
)
def scatter_nd(ctx):
    """ScatterND: ``out = data`` with ``out[indices[i..]] (reduction)= updates[i..]``;
    ``updates.shape = indices.shape[:-1] + data.shape[indices.shape[-1]:]``."""
    x, idx, upd = ctx.shapes
    if ctx.dtypes[1] != np.dtype(np.int64):
        ctx.fail(f"indices must be int64, got {ctx.dtypes[1]}")
    if len(x) < 1 or len(idx) < 1 or idx[-1] > len(x):
        ctx.fail("need rank(data) >= 1, rank(indices) >= 1 and indices.shape[-1] <= rank(data)")
    if tuple(upd) != tuple(idx[:-1]) + tuple(x[idx[-1] :]):
        ctx.fail(f"updates shape must be indices.shape[:-1] + data.shape[{idx[-1]}:]")
    if ctx.dtypes[2] != ctx.dtypes[0]:
        ctx.fail("data and updates must have one dtype")
    return [(tuple(x), ctx.dtypes[0])]


@op_schema(
    "ScatterElements",
    ["data", "indices", "updates"],
    ["output"],
    attrs={"axis": Attr("int", 0), "reduction": Attr("string", "none", REDUCTIONS)},
    same_rank=(0,),
    flops=scatter_flops,
)
def scatter_elements(ctx):
    """ScatterElements: ``out = data`` with ``out[i.. with axis -> indices[i..]] (reduction)= updates[i..]``."""
    x, idx, upd = ctx.shapes
    if len(x) == 0 or len(idx) != len(x) or tuple(upd) != tuple(idx):
        ctx.fail("data, indices and updates must have one rank >= 1, and updates the shape of indices")
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    if any(i > d for a, (i, d) in enumerate(zip(idx, x)) if a != axis):
        ctx.fail("indices may not be larger than data outside axis")
    _index_dtype(ctx, 1)
    if ctx.dtypes[2] != ctx.dtypes[0]:
        ctx.fail("data and updates must have one dtype")
    return [(tuple(x), ctx.dtypes[0])]


@op_schema("OneHot", ["indices", In("depth", value=True), "values"], ["output"], attrs={"axis": Attr("int", -1)}, flops=MOVES)
def one_hot(ctx):
    """OneHot: a new axis of size ``depth`` at ``axis``; ``values = [off, on]`` give the dtype."""
    idx = ctx.shapes[0]
    depth = _scalar(ctx, 1, "depth")
    if not np.isfinite(depth) or int(depth) < 1:
        ctx.fail(f"depth {depth} must be a positive number")
    if ctx.shapes[2] != (2,):
        ctx.fail(f"values must have shape (2,), got {ctx.shapes[2]}")
    axis = norm_axis(ctx, ctx.attrs["axis"], len(idx) + 1)
    out = list(idx)
    out.insert(axis, int(depth))
    return [(tuple(out), ctx.dtypes[2])]


def _block_check(ctx) -> tuple[int, int, int, int, int]:
    x = ctx.shapes[0]
    if len(x) != 4:
        ctx.fail("input must be 4-D (N, C, H, W)")
    b = ctx.attrs["blocksize"]
    if b < 1:
        ctx.fail(f"blocksize {b} must be positive")
    return (*x, b)


BLOCK_ATTRS = {"blocksize": Attr("int"), "mode": Attr("string", "DCR", ("DCR", "CRD"))}


@op_schema("DepthToSpace", ["input"], ["output"], attrs=BLOCK_ATTRS, same_rank=(0,), flops=MOVES)
def depth_to_space(ctx):
    """DepthToSpace: ``(N, C, H, W) -> (N, C / b^2, H * b, W * b)``; DCR or CRD channel order."""
    n, c, h, w, b = _block_check(ctx)
    if c % (b * b):
        ctx.fail(f"channels {c} not divisible by blocksize^2 = {b * b}")
    return [((n, c // (b * b), h * b, w * b), ctx.dtypes[0])]


@op_schema("SpaceToDepth", ["input"], ["output"], attrs=BLOCK_ATTRS, same_rank=(0,), flops=MOVES)
def space_to_depth(ctx):
    """SpaceToDepth: ``(N, C, H, W) -> (N, C * b^2, H / b, W / b)``; DCR or CRD channel order."""
    n, c, h, w, b = _block_check(ctx)
    if h % b or w % b:
        ctx.fail(f"H={h} and W={w} must be divisible by blocksize {b}")
    return [((n, c * b * b, h // b, w // b), ctx.dtypes[0])]


@op_schema(
    "Trilu", ["input", In("k", optional=True)], ["output"], attrs={"upper": Attr("int", 1, (0, 1))}, same_rank=(0,), flops=MOVES
)
def trilu(ctx):
    """Trilu: keep the upper (``j - i >= k``) or lower (``j - i <= k``) triangle of the last two dims.

    ``k`` does not change the shape, so it may be computed at run time."""
    if len(ctx.shapes[0]) < 2:
        ctx.fail("input must have rank >= 2")
    if ctx.has(1) and ctx.dtypes[1] != np.dtype(np.int64):
        ctx.fail(f"k must be int64, got {ctx.dtypes[1]}")
    return [(ctx.shapes[0], ctx.dtypes[0])]


@op_schema(
    "CumSum",
    ["x", "axis"],
    ["y"],
    attrs={"exclusive": Attr("int", 0, (0, 1)), "reverse": Attr("int", 0, (0, 1))},
    same_rank=(0,),
    flops=per_element(1),
)
def cumsum(ctx):
    """CumSum: running sums along ``axis`` (an input that does not change the shape)."""
    if len(ctx.shapes[0]) == 0:
        ctx.fail("x must have rank >= 1")
    _index_dtype(ctx, 1, "axis")
    if ctx.values[1] is not None:
        if ctx.values[1].size != 1:
            ctx.fail("axis must hold one element")
        norm_axis(ctx, int(ctx.values[1].reshape(-1)[0]), len(ctx.shapes[0]))
    return [(ctx.shapes[0], ctx.dtypes[0])]


@op_schema("NonZero", [In("X", value=True)], ["Y"], flops=per_input_element(1))
def nonzero(ctx):
    """NonZero: ``(rank, count)`` int64 indices of the non-zero elements (row-major order).

    The count depends on the input's contents (data-dependent output shape), so X is a
    value input: the session reads it at resize (a plan per distinct content)."""
    v = ctx.values[0]
    if v is None:
        ctx.fail("data-dependent output shape: the input's value must be known at resize")
    y = nonzero_indices(v)
    ctx.set_value(0, y)
    return [(y.shape, np.dtype(np.int64))]


def nonzero_indices(v: np.ndarray) -> np.ndarray:
    """``np.nonzero`` as one int64 ``(rank, count)`` array; a scalar counts as rank 1 (onnxruntime)."""
    v = np.asarray(v)
    if v.ndim == 0:
        v = v.reshape(1)
    return np.array(np.nonzero(v), dtype=np.int64).reshape(v.ndim, -1)


@op_schema("EyeLike", ["input"], ["output"], attrs={"dtype": Attr("int", None), "k": Attr("int", 0)}, flops=MOVES)
def eye_like(ctx):
    """EyeLike: a 2-D tensor of the input's shape with ones on diagonal ``k`` (dtype: ``dtype`` or the input's)."""
    x = ctx.shapes[0]
    if len(x) != 2:
        ctx.fail("input must be 2-D")
    code = ctx.attrs["dtype"]
    dt = ctx.dtypes[0] if code is None else dtypes.from_onnx(code, f"EyeLike '{ctx.op.name}'")
    if x[0] * x[1] <= SMALL:
        ctx.set_value(0, np.eye(x[0], x[1], ctx.attrs["k"], dtype=dt))
    return [(tuple(x), dt)]


@op_schema("Size", ["data"], ["size"], flops=MOVES)
def size(ctx):
    """Size: the input's element count as an int64 scalar (known from the shape, so published)."""
    n = np.array(math.prod(ctx.shapes[0]), dtype=np.int64)
    ctx.set_value(0, n)
    return [((), np.dtype(np.int64))]


def einsum_parse(ctx) -> tuple[str, tuple[int, ...]]:
    """Check ``equation`` against the input shapes; the explicit equation and output shape.

    Labels are letters; ``...`` stands for broadcast leading dims. Without ``->`` the output
    is the ellipsis dims then the labels that appear once, in alphabetical order (numpy).
    """
    eq = ctx.attrs["equation"].replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ctx.shapes):
        ctx.fail(f"equation '{eq}' has {len(terms)} operands, got {len(ctx.shapes)} inputs")
    if any(d != ctx.dtypes[0] for d in ctx.dtypes):
        ctx.fail("inputs must have one dtype")
    dims: dict[str, int] = {}
    counts: dict[str, int] = {}
    ell_shapes = []
    for term, shape in zip(terms, ctx.shapes):
        head, dots, tail = term.partition("...")
        if "." in head or "." in tail or not (head + tail).isalpha() and head + tail:
            ctx.fail(f"equation term '{term}' is malformed")
        n_ell = len(shape) - len(head) - len(tail)
        if (dots and n_ell < 0) or (not dots and n_ell != 0):
            ctx.fail(f"equation term '{term}' does not match a rank-{len(shape)} input")
        ell_shapes.append(tuple(shape[len(head) : len(head) + n_ell]) if dots else ())
        labelled = list(zip(head, shape[: len(head)])) + list(zip(tail, shape[len(shape) - len(tail) :]))
        for ch, d in labelled:
            counts[ch] = counts.get(ch, 0) + 1
            if dims.setdefault(ch, d) != d:
                ctx.fail(f"label '{ch}' has sizes {dims[ch]} and {d}")
    ell = broadcast(ctx, ell_shapes) if ell_shapes else ()
    if not arrow:
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(ch for ch, n in counts.items() if n == 1))
    head, dots, tail = rhs.partition("...")
    if "." in head or "." in tail or any(ch not in dims for ch in head + tail) or len(set(head + tail)) != len(head + tail):
        ctx.fail(f"equation output '{rhs}' is malformed or uses unknown labels")
    out = tuple(dims[ch] for ch in head) + (tuple(ell) if dots else ()) + tuple(dims[ch] for ch in tail)
    return f"{lhs}->{rhs}", out


def einsum_flops(ctx, outs) -> float:
    """inputs per point of the whole index space (output elements times the summed labels'
    sizes): the products and the sum"""
    lhs, rhs = einsum_parse(ctx)[0].split("->")
    sizes: dict[str, int] = {}
    for term, shape in zip(lhs.split(","), ctx.shapes):
        head, _, tail = term.partition("...")
        sizes.update(zip(head, shape))
        sizes.update(zip(tail, shape[len(shape) - len(tail) :]))
    return len(ctx.shapes) * numel(outs[0]) * math.prod(d for ch, d in sizes.items() if ch not in rhs)


@op_schema("Einsum", [In("Inputs", variadic=True)], ["Output"], attrs={"equation": Attr("string")}, flops=einsum_flops)
def einsum(ctx):
    """Einsum: numpy ``einsum`` semantics of ``equation`` (implicit output when there is no ``->``)."""
    if not ctx.shapes:
        ctx.fail("needs at least one input")
    equation, out = einsum_parse(ctx)
    ctx.derive(einsum=equation)
    return [(out, ctx.dtypes[0])]

"""Further ONNX ops (operators.md, the newest opset's form of each): bitwise ops, Shrink,
ReverseSequence, Compress, Unique, Det, RMSNormalization, CenterCropPad.

Compress and Unique have data-dependent output shapes: the condition (Compress) and
the data (Unique) are value inputs, read at resize.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ops.common import broadcast, norm_axis
from mnnpy.ops.flops import MOVES, numel, per_element, per_input_element
from mnnpy.ops.registry import Attr, In, op_schema

I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def _int_dtype(ctx, n: int) -> None:
    if any(d != ctx.dtypes[0] for d in ctx.dtypes[:n]):
        ctx.fail(f"input dtypes differ: {[str(d) for d in ctx.dtypes[:n]]}")
    if ctx.dtypes[0].kind not in "iu":
        ctx.fail(f"inputs must be integers, got {ctx.dtypes[0]}")


def _bitwise(ctx):
    _int_dtype(ctx, 2)
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]


for _name, _sign in (("BitwiseAnd", "&"), ("BitwiseOr", "|"), ("BitwiseXor", "^")):
    op_schema(_name, ["A", "B"], ["C"], elementwise=True, doc=f"{_name}: ``C = A {_sign} B`` on integers, broadcast.")(_bitwise)


@op_schema("BitwiseNot", ["X"], elementwise=True)
def bitwise_not(ctx):
    """BitwiseNot: ``~X`` on integers."""
    _int_dtype(ctx, 1)
    return [(ctx.shapes[0], ctx.dtypes[0])]


@op_schema(
    "Shrink",
    ["input"],
    ["output"],
    attrs={"bias": Attr("float", 0.0), "lambd": Attr("float", 0.5)},
    elementwise=True,
    flops=per_element(2),
)
def shrink(ctx):
    """Shrink: ``x + bias`` where ``x < -lambd``, ``x - bias`` where ``x > lambd``, else 0."""
    if ctx.dtypes[0].kind not in "fiu":
        ctx.fail(f"input must be numeric, got {ctx.dtypes[0]}")
    return [(ctx.shapes[0], ctx.dtypes[0])]


@op_schema(
    "ReverseSequence",
    ["input", "sequence_lens"],
    attrs={"batch_axis": Attr("int", 1, (0, 1)), "time_axis": Attr("int", 0, (0, 1))},
    same_rank=(0,),
    flops=MOVES,
)
def reverse_sequence(ctx):
    """ReverseSequence: reverse the first ``sequence_lens[b]`` steps along ``time_axis`` of each batch ``b``."""
    x = ctx.shapes[0]
    a = ctx.attrs
    if len(x) < 2 or a["batch_axis"] == a["time_axis"]:
        ctx.fail("input must have rank >= 2 and batch_axis != time_axis")
    if tuple(ctx.shapes[1]) != (x[a["batch_axis"]],):
        ctx.fail(f"sequence_lens must have shape ({x[a['batch_axis']]},)")
    return [(x, ctx.dtypes[0])]


@op_schema("Compress", ["input", In("condition", value=True)], ["output"], attrs={"axis": Attr("int", None)}, flops=MOVES)
def compress(ctx):
    """Compress: the slices of ``input`` along ``axis`` (flattened when absent) where ``condition`` is true
    (a shorter condition counts as false beyond its end)."""
    cond = np.asarray(ctx.value(1)).reshape(-1).astype(bool)
    x, axis = ctx.shapes[0], ctx.attrs["axis"]
    n = int(np.prod(x)) if axis is None else x[norm_axis(ctx, axis, len(x))]
    if cond.size > n:
        ctx.fail(f"condition has {cond.size} entries, more than the {n} slices")
    count = int(cond.sum())
    if axis is None:
        return [((count,), ctx.dtypes[0])]
    out = list(x)
    out[norm_axis(ctx, axis, len(x))] = count
    return [(tuple(out), ctx.dtypes[0])]


def unique_parts(x: np.ndarray, axis, sorted_: int):
    """``(Y, indices, inverse_indices, counts)`` of ONNX Unique (flattened when ``axis`` is None;
    ``sorted_=0`` keeps the order of first occurrence)."""
    x = np.asarray(x)
    if axis is None:
        x = x.reshape(-1)
        ax = 0
    else:
        ax = axis % x.ndim
    y, idx, inv, cnt = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=ax)
    inv = inv.reshape(-1)
    if not sorted_:
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        idx, cnt, inv = idx[order], cnt[order], rank[inv]
        y = np.take(x, idx, axis=ax)
    return y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)


@op_schema(
    "Unique",
    [In("X", value=True)],
    ["Y", "indices", "inverse_indices", "counts"],
    attrs={"axis": Attr("int", None), "sorted": Attr("int", 1, (0, 1))},
    flops=per_input_element(1),
)
def unique(ctx):
    """Unique: distinct elements (or slices along ``axis``), first-occurrence indices,
    inverse indices and counts; the count depends on the data."""
    x = ctx.value(0)
    axis = ctx.attrs["axis"]
    if axis is not None:
        norm_axis(ctx, axis, len(ctx.shapes[0]))
    parts = unique_parts(x, axis, ctx.attrs["sorted"])
    for k, p in enumerate(parts):
        ctx.set_value(k, p)
    return [(parts[0].shape, ctx.dtypes[0])] + [(p.shape, I64) for p in parts[1:]]


def det_flops(ctx, outs) -> float:
    """``2/3 M^3`` per ``(M, M)`` matrix (an LU factorisation)"""
    m = ctx.shapes[0][-1]
    return 2 / 3 * m**3 * numel(outs[0])


@op_schema("Det", ["X"], flops=det_flops)
def det(ctx):
    """Det: determinants of the trailing ``(M, M)`` matrices, shape ``X.shape[:-2]``."""
    x = ctx.shapes[0]
    if len(x) < 2 or x[-1] != x[-2]:
        ctx.fail("X must be (..., M, M)")
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"X must be a float tensor, got {ctx.dtypes[0]}")
    return [(tuple(x[:-2]), ctx.dtypes[0])]


@op_schema(
    "RMSNormalization",
    ["X", "scale"],
    attrs={"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_type": Attr("int", 1, (1,))},
    same_rank=(0,),
    flops=per_input_element(4),
)
def rms_normalization(ctx):
    """RMSNormalization (opset 23): ``X / sqrt(mean(X^2 over axis..) + epsilon) * scale``."""
    x = ctx.shapes[0]
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"X must be a float tensor, got {ctx.dtypes[0]}")
    if broadcast(ctx, [tuple(x[axis:]), ctx.shapes[1]]) != tuple(x[axis:]):
        ctx.fail(f"scale {ctx.shapes[1]} must broadcast to the normalised shape {tuple(x[axis:])}")
    return [(x, ctx.dtypes[0])]


def center_crop_pad_slices(shape, target, axes):
    """``(out_shape, crop slices on the input, pad slices on the output)`` of CenterCropPad."""
    out = list(shape)
    crop = [slice(0, s) for s in shape]
    pad = [slice(0, s) for s in shape]
    for a, t in zip(axes, target):
        d = shape[a]
        out[a] = t
        if t < d:
            b = (d - t) // 2
            crop[a] = slice(b, b + t)
            pad[a] = slice(0, t)
        elif t > d:
            b = (t - d) // 2
            pad[a] = slice(b, b + d)
    return tuple(out), tuple(crop), tuple(pad)


@op_schema(
    "CenterCropPad",
    ["input_data", In("shape", value=True)],
    ["output_data"],
    attrs={"axes": Attr("ints", [])},
    same_rank=(0,),
    flops=MOVES,
)
def center_crop_pad(ctx):
    """CenterCropPad: crop or zero-pad each of ``axes`` (all when empty) to ``shape``, centred
    (the odd element goes to the end)."""
    x = ctx.shapes[0]
    target = [int(v) for v in np.asarray(ctx.value(1)).reshape(-1)]
    axes = [norm_axis(ctx, a, len(x)) for a in ctx.attrs["axes"]] or list(range(len(x)))
    if len(target) != len(axes) or len(set(axes)) != len(axes):
        ctx.fail(f"shape {target} must have one entry per axis {axes} (axes unique)")
    if any(t < 0 for t in target):
        ctx.fail(f"shape {target} must be non-negative")
    return [(center_crop_pad_slices(x, target, axes)[0], ctx.dtypes[0])]

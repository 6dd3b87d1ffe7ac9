"""Shape and data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat,
Shape, Gather, Cast, ConstantOfShape (ONNX operators.md, opset-13+ forms: axes as inputs)."""

from __future__ import annotations

import math

import numpy as np

from mnnpy import dtypes
from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import MOVES
from mnnpy.ops.registry import Attr, In, op_schema


@op_schema("Reshape", ["data", In("shape", value=True)], ["reshaped"], attrs={"allowzero": Attr("int", 0, (0, 1))}, alias=0)
def reshape(ctx):
    """Reshape: 0 copies the input dim (unless ``allowzero``), one -1 is inferred."""
    x = ctx.shapes[0]
    target = [int(v) for v in ctx.value(1).reshape(-1)]
    out, infer = [], None
    for i, d in enumerate(target):
        if d == 0 and not ctx.attrs["allowzero"]:
            if i >= len(x):
                ctx.fail(f"shape {target}: 0 at position {i} has no input dim to copy")
            d = x[i]
        elif d == -1:
            if infer is not None:
                ctx.fail(f"shape {target} has more than one -1")
            infer = i
            d = 1
        elif d < 0:
            ctx.fail(f"shape {target} has a negative dim")
        out.append(d)
    total, known = math.prod(x), math.prod(out)
    if infer is not None:
        if known == 0 or total % known:
            ctx.fail(f"cannot infer -1 in {target} for {total} elements")
        out[infer] = total // known
    elif known != total:
        ctx.fail(f"shape {target} holds {known} elements, input has {total}")
    return [(tuple(out), ctx.dtypes[0])]


@op_schema("Flatten", ["input"], ["output"], attrs={"axis": Attr("int", 1)}, alias=0)
def flatten(ctx):
    """Flatten: ``(d0..d_{axis-1}, d_axis..d_n) -> (prod(front), prod(back))``."""
    x = ctx.shapes[0]
    axis = ctx.attrs["axis"]
    if not -len(x) <= axis <= len(x):
        ctx.fail(f"axis {axis} out of range for rank {len(x)}")
    if axis < 0:
        axis += len(x)
    return [((math.prod(x[:axis]), math.prod(x[axis:])), ctx.dtypes[0])]


def _axes(ctx, i, rank) -> list[int]:
    axes = [int(a) for a in ctx.value(i).reshape(-1)]
    norm = [norm_axis(ctx, a, rank, "axes entry") for a in axes]
    if len(set(norm)) != len(norm):
        ctx.fail(f"axes {axes} repeat an axis")
    return norm


@op_schema("Squeeze", ["data", In("axes", optional=True, value=True)], ["squeezed"], alias=0)
def squeeze(ctx):
    """Squeeze: drop the given size-1 axes (all size-1 axes when ``axes`` is absent)."""
    x = ctx.shapes[0]
    if ctx.has(1):
        axes = _axes(ctx, 1, len(x))
        for a in axes:
            if x[a] != 1:
                ctx.fail(f"cannot squeeze axis {a} of size {x[a]}")
    else:
        axes = [i for i, d in enumerate(x) if d == 1]
    return [(tuple(d for i, d in enumerate(x) if i not in axes), ctx.dtypes[0])]


@op_schema("Unsqueeze", ["data", In("axes", value=True)], ["expanded"], alias=0)
def unsqueeze(ctx):
    """Unsqueeze: insert size-1 axes at ``axes`` (indices into the output rank)."""
    x = ctx.shapes[0]
    rank = len(x) + ctx.value(1).size
    axes = set(_axes(ctx, 1, rank))
    it = iter(x)
    return [(tuple(1 if i in axes else next(it) for i in range(rank)), ctx.dtypes[0])]


@op_schema("Transpose", ["data"], ["transposed"], attrs={"perm": Attr("ints", [])}, same_rank=(0,), flops=MOVES)
def transpose(ctx):
    """Transpose: ``Y.shape[i] = X.shape[perm[i]]`` (reversed axes when ``perm`` is empty)."""
    x = ctx.shapes[0]
    perm = list(ctx.attrs["perm"]) or list(range(len(x)))[::-1]
    if sorted(perm) != list(range(len(x))):
        ctx.fail(f"perm {perm} is not a permutation of {len(x)} axes")
    return [(tuple(x[p] for p in perm), ctx.dtypes[0])]


@op_schema("Concat", [In("inputs", variadic=True)], ["concat_result"], attrs={"axis": Attr("int")}, same_rank=(0,), flops=MOVES)
def concat(ctx):
    """Concat: join along ``axis``; every other dim must agree."""
    shapes = [s for s in ctx.shapes]
    rank = len(shapes[0])
    axis = norm_axis(ctx, ctx.attrs["axis"], rank)
    for s in shapes[1:]:
        if len(s) != rank or any(a != b for i, (a, b) in enumerate(zip(s, shapes[0])) if i != axis):
            ctx.fail(f"inputs differ outside axis {axis}")
    if any(d != ctx.dtypes[0] for d in ctx.dtypes):
        ctx.fail("inputs have different dtypes")
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    if all(v is not None for v in ctx.values) and sum(math.prod(s) for s in shapes) <= 4096:
        ctx.set_value(0, np.concatenate(ctx.values, axis=axis))
    return [(tuple(out), ctx.dtypes[0])]


@op_schema(
    "Shape", ["data"], ["shape"], attrs={"start": Attr("int", 0), "end": Attr("int", 2**62)}, value_from_shape=True, flops=MOVES
)
def shape(ctx):
    """Shape: the input's dims ``[start:end]`` as int64 (known at resize, so it publishes its value)."""
    dims = np.array(ctx.shapes[0], dtype=np.int64)[ctx.attrs["start"] : ctx.attrs["end"]]
    ctx.set_value(0, dims)
    return [(dims.shape, np.dtype(np.int64))]


@op_schema("Gather", ["data", "indices"], ["output"], attrs={"axis": Attr("int", 0)}, flops=MOVES)
def gather(ctx):
    """Gather: ``out.shape = data.shape[:axis] + indices.shape + data.shape[axis+1:]``."""
    x, idx = ctx.shapes[0], ctx.shapes[1]
    if len(x) == 0:
        ctx.fail("data must have rank >= 1")
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    if ctx.dtypes[1] not in (np.dtype(np.int32), np.dtype(np.int64)):
        ctx.fail(f"indices must be int32/int64, got {ctx.dtypes[1]}")
    return [(tuple(x[:axis]) + tuple(idx) + tuple(x[axis + 1 :]), ctx.dtypes[0])]


@op_schema("Cast", ["input"], ["output"], attrs={"to": Attr("int"), "saturate": Attr("int", 1)}, same_rank=(0,), flops=MOVES)
def cast(ctx):
    """Cast: convert to ONNX element type ``to`` (numpy ``astype`` semantics; float->int truncates)."""
    return [(ctx.shapes[0], dtypes.from_onnx(ctx.attrs["to"], f"Cast '{ctx.op.name}'"))]


@op_schema("ConstantOfShape", [In("input", value=True)], ["output"], attrs={"value": Attr("tensor", None)}, flops=MOVES)
def constant_of_shape(ctx):
    """ConstantOfShape: a tensor of shape ``input`` filled with ``value`` (float32 0 by default)."""
    dims = tuple(int(d) for d in ctx.value(0).reshape(-1))
    if any(d < 0 for d in dims):
        ctx.fail(f"shape {dims} has a negative dim")
    v = ctx.attrs["value"]
    return [(dims, v.dtype if v is not None else np.dtype(np.float32))]

"""Slice (opset-10+ form: starts/ends/axes/steps as inputs), ONNX operators.md #Slice."""

from __future__ import annotations

import numpy as np

from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import MOVES
from mnnpy.ops.registry import In, op_schema


def slice_params(ctx) -> list[slice]:
    """Per-axis Python ``slice`` objects after ONNX clamping rules (one per data axis)."""
    x = ctx.shapes[0]
    starts = ctx.value(1).reshape(-1).astype(np.int64)
    ends = ctx.value(2).reshape(-1).astype(np.int64)
    axes = ctx.value(3).reshape(-1).astype(np.int64) if ctx.has(3) else np.arange(len(starts))
    steps = ctx.value(4).reshape(-1).astype(np.int64) if ctx.has(4) else np.ones(len(starts), np.int64)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail("starts, ends, axes and steps must have the same length")
    out = [slice(None)] * len(x)
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = norm_axis(ctx, int(a), len(x), "axes entry")
        if a in seen:
            ctx.fail(f"axis {a} repeated in axes")
        seen.add(a)
        if st == 0:
            ctx.fail("steps must not be 0")
        out[a] = onnx_slice(int(s), int(e), int(st), x[a])
    return out


def onnx_slice(start: int, end: int, step: int, dim: int) -> slice:
    """A Python ``slice`` selecting what ONNX's Slice selects on a dim of size ``dim``
    (operators.md #Slice): a negative start or end counts from the end; then for
    ``step > 0`` both are clamped to ``[0, dim]``, for ``step < 0`` the start to
    ``[0, dim - 1]`` and the end to ``[-1, dim - 1]`` (-1: through index 0). Python's own
    clamping differs there: a backward slice starting before ``-dim`` is empty in Python,
    while ONNX starts it at index 0."""
    start += dim if start < 0 else 0
    end += dim if end < 0 else 0
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return slice(start, end if end >= 0 else None, step) if dim > 0 else slice(0, 0, step)


@op_schema(
    "Slice",
    [
        "data",
        In("starts", value=True),
        In("ends", value=True),
        In("axes", optional=True, value=True),
        In("steps", optional=True, value=True),
    ],
    ["output"],
    same_rank=(0,),
    flops=MOVES,
)
def slice_(ctx):
    """Slice: ``output = data[starts:ends:steps]`` on ``axes``, clamped as ONNX says (``onnx_slice``)."""
    x = ctx.shapes[0]
    sl = slice_params(ctx)
    ctx.derive(slices=sl)
    out = tuple(len(range(*s.indices(d))) for s, d in zip(sl, x))
    if ctx.values[0] is not None and np.prod(x) <= 4096:
        ctx.set_value(0, ctx.values[0][tuple(sl)])
    return [(out, ctx.dtypes[0])]

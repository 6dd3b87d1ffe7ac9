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
        # numpy's slice clamping equals ONNX's for every start/end, incl. INT64 extremes
        big = 2**62
        out[a] = slice(int(np.clip(s, -big, big)), int(np.clip(e, -big, big)), int(st))
    return out


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
    """Slice: ``output = data[starts:ends:steps]`` on ``axes``, clamped as numpy slicing clamps."""
    x = ctx.shapes[0]
    sl = slice_params(ctx)
    ctx.derive(slices=sl)
    out = tuple(len(range(*s.indices(d))) for s, d in zip(sl, x))
    if ctx.values[0] is not None and np.prod(x) <= 4096:
        ctx.set_value(0, ctx.values[0][tuple(sl)])
    return [(out, ctx.dtypes[0])]

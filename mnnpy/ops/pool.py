"""Pooling: AveragePool, MaxPool, GlobalAveragePool (ONNX operators.md).

``X: (N, C, *spatial) -> Y: (N, C, *out)``; window sizes follow
``mnnpy.ops.common.window_output`` (pads, auto_pad, ceil_mode, dilations).
"""

from __future__ import annotations

import math

from mnnpy.ops.common import window_output
from mnnpy.ops.conv import AUTO_PAD
from mnnpy.ops.flops import numel, per_input_element
from mnnpy.ops.registry import Attr, op_schema

POOL_ATTRS = {
    "auto_pad": Attr("string", "NOTSET", AUTO_PAD),
    "ceil_mode": Attr("int", 0, (0, 1)),
    "dilations": Attr("ints", []),
    "kernel_shape": Attr("ints"),
    "pads": Attr("ints", []),
    "strides": Attr("ints", []),
}


def numeric_input(ctx) -> None:
    """Pools take numbers (ONNX operators.md: float types, MaxPool also int8/uint8): a bool
    ``X`` fails (``ctx.fail``: the op's ``ShapeError``)."""
    if ctx.dtypes[0].kind not in "fiu":
        ctx.fail(f"X must be numeric, got {ctx.dtypes[0]}")


def pool_shape(ctx):
    """Output shape of a windowed pool: ``(N, C, *out)`` by ``window_output``."""
    numeric_input(ctx)
    x = ctx.shapes[0]
    k = list(ctx.attrs["kernel_shape"])
    if len(x) < 3 or len(k) != len(x) - 2:
        ctx.fail(f"X must be (N, C, spatial...) with {len(k)} spatial dims for kernel_shape {k}")
    a = ctx.attrs
    win = window_output(ctx, x[2:], k, a["strides"], a["dilations"], a["pads"], a["auto_pad"], a["ceil_mode"])
    return [((x[0], x[1], *win.out_sizes), ctx.dtypes[0])]


def window_flops(ctx, outs) -> float:
    """per output element: one per window tap (a sum or a comparison), 1 more for a mean"""
    taps = math.prod(ctx.attrs["kernel_shape"]) + (ctx.op.type == "AveragePool")
    return taps * numel(outs[0])


@op_schema(
    "AveragePool", ["X"], attrs={**POOL_ATTRS, "count_include_pad": Attr("int", 0, (0, 1))}, same_rank=(0,), flops=window_flops
)
def average_pool(ctx):
    """AveragePool: mean over each window; pads counted in the divisor only with ``count_include_pad``."""
    return pool_shape(ctx)


@op_schema(
    "MaxPool",
    ["X"],
    ["Y", "Indices"],
    attrs={**POOL_ATTRS, "storage_order": Attr("int", 0, (0, 1))},
    same_rank=(0,),
    flops=window_flops,
)
def max_pool(ctx):
    """MaxPool: max over each window (pads are -inf); optional ``Indices`` output (int64, flat NCHW)."""
    (y,) = pool_shape(ctx)
    import numpy as np

    return [y, (y[0], np.dtype(np.int64))]


@op_schema("GlobalAveragePool", ["X"], same_rank=(0,), flops=per_input_element(1))
def global_average_pool(ctx):
    """GlobalAveragePool: ``Y[n, c, 1, ...] = mean(X[n, c, ...])``."""
    numeric_input(ctx)
    x = ctx.shapes[0]
    if len(x) < 3:
        ctx.fail("X must be (N, C, spatial...)")
    return [((x[0], x[1]) + (1,) * (len(x) - 2), ctx.dtypes[0])]

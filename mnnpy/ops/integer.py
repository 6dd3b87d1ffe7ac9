"""Integer and quantised linear-algebra ops (ONNX operators.md): MatMulInteger,
ConvInteger (int32 results), QLinearMatMul, QLinearConv (requantised to the dtype of
``y_zero_point``).

Zero points are a scalar (per tensor) or a vector: per row of A / per column of B
(MatMul), per output channel of W (Conv). Scales follow the same shapes.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ops.common import broadcast, window_output
from mnnpy.ops.conv import _WINDOW
from mnnpy.ops.flops import numel
from mnnpy.ops.registry import In, op_schema

I32 = np.dtype(np.int32)
QUANT = (np.dtype(np.int8), np.dtype(np.uint8))


def matmul_shape(ctx, a, b) -> tuple[int, ...]:
    """numpy ``matmul`` output shape of ``a @ b`` (1-D operands promoted and squeezed)."""
    if not a or not b:
        ctx.fail("matmul operands must have rank >= 1")
    a2 = (1, *a) if len(a) == 1 else tuple(a)
    b2 = (*b, 1) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        ctx.fail(f"inner dims differ: {a} @ {b}")
    out = broadcast(ctx, [a2[:-2], b2[:-2]]) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _quant(ctx, *idx):
    for i in idx:
        if ctx.has(i) and ctx.dtypes[i] not in QUANT:
            ctx.fail(f"input {i} must be int8/uint8, got {ctx.dtypes[i]}")


def integer_matmul_flops(ctx, outs) -> float:
    """2 * K per output element (multiply-adds; K = the first operand's last dim), 3 more to requantize (QLinear)"""
    return (2 * ctx.shapes[0][-1] + 3 * (ctx.op.type == "QLinearMatMul")) * numel(outs[0])


def integer_conv_flops(ctx, outs) -> float:
    """2 * (C/group) * prod(kernel) per output element (multiply-adds), 4 more to requantize (QLinear)"""
    w = ctx.shapes[3 if ctx.op.type == "QLinearConv" else 1]
    return (2 * numel(w[1:]) + 4 * (ctx.op.type == "QLinearConv")) * numel(outs[0])


@op_schema(
    "MatMulInteger", ["A", "B", In("a_zero_point", optional=True), In("b_zero_point", optional=True)], flops=integer_matmul_flops
)
def matmul_integer(ctx):
    """MatMulInteger: ``Y = (A - a_zero_point) @ (B - b_zero_point)`` in int32."""
    _quant(ctx, 0, 1, 2, 3)
    return [(matmul_shape(ctx, ctx.shapes[0], ctx.shapes[1]), I32)]


def conv_out(ctx, x, w) -> tuple[int, ...]:
    """Output shape of a Conv-like op on ``x`` ``(N, C, ...)`` and ``w`` ``(M, C/group, ...)``."""
    a = ctx.attrs
    if len(x) < 3 or len(w) != len(x):
        ctx.fail("x must be (N, C, spatial...) and w of the same rank")
    k = list(a["kernel_shape"]) or list(w[2:])
    g = a["group"]
    if k != list(w[2:]) or g < 1 or x[1] != w[1] * g or w[0] % g:
        ctx.fail(f"kernel_shape/group do not match x {x} and w {w}")
    win = window_output(ctx, x[2:], k, a["strides"], a["dilations"], a["pads"], a["auto_pad"])
    return (x[0], w[0], *win.out_sizes)


@op_schema(
    "ConvInteger",
    ["x", "w", In("x_zero_point", optional=True), In("w_zero_point", optional=True)],
    attrs=dict(_WINDOW),
    same_rank=(0, 1),
    flops=integer_conv_flops,
)
def conv_integer(ctx):
    """ConvInteger: ``Y = conv(x - x_zero_point, w - w_zero_point)`` in int32 (padding contributes 0)."""
    _quant(ctx, 0, 1, 2, 3)
    return [(conv_out(ctx, ctx.shapes[0], ctx.shapes[1]), I32)]


@op_schema(
    "QLinearMatMul",
    ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"],
    flops=integer_matmul_flops,
)
def qlinear_matmul(ctx):
    """QLinearMatMul: ``y = saturate(rint((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)``."""
    _quant(ctx, 0, 2, 3, 5, 7)
    return [(matmul_shape(ctx, ctx.shapes[0], ctx.shapes[3]), ctx.dtypes[7])]


@op_schema(
    "QLinearConv",
    ["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale", "y_zero_point", In("B", optional=True)],
    attrs=dict(_WINDOW),
    same_rank=(0, 3),
    flops=integer_conv_flops,
)
def qlinear_conv(ctx):
    """QLinearConv: ``y = saturate(rint((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)``."""
    _quant(ctx, 0, 2, 3, 5, 7)
    if ctx.has(8) and ctx.dtypes[8] != I32:
        ctx.fail(f"B must be int32, got {ctx.dtypes[8]}")
    return [(conv_out(ctx, ctx.shapes[0], ctx.shapes[3]), ctx.dtypes[7])]

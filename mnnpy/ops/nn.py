"""BatchNormalization (inference), Softmax, MatMul, Gemm (ONNX operators.md)."""

from __future__ import annotations

import numpy as np

from mnnpy.ops.common import broadcast_shape, norm_axis
from mnnpy.ops.flops import numel, per_input_element
from mnnpy.ops.registry import Attr, In, op_schema


@op_schema(
    "BatchNormalization",
    ["X", "scale", "B", "input_mean", "input_var"],
    ["Y", "running_mean", "running_var"],
    attrs={
        "epsilon": Attr("float", 1e-5),
        "momentum": Attr("float", 0.9),
        "training_mode": Attr("int", 0, (0, 1)),
    },
    same_rank=(0,),
    flops=per_input_element(2),
)
def batch_normalization(ctx):
    """BatchNormalization over axis 1: ``Y = scale * (X - mean) / sqrt(var + epsilon) + B``.

    Inference uses ``input_mean``/``input_var``; ``training_mode`` uses the batch's own
    mean and (population) variance and also outputs ``running_* = input_* * momentum +
    batch_* * (1 - momentum)``, shape (C,).
    """
    x = ctx.shapes[0]
    c = x[1] if len(x) > 1 else 1
    for i in range(1, 5):
        if tuple(ctx.shapes[i]) != (c,):
            ctx.fail(f"input {i} must have shape ({c},)")
    return [(x, ctx.dtypes[0]), ((c,), ctx.dtypes[3]), ((c,), ctx.dtypes[4])]


@op_schema("Softmax", ["input"], ["output"], attrs={"axis": Attr("int", -1)}, same_rank=(0,), flops=per_input_element(4))
def softmax(ctx):
    """Softmax (opset-13 semantics): ``exp(x - max) / sum(exp(x - max))`` along ``axis``.

    The converter rewrites opset < 13 (coerce-to-2D at ``axis``) into this form.
    """
    norm_axis(ctx, ctx.attrs["axis"], len(ctx.shapes[0]))
    return [(ctx.shapes[0], ctx.dtypes[0])]


def matmul_flops(ctx, outs) -> float:
    """2 * K per output element (multiply-adds; K = A's last dim)"""
    return 2 * ctx.shapes[0][-1] * numel(outs[0])


@op_schema("MatMul", ["A", "B"], flops=matmul_flops)
def matmul(ctx):
    """MatMul: numpy.matmul semantics (1-D operands promoted, batch dims broadcast)."""
    a, b = ctx.shapes[0], ctx.shapes[1]
    if len(a) == 0 or len(b) == 0:
        ctx.fail("operands must have rank >= 1")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        ctx.fail(f"inner dims differ: {a2[-1]} vs {b2[-2]}")
    batch = broadcast_shape(a2[:-2], b2[:-2])
    if batch is None:
        ctx.fail("batch dims are not broadcastable")
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [(tuple(int(d) for d in out), ctx.dtypes[0])]


def gemm_flops(ctx, outs) -> float:
    """2 * K per output element (multiply-adds), 2 more with C (``beta * C`` and the sum)"""
    k = ctx.shapes[0][0] if ctx.attrs["transA"] else ctx.shapes[0][1]
    return (2 * k + 2 * ctx.has(2)) * numel(outs[0])


@op_schema(
    "Gemm",
    ["A", "B", In("C", optional=True)],
    attrs={
        "alpha": Attr("float", 1.0),
        "beta": Attr("float", 1.0),
        "transA": Attr("int", 0, (0, 1)),
        "transB": Attr("int", 0, (0, 1)),
    },
    flops=gemm_flops,
)
def gemm(ctx):
    """Gemm: ``Y = alpha * A' @ B' + beta * C`` (C unidirectionally broadcast to (M, N))."""
    a, b = ctx.shapes[0], ctx.shapes[1]
    if len(a) != 2 or len(b) != 2:
        ctx.fail("A and B must be 2-D")
    m, k = (a[1], a[0]) if ctx.attrs["transA"] else (a[0], a[1])
    k2, n = (b[1], b[0]) if ctx.attrs["transB"] else (b[0], b[1])
    if k != k2:
        ctx.fail(f"inner dims differ: {k} vs {k2}")
    if ctx.has(2):
        try:
            if np.broadcast_shapes(ctx.shapes[2], (m, n)) != (m, n):
                raise ValueError
        except ValueError:
            ctx.fail(f"C {ctx.shapes[2]} does not broadcast to ({m}, {n})")
    return [((m, n), ctx.dtypes[0])]

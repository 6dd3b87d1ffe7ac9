"""Normalisation extras, LogSoftmax/Hardmax, GlobalMaxPool, LpPool and linear
(de)quantisation (ONNX operators.md, latest-opset forms)."""

from __future__ import annotations

import math

import numpy as np

from mnnpy import dtypes
from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import numel, per_input_element
from mnnpy.ops.pool import POOL_ATTRS, numeric_input, pool_shape
from mnnpy.ops.registry import Attr, In, op_schema


def _same(ctx):
    return [(ctx.shapes[0], ctx.dtypes[0])]


def _axis_same(ctx):
    norm_axis(ctx, ctx.attrs["axis"], len(ctx.shapes[0]))
    return _same(ctx)


@op_schema("LogSoftmax", ["input"], ["output"], attrs={"axis": Attr("int", -1)}, same_rank=(0,), flops=per_input_element(4))
def log_softmax(ctx):
    """LogSoftmax (opset-13 semantics): ``x - max - log(sum(exp(x - max)))`` along ``axis``.

    The converter rewrites opset < 13 (coerce-to-2D at ``axis``) into this form."""
    return _axis_same(ctx)


@op_schema("Hardmax", ["input"], ["output"], attrs={"axis": Attr("int", -1)}, same_rank=(0,), flops=per_input_element(1))
def hardmax(ctx):
    """Hardmax (opset-13 semantics): 1 at the first maximum along ``axis``, 0 elsewhere."""
    return _axis_same(ctx)


def _stash(ctx, x_dtype):
    """Type U of the Mean/InvStdDev outputs: float32 for ``stash_type`` 1 (ONNX spec)."""
    return np.dtype(np.float32) if ctx.attrs["stash_type"] == 1 else x_dtype


@op_schema(
    "LayerNormalization",
    ["X", "Scale", In("B", optional=True)],
    ["Y", "Mean", "InvStdDev"],
    attrs={"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_type": Attr("int", 1)},
    same_rank=(0,),
    flops=per_input_element(7),
)
def layer_normalization(ctx):
    """LayerNormalization: normalise over dims ``axis..`` then ``* Scale + B`` (broadcast to
    ``X.shape[axis:]``). Mean/InvStdDev: ``X.shape[:axis] + (1,)*...`` in the stash type."""
    x = ctx.shapes[0]
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    for i in (1, 2):
        if ctx.has(i):
            try:
                if np.broadcast_shapes(ctx.shapes[i], x[axis:]) != tuple(x[axis:]):
                    raise ValueError
            except ValueError:
                ctx.fail(f"input {i} {ctx.shapes[i]} does not broadcast to {x[axis:]}")
    stat = tuple(x[:axis]) + (1,) * (len(x) - axis)
    st = _stash(ctx, ctx.dtypes[0])
    return [(x, ctx.dtypes[0]), (stat, st), (stat, st)]


@op_schema(
    "InstanceNormalization",
    ["input", "scale", "B"],
    ["output"],
    attrs={"epsilon": Attr("float", 1e-5)},
    same_rank=(0,),
    flops=per_input_element(7),
)
def instance_normalization(ctx):
    """InstanceNormalization: per (n, c) normalise over spatial dims, then ``* scale[c] + B[c]``."""
    x = ctx.shapes[0]
    if len(x) < 2:
        ctx.fail("input must be (N, C, ...)")
    for i in (1, 2):
        if tuple(ctx.shapes[i]) != (x[1],):
            ctx.fail(f"input {i} must have shape ({x[1]},)")
    return _same(ctx)


@op_schema(
    "GroupNormalization",
    ["X", "scale", "bias"],
    attrs={"epsilon": Attr("float", 1e-5), "num_groups": Attr("int"), "stash_type": Attr("int", 1)},
    same_rank=(0,),
    flops=per_input_element(7),
)
def group_normalization(ctx):
    """GroupNormalization: per (n, group) normalise, then ``* scale + bias`` per channel.

    ``scale``/``bias`` are (C,) (opset 21) or (num_groups,) (opset 18: one value per group)."""
    x = ctx.shapes[0]
    g = ctx.attrs["num_groups"]
    if len(x) < 2 or g <= 0 or x[1] % g:
        ctx.fail(f"X must be (N, C, ...) with C divisible by num_groups={g}")
    for i in (1, 2):
        if tuple(ctx.shapes[i]) not in ((x[1],), (g,)):
            ctx.fail(f"input {i} must have shape ({x[1]},) or ({g},)")
    return _same(ctx)


@op_schema(
    "LpNormalization",
    ["input"],
    ["output"],
    attrs={"axis": Attr("int", -1), "p": Attr("int", 2, (1, 2))},
    same_rank=(0,),
    flops=per_input_element(3),
)
def lp_normalization(ctx):
    """LpNormalization: ``x / ||x||_p`` along ``axis`` (0 where the norm is 0)."""
    return _axis_same(ctx)


def lrn_flops(ctx, outs) -> float:
    """``size`` + 5 per element (the sum of squares over ``size`` channels, scale, power, divide)"""
    return (ctx.attrs["size"] + 5) * numel(ctx.shapes[0])


@op_schema(
    "LRN",
    ["X"],
    attrs={"alpha": Attr("float", 1e-4), "beta": Attr("float", 0.75), "bias": Attr("float", 1.0), "size": Attr("int")},
    same_rank=(0,),
    flops=lrn_flops,
)
def lrn(ctx):
    """LRN: ``x / (bias + alpha/size * sum of x^2 over channels [c - (size-1)//2, c + ceil((size-1)/2)])**beta``."""
    if len(ctx.shapes[0]) < 2 or ctx.attrs["size"] <= 0:
        ctx.fail("X must be (N, C, ...) and size positive")
    return _same(ctx)


@op_schema(
    "MeanVarianceNormalization", ["X"], attrs={"axes": Attr("ints", [0, 2, 3])}, same_rank=(0,), flops=per_input_element(6)
)
def mean_variance_normalization(ctx):
    """MeanVarianceNormalization: ``(X - mean) / (sqrt(E[X^2] - mean^2) + 1e-9)`` over ``axes``."""
    rank = len(ctx.shapes[0])
    axes = {norm_axis(ctx, a, rank, "axes entry") for a in ctx.attrs["axes"]}
    if len(axes) != len(ctx.attrs["axes"]):
        ctx.fail("axes repeat an axis")
    return _same(ctx)


@op_schema("GlobalMaxPool", ["X"], same_rank=(0,), flops=per_input_element(1))
def global_max_pool(ctx):
    """GlobalMaxPool: ``Y[n, c, 1, ...] = max(X[n, c, ...])``."""
    numeric_input(ctx)
    x = ctx.shapes[0]
    if len(x) < 3:
        ctx.fail("X must be (N, C, spatial...)")
    if math.prod(x[2:]) == 0:
        ctx.fail("spatial dims must not be empty")
    return [((x[0], x[1]) + (1,) * (len(x) - 2), ctx.dtypes[0])]


def lp_pool_flops(ctx, outs) -> float:
    """per output element: 2 per window tap (``|x|^p`` and the sum) and 1 for the root"""
    return (2 * math.prod(ctx.attrs["kernel_shape"]) + 1) * numel(outs[0])


@op_schema("LpPool", ["X"], attrs={**POOL_ATTRS, "p": Attr("int", 2)}, same_rank=(0,), flops=lp_pool_flops)
def lp_pool(ctx):
    """LpPool: ``(sum |x|^p over each window) ** (1/p)``; padding counts as 0."""
    if ctx.attrs["p"] <= 0:
        ctx.fail("p must be positive")
    return pool_shape(ctx)


QUANT_DTYPES = (np.uint8, np.int8, np.uint16, np.int16, np.int32)


def quant_granularity(ctx, what: str) -> tuple[str, int]:
    """``("tensor" | "axis" | "block", axis)`` from the scale's shape (QuantizeLinear docs)."""
    x, s = ctx.shapes[0], ctx.shapes[1]
    if ctx.has(2) and tuple(ctx.shapes[2]) != tuple(s):
        ctx.fail(f"{what} zero point shape {ctx.shapes[2]} differs from scale shape {s}")
    if math.prod(s) == 1 and len(s) <= 1:
        return "tensor", 0
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    bs = ctx.attrs["block_size"]
    if bs <= 0:
        if len(s) != 1 or s[0] != x[axis]:
            ctx.fail(f"per-axis {what} scale must have shape ({x[axis]},)")
        return "axis", axis
    if len(s) != len(x) or any(s[i] != x[i] for i in range(len(x)) if i != axis) or s[axis] != -(-x[axis] // bs):
        ctx.fail(f"blocked {what} scale {s} does not match X {x} with block_size {bs} on axis {axis}")
    return "block", axis


@op_schema(
    "QuantizeLinear",
    ["x", "y_scale", In("y_zero_point", optional=True)],
    ["y"],
    attrs={
        "axis": Attr("int", 1),
        "block_size": Attr("int", 0),
        "output_dtype": Attr("int", 0),
        "precision": Attr("int", 0),
        "saturate": Attr("int", 1),
    },
    same_rank=(0,),
    flops=per_input_element(3),
)
def quantize_linear(ctx):
    """QuantizeLinear: ``y = saturate(round_half_even(x / y_scale) + y_zero_point)``, per tensor,
    per axis or blocked. Output type: ``output_dtype``, else the zero point's, else uint8."""
    ctx.derive(quant=quant_granularity(ctx, "QuantizeLinear"))
    code = ctx.attrs["output_dtype"]
    if code:
        dt = dtypes.from_onnx(code, f"QuantizeLinear '{ctx.op.name}' output_dtype")
        if ctx.has(2) and ctx.dtypes[2] != dt:
            ctx.fail(f"output_dtype {dt} differs from the zero point's {ctx.dtypes[2]}")
    else:
        dt = ctx.dtypes[2] if ctx.has(2) else np.dtype(np.uint8)
    if dt not in QUANT_DTYPES:
        ctx.fail(f"quantised type {dt} is not supported")
    return [(ctx.shapes[0], dt)]


@op_schema(
    "DequantizeLinear",
    ["x", "x_scale", In("x_zero_point", optional=True)],
    ["y"],
    attrs={"axis": Attr("int", 1), "block_size": Attr("int", 0), "output_dtype": Attr("int", 0)},
    same_rank=(0,),
    flops=per_input_element(2),
)
def dequantize_linear(ctx):
    """DequantizeLinear: ``y = (x - x_zero_point) * x_scale``, per tensor, per axis or blocked.
    Output type: ``output_dtype``, else the scale's."""
    ctx.derive(quant=quant_granularity(ctx, "DequantizeLinear"))
    code = ctx.attrs["output_dtype"]
    dt = dtypes.from_onnx(code, f"DequantizeLinear '{ctx.op.name}' output_dtype") if code else ctx.dtypes[1]
    if dt.kind != "f":
        ctx.fail(f"output type {dt} must be a float type")
    return [(ctx.shapes[0], dt)]

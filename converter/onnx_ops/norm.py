"""ONNX normalisation extras, LogSoftmax/Hardmax, GlobalMaxPool, LpPool and linear
(de)quantisation -> canonical forms.

Sources: ONNX Changelog.md. LogSoftmax/Hardmax before 13 coerce the input to 2-D at
``axis`` (default 1), as Softmax does. LpPool: ``ceil_mode``/``dilations`` from 18.
GroupNormalization 18 (scale/bias per group) is kept as it is: the kernel accepts
(num_groups,) and (C,) parameters. Quantize/DequantizeLinear: ``axis`` from 13,
``block_size``/``output_dtype``/``saturate`` from 19-21, ``precision`` from 25.
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op

onnx_op(
    "LayerNormalization",
    "InstanceNormalization",
    "GroupNormalization",
    "LpNormalization",
    "LRN",
    "MeanVarianceNormalization",
    "GlobalMaxPool",
    "LpPool",
    "QuantizeLinear",
    "DequantizeLinear",
)(copy_node)


@onnx_op("LogSoftmax", "Hardmax")
def softmax_like(node, ctx):
    """LogSoftmax/Hardmax: opset < 13 coerces the input to 2-D at ``axis`` (default 1):
    Shape + Flatten(axis) -> op(-1) -> Reshape back; ``axis=-1`` is one op in both."""
    t = node.op_type
    axis = ctx.attrs(node).get("axis", 1 if ctx.opset < 13 else -1)
    if ctx.opset >= 13 or axis == -1:
        ctx.emit(t, [node.input[0]], [node.output[0]], {"axis": axis}, node.name)
        return
    base = node.name or node.output[0]
    flat, shape = ctx.fresh(node.output[0] + "_2d"), ctx.fresh(node.output[0] + "_shape")
    mid = ctx.fresh(node.output[0] + "_" + t.lower())
    ctx.emit("Shape", [node.input[0]], [shape], {}, base + "_shape")
    ctx.emit("Flatten", [node.input[0]], [flat], {"axis": axis}, base + "_flatten")
    ctx.emit(t, [flat], [mid], {"axis": -1}, base)
    ctx.emit("Reshape", [mid, shape], [node.output[0]], {}, base + "_reshape")

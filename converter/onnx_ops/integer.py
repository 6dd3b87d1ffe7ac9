"""ONNX converters of the integer/quantised ops: MatMulInteger 10, ConvInteger 10,
QLinearMatMul 10 (21: float16/float8 scales), QLinearConv 10. No attribute became an
input and no default changed, so each node is copied as it is."""

from __future__ import annotations

from mnnpy.converter.registry import onnx_op
from mnnpy.ops import get_schema


@onnx_op("MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv")
def integer_op(node, ctx):
    """Copy the node as it is, keeping only attributes the canonical schema declares."""
    schema = get_schema(node.op_type)
    attrs = {k: v for k, v in ctx.attrs(node).items() if k in schema.attrs}
    ctx.emit(node.op_type, list(node.input), list(node.output), attrs, node.name)

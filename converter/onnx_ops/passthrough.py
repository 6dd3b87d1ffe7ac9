"""ONNX ops whose every opset form in 7..newest is already the canonical one.

Inputs, outputs and attributes are copied as they are (attributes the canonical
schema does not know, such as ``consumed_inputs`` of old opsets, are dropped).
"""

from __future__ import annotations

from mnnpy.converter.registry import onnx_op
from mnnpy.ops import get_schema

SAME = (
    "Relu",
    "Sigmoid",
    "Tanh",
    "Sqrt",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Identity",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "MatMul",
    "Gemm",
    "Conv",
    "ConvTranspose",
    "Transpose",
    "Concat",
    "Shape",
    "Gather",
    "Cast",
    "ConstantOfShape",
    "Flatten",
    "GlobalAveragePool",
    "AveragePool",
    "MaxPool",
    "Reshape",
)


@onnx_op(*SAME)
def passthrough(node, ctx):
    """Copy the node as it is, keeping only attributes the canonical schema declares."""
    schema = get_schema(node.op_type)
    attrs = {k: v for k, v in ctx.attrs(node).items() if k in schema.attrs}
    ctx.emit(node.op_type, list(node.input), list(node.output), attrs, node.name)

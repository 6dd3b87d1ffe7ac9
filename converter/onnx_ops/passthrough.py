"""ONNX ops whose every opset form in 7..newest is already the canonical one.

Inputs, outputs and attributes are copied as they are (attributes the canonical
schema does not know, such as ``consumed_inputs`` of old opsets, are dropped).
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op

SAME = (
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


onnx_op(*SAME)(copy_node)

"""ONNX converters of the integer/quantised ops: MatMulInteger 10, ConvInteger 10,
QLinearMatMul 10 (21: float16/float8 scales), QLinearConv 10. No attribute became an
input and no default changed, so each node is copied as it is."""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op

onnx_op("MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv")(copy_node)

"""ONNX converters of further ops whose every form in opsets 7..newest is the canonical one.

Version history (ONNX Changelog): BitwiseAnd/Or/Xor/Not since 18; Shrink 9; Swish 24;
ReverseSequence 10 (28: more dtypes); Compress 9, 11 (negative axis), 28 (dtypes); Unique 11
(28: dtypes); Det 11 (22: dtypes); RMSNormalization 23; CenterCropPad 18. No attribute
became an input and no default changed, so each node is copied as it is.
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op

EXTRA_OPS = (
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitwiseNot",
    "Shrink",
    "ReverseSequence",
    "Compress",
    "Unique",
    "Det",
    "RMSNormalization",
    "CenterCropPad",
)


onnx_op(*EXTRA_OPS)(copy_node)

"""ONNX converters of further ops whose every form in opsets 7..newest is the canonical one.

Version history (ONNX Changelog): BitwiseAnd/Or/Xor/Not since 18; Shrink 9; Swish 24;
ReverseSequence 10 (28: more dtypes); Compress 9, 11 (negative axis), 28 (dtypes); Unique 11
(28: dtypes); Det 11 (22: dtypes); RMSNormalization 23; CenterCropPad 18. No attribute
became an input and no default changed, so each node is copied as it is.
"""

from __future__ import annotations

from mnnpy.converter.registry import onnx_op
from mnnpy.ops import get_schema

EXTRA_OPS = (
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitwiseNot",
    "Shrink",
    "Swish",
    "ReverseSequence",
    "Compress",
    "Unique",
    "Det",
    "RMSNormalization",
    "CenterCropPad",
)


@onnx_op(*EXTRA_OPS)
def extra_op(node, ctx):
    """Copy the node as it is, keeping only attributes the canonical schema declares."""
    schema = get_schema(node.op_type)
    attrs = {k: v for k, v in ctx.attrs(node).items() if k in schema.attrs}
    ctx.emit(node.op_type, list(node.input), list(node.output), attrs, node.name)

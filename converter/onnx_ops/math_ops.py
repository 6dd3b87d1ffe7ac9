"""ONNX elementwise math, logic and comparison ops: every form in opsets 7..newest is the
canonical one, so each node is copied as it is.

Only attributes the canonical schema declares are kept; the ones older forms carried
(``consumed_inputs`` before opset 6, ``broadcast``/``axis`` of the logical and comparison
ops before opset 7) never appear from opset 7 on. Version changes of these ops in 7..newest
only widen dtypes (bfloat16, strings) or clarify edge cases (BitShift and Mod in opset
28), or add attributes with defaults (CastLike ``saturate`` 19, ``round_mode`` 24).
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op

MATH_OPS = (
    "PRelu",
    "Not",
    "And",
    "Or",
    "Xor",
    "BitShift",
    "Equal",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "Max",
    "Min",
    "Mean",
    "Sum",
    "Mod",
    "IsNaN",
    "IsInf",
    "Where",
    "CastLike",
)


onnx_op(*MATH_OPS)(copy_node)

"""ONNX converters of the activation table's ops (``mnnpy.ops.activation``).

Every form of these ops in opsets 7..newest is the canonical one (changes only widen
dtypes; the attributes of old opsets such as ``consumed_inputs`` are dropped), so each
node is copied as it is. Clip, whose opset-6 form holds its bounds in attributes, has
its own converter (``canonical.py``).
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op
from mnnpy.ops.activation import ACTIVATIONS

OWN_CONVERTER = ("Clip",)

onnx_op(*(name for name in ACTIVATIONS if name not in OWN_CONVERTER))(copy_node)

"""ONNX shape and data-movement ops: Expand, Tile, Range, GatherElements, GatherND, ScatterND,
ScatterElements (and the deprecated Scatter), OneHot, DepthToSpace, SpaceToDepth, Trilu, CumSum,
NonZero, EyeLike, Size, Einsum.

Opsets 7..newest (ONNX Changelog.md) differ only in attributes that gained defaults:
DepthToSpace ``mode`` (11+) and SpaceToDepth ``mode`` (28+) default to DCR, GatherND
``batch_dims`` (12+) to 0, Scatter* ``reduction`` (16+) to none, Range ``stash_type``
(27+) to float; Tile's ``tiles``/``axis`` form predates opset 6. So every node is copied
with the attributes the canonical schema declares (absent ones take their defaults).
Scatter (9-10, deprecated in 11) is ScatterElements without ``reduction``.
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op
from mnnpy.errors import ModelFormatError

SAME = (
    "Expand",
    "Tile",
    "Range",
    "GatherElements",
    "GatherND",
    "ScatterND",
    "ScatterElements",
    "OneHot",
    "DepthToSpace",
    "SpaceToDepth",
    "Trilu",
    "CumSum",
    "NonZero",
    "EyeLike",
    "Size",
    "Einsum",
)


@onnx_op(*SAME)
def movement(node, ctx):
    """Copy the node as it is, keeping only attributes the canonical schema declares."""
    if node.op_type == "Tile" and len(node.input) != 2:
        raise ModelFormatError(f"Tile '{node.name}': the opset-1 form (tiles, axis) is not supported")
    copy_node(node, ctx)


@onnx_op("Scatter")
def scatter(node, ctx):
    """Scatter (opsets 9-10) -> ScatterElements (same inputs and ``axis``)."""
    copy_node(node, ctx, "ScatterElements")

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

from mnnpy.converter.registry import onnx_op
from mnnpy.errors import ModelFormatError
from mnnpy.ops import get_schema

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


def _copy(node, ctx, type_: str) -> None:
    schema = get_schema(type_)
    attrs = {k: v for k, v in ctx.attrs(node).items() if k in schema.attrs}
    ctx.emit(type_, list(node.input), list(node.output), attrs, node.name)


@onnx_op(*SAME)
def movement(node, ctx):
    """Copy the node as it is, keeping only attributes the canonical schema declares."""
    if node.op_type == "Tile" and len(node.input) != 2:
        raise ModelFormatError(f"Tile '{node.name}': the opset-1 form (tiles, axis) is not supported")
    _copy(node, ctx, node.op_type)


@onnx_op("Scatter")
def scatter(node, ctx):
    """Scatter (opsets 9-10) -> ScatterElements (same inputs and ``axis``)."""
    _copy(node, ctx, "ScatterElements")

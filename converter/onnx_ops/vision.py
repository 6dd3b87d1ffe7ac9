"""ONNX converters of the vision ops.

Version history (ONNX Changelog): MaxUnpool 9, 11 (output_shape input semantics), 22
(dtypes); Col2Im 18; GridSample 16 (modes ``bilinear``/``nearest``/``bicubic``, 4-D),
20 (modes renamed ``linear``/``nearest``/``cubic``, N-D), 22 (dtypes); RoiAlign 10, 16
(``coordinate_transformation_mode`` added, default ``half_pixel``; opset 10 behaves as
``output_half_pixel``), 22 (dtypes); NonMaxSuppression 10, 11 (doc); AffineGrid 20.
"""

from __future__ import annotations

from mnnpy.converter.registry import copy_node, onnx_op

GRID_MODES = {"bilinear": "linear", "bicubic": "cubic"}


onnx_op("MaxUnpool", "Col2Im", "NonMaxSuppression", "AffineGrid")(copy_node)


@onnx_op("GridSample")
def grid_sample(node, ctx):
    """GridSample: opset-16 mode names (and its default ``bilinear``) -> opset-20 names."""
    a = ctx.attrs(node)
    mode = a.get("mode", "bilinear" if ctx.opset < 20 else "linear")
    a["mode"] = GRID_MODES.get(mode, mode)
    ctx.emit("GridSample", list(node.input), list(node.output), a, node.name)


@onnx_op("RoiAlign")
def roi_align(node, ctx):
    """RoiAlign: opset 10 has no ``coordinate_transformation_mode`` and behaves as ``output_half_pixel``."""
    a = ctx.attrs(node)
    if ctx.opset < 16:
        a["coordinate_transformation_mode"] = "output_half_pixel"
    ctx.emit("RoiAlign", list(node.input), list(node.output), a, node.name)

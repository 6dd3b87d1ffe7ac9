"""Resize (opset-13+/18 form), ONNX operators.md #Resize.

Output size per axis: ``sizes`` if given, else ``floor(in * scale)``. The converter
turns Upsample and opset-10/11 Resize into this form (scales or sizes, never both).
"""

from __future__ import annotations

import math

from mnnpy import limits
from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import numel
from mnnpy.ops.geometry import ResizeGeometry, source_coords
from mnnpy.ops.registry import Attr, In, op_schema

# bytes per output index along a resized axis for its tables: the float32 source coordinate,
# then per tap (cubic: 4) an int64 input index and a float64 weight, and float64 temporaries
TABLE_BYTES = 72
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")


def resize_scales_sizes(ctx) -> tuple[list[float], list[int]]:
    """Per-axis (scales, output sizes) after ``axes`` and ``keep_aspect_ratio_policy``."""
    x = ctx.shapes[0]
    r = len(x)
    axes = [norm_axis(ctx, a, r, "axes entry") for a in ctx.attrs["axes"]] or list(range(r))
    has_scales = ctx.has(2) and ctx.value(2).size > 0
    has_sizes = ctx.has(3) and ctx.value(3).size > 0
    if has_scales == has_sizes:
        ctx.fail("exactly one of scales and sizes must be given")
    scales, sizes = [1.0] * r, list(x)
    if has_scales:
        vals = [float(v) for v in ctx.value(2).reshape(-1)]
        if len(vals) != len(axes) or any(v <= 0 for v in vals):
            ctx.fail(f"scales {vals} must be positive, one per axis of {axes}")
        for a, s in zip(axes, vals):
            scales[a], sizes[a] = s, int(math.floor(x[a] * s))
    else:
        vals = [int(v) for v in ctx.value(3).reshape(-1)]
        if len(vals) != len(axes) or any(v <= 0 for v in vals):
            ctx.fail(f"sizes {vals} must be positive, one per axis of {axes}")
        policy = ctx.attrs["keep_aspect_ratio_policy"]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(vals[i] / x[a] for i, a in enumerate(axes))
            vals = [int(round(s * x[a])) for a in axes]
            for a in axes:
                scales[a] = s
        for i, a in enumerate(axes):
            sizes[a] = vals[i]
            if policy == "stretch":
                scales[a] = vals[i] / x[a]
    return scales, sizes


def resize_flops(ctx, outs) -> float:
    """per output element: none (nearest), 3 (linear) or 8 (cubic) per resized axis (one
    interpolation step per axis)"""
    per_axis = {"nearest": 0, "linear": 3, "cubic": 8}[ctx.attrs["mode"]]
    resized = sum(1 for a, b in zip(ctx.shapes[0], outs[0]) if a != b)
    return per_axis * resized * numel(outs[0])


@op_schema(
    "Resize",
    ["X", In("roi", optional=True, value=True), In("scales", optional=True, value=True), In("sizes", optional=True, value=True)],
    attrs={
        "antialias": Attr("int", 0, (0,)),
        "axes": Attr("ints", []),
        "coordinate_transformation_mode": Attr("string", "half_pixel", COORD_MODES),
        "cubic_coeff_a": Attr("float", -0.75),
        "exclude_outside": Attr("int", 0, (0, 1)),
        "extrapolation_value": Attr("float", 0.0),
        "keep_aspect_ratio_policy": Attr("string", "stretch", ("stretch", "not_larger", "not_smaller")),
        "mode": Attr("string", "nearest", ("nearest", "linear", "cubic")),
        "nearest_mode": Attr("string", "round_prefer_floor", ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
    },
    same_rank=(0,),
    flops=resize_flops,
)
def resize(ctx):
    """Resize: nearest/linear/cubic interpolation on any axes; see ``resize_scales_sizes``.

    Geometry ``resize``: a ``ResizeGeometry`` (scales, sizes, roi, and the source
    coordinates of every axis that moves). The output's size is checked, and the tables'
    charged (``TABLE_BYTES`` per index of a moved axis), before they are computed."""
    scales, sizes = resize_scales_sizes(ctx)
    x, ctm = ctx.shapes[0], ctx.attrs["coordinate_transformation_mode"]
    roi = resize_roi(ctx)
    ctx.check_output(sizes, ctx.dtypes[0])  # before the coordinate tables, one entry per output index
    moved = [ax for ax in range(len(x)) if sizes[ax] != x[ax] or scales[ax] != 1 or roi[ax] != (0.0, 1.0)]
    limits.charge(TABLE_BYTES * sum(sizes[ax] for ax in moved), f"Resize '{ctx.op.name}': its coordinate tables")
    coords = {ax: source_coords(ctm, sizes[ax], x[ax], scales[ax], roi[ax]) for ax in moved}
    ctx.derive(resize=ResizeGeometry(tuple(scales), tuple(sizes), tuple(roi), coords))
    return [(tuple(sizes), ctx.dtypes[0])]


def resize_roi(ctx) -> list[tuple[float, float]]:
    """Per axis ``(start, end)`` of the region of interest: ``roi``'s values under
    ``tf_crop_and_resize`` (for ``axes``, or every axis), else ``(0, 1)``."""
    r = len(ctx.shapes[0])
    roi = [(0.0, 1.0)] * r
    if ctx.attrs["coordinate_transformation_mode"] == "tf_crop_and_resize":
        axes = [a % r for a in ctx.attrs["axes"]] or list(range(r))
        vals = [float(v) for v in ctx.value(1).reshape(-1)]
        na = len(vals) // 2
        if na not in (len(axes), r):
            ctx.fail(f"roi has {len(vals)} values, expected 2 per resized axis")
        for j, ax in enumerate(axes if na == len(axes) else range(r)):
            roi[ax] = (vals[j], vals[na + j])
    return roi

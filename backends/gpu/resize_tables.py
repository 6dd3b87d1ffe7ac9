"""Resize support check and source tables shared by the GPU backends.

ONNX operators.md #Resize (opset-18 form after the converter), nearest and linear over the
last two axes, ``X: (..., IH, IW) -> Y: (..., OH, OW)``. Source coordinates follow the CPU
backend's rules (``mnnpy.backends.cpu.ops.resize``). Used by ``backends/opencl/resize.py``
and ``backends/vulkan/resize.py``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.ops.resize import interp_taps, nearest_index, source_coords
from mnnpy.ops.registry import ShapeContext, get_schema
from mnnpy.ops.resize import resize_scales_sizes


def resize_context(op, infos, attrs) -> ShapeContext:
    """The Resize shape context of ``infos`` (one per op input, ``None`` where absent)."""
    return ShapeContext(
        op,
        get_schema(op.type),
        [None if i is None else i.shape for i in infos],
        [None if i is None else i.dtype for i in infos],
        [None if i is None else i.value for i in infos],
        attrs,
    )


def resize_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)``: whether a GPU backend named ``backend`` ("OpenCL", "Vulkan") runs this
    Resize: nearest/linear, no antialias, no exclude_outside, no tf_crop_and_resize,
    scales/sizes known at resize, only the last two axes (H, W) resized."""
    op, attrs, infos = info.op, info.attrs, info.inputs
    mode, ctm = attrs["mode"], attrs["coordinate_transformation_mode"]
    if mode not in ("nearest", "linear"):
        return False, f"Resize mode '{mode}' ({backend} runs nearest and linear)"
    if attrs.get("antialias", 0):
        return False, f"Resize antialias ({backend} has no antialias filter)"
    if attrs["exclude_outside"]:
        return False, f"Resize exclude_outside=1 ({backend} does not renormalise taps)"
    if ctm == "tf_crop_and_resize":
        return False, f"Resize tf_crop_and_resize (roi crop with extrapolation_value) is not on {backend}"
    if any(i is not None and i.value is None for i in infos[1:]):
        return False, "Resize scales/sizes computed at run time"
    shape = infos[0].shape
    scales, sizes = resize_scales_sizes(resize_context(op, infos, attrs))
    moved = [a for a in range(len(shape)) if sizes[a] != shape[a] or scales[a] != 1]
    if any(a < len(shape) - 2 for a in moved):
        return False, f"Resize of axes {moved} ({backend} resizes only the last two axes, H and W)"
    return True, ""


def axis_table(attrs, n_in: int, n_out: int, scale: float, linear: bool) -> np.ndarray:
    """The int32 table of one axis: source indices ``(n_out,)`` (nearest) or rows
    ``(lo, hi, bits of w_lo, bits of w_hi)`` ``(n_out, 4)`` (linear); identity when the axis
    is not resized. C-contiguous."""
    if n_out == n_in and scale == 1:
        idx = np.arange(n_out)
        if not linear:
            return idx.astype(np.int32)
        idx, w = np.stack([idx, idx]), np.stack([np.ones(n_out), np.zeros(n_out)])
    else:
        c = source_coords(attrs["coordinate_transformation_mode"], n_out, n_in, scale, (0.0, 1.0))
        if not linear:
            return nearest_index(c, attrs["nearest_mode"], n_in).astype(np.int32)
        idx, w = interp_taps(c, "linear", n_in, attrs["cubic_coeff_a"], 0)
    bits = w.astype(np.float32).view(np.int32)
    return np.ascontiguousarray(np.stack([idx[0], idx[1], bits[0], bits[1]], axis=1).astype(np.int32))

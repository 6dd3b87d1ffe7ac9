"""Resize support check and source tables shared by the GPU backends.

ONNX operators.md #Resize (opset-18 form after the converter), nearest and linear over the
last two axes, ``X: (..., IH, IW) -> Y: (..., OH, OW)``. Source coordinates come from the
shape function (``OpInfo.geometry["resize"]``, ``mnnpy.ops.geometry``), as on the CPU.
Used by ``backends/opencl/resize.py`` and ``backends/vulkan/resize.py``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ops.geometry import interp_taps, nearest_index


def resize_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)``: whether a GPU backend named ``backend`` ("OpenCL", "Vulkan") runs this
    Resize: nearest/linear, no antialias, no exclude_outside, no tf_crop_and_resize,
    scales/sizes known at resize, only the last two axes (H, W) resized."""
    attrs, infos = info.attrs, info.inputs
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
    shape, moved = infos[0].shape, info.geometry["resize"].moved
    if any(a < len(shape) - 2 for a in moved):
        return False, f"Resize of axes {moved} ({backend} resizes only the last two axes, H and W)"
    return True, ""


def axis_table(attrs, coords: np.ndarray | None, n_in: int, n_out: int, linear: bool) -> np.ndarray:
    """The int32 table of one axis with source coordinates ``coords`` (``None``: the axis
    does not move): source indices ``(n_out,)`` (nearest) or rows
    ``(lo, hi, bits of w_lo, bits of w_hi)`` ``(n_out, 4)`` (linear). C-contiguous."""
    if coords is None:
        idx = np.arange(n_out)
        if not linear:
            return idx.astype(np.int32)
        idx, w = np.stack([idx, idx]), np.stack([np.ones(n_out), np.zeros(n_out)])
    else:
        if not linear:
            return nearest_index(coords, attrs["nearest_mode"], n_in).astype(np.int32)
        idx, w = interp_taps(coords, "linear", n_in, attrs["cubic_coeff_a"], 0)
    bits = w.astype(np.float32).view(np.int32)
    return np.ascontiguousarray(np.stack([idx[0], idx[1], bits[0], bits[1]], axis=1).astype(np.int32))

"""Vulkan Resize (ONNX operators.md #Resize, opset-18 form after the converter): nearest and
linear (bilinear) over the last two axes, ``X: (..., IH, IW) -> Y: (..., OH, OW)`` (NCHW:
H, W), float32.

The source index (and linear weights) of every output row and column is computed at resize
with the CPU backend's rules (``mnnpy.backends.cpu.ops.resize``: every
coordinate_transformation_mode but tf_crop_and_resize, every nearest_mode) and uploaded as
one small int32 table (``backend.constant``); the shader (``shaders/vulkan/resize.comp``,
variants ``resize_nearest`` / ``resize_linear``) only gathers, one output per invocation.
Falls back for cubic, ``antialias``, ``exclude_outside``, ``tf_crop_and_resize``
(extrapolation), scales/sizes unknown at resize and resizes of other axes (N, C).
"""

from __future__ import annotations

import struct

import numpy as np

from mnnpy.backends.cpu.ops.resize import interp_taps, nearest_index, source_coords
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution
from mnnpy.ops.registry import ShapeContext, get_schema
from mnnpy.ops.resize import resize_scales_sizes


def _context(op, infos, attrs) -> ShapeContext:
    """The Resize shape context of ``infos`` (one per op input, ``None`` where absent)."""
    return ShapeContext(
        op,
        get_schema(op.type),
        [None if i is None else i.shape for i in infos],
        [None if i is None else i.dtype for i in infos],
        [None if i is None else i.value for i in infos],
        attrs,
    )


def _expand(op, inputs) -> list:
    """The scheduler passes only present inputs: put ``None`` back where ``op.inputs`` is -1."""
    it = iter(inputs)
    return [next(it) if t >= 0 else None for t in op.inputs]


def axis_table(attrs, n_in: int, n_out: int, scale: float, linear: bool) -> np.ndarray:
    """The int32 table of one axis: source indices ``(n_out,)`` (nearest) or rows
    ``(lo, hi, bits of w_lo, bits of w_hi)`` ``(n_out, 4)`` (linear); identity when the axis
    is not resized."""
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
    return np.stack([idx[0], idx[1], bits[0], bits[1]], axis=1).astype(np.int32)


@vulkan_execution("Resize")
class Resize(VulkanExecution):
    """Nearest (any ``nearest_mode``) or bilinear resize of the last two axes of X (float32)."""

    variants = ("resize_nearest", "resize_linear")  # the SPIR-V variants this Execution dispatches

    @staticmethod
    def check(op, inputs, attrs) -> tuple[bool, str]:
        mode, ctm = attrs["mode"], attrs["coordinate_transformation_mode"]
        if inputs[0].dtype != np.float32:
            return False, f"Resize of {inputs[0].dtype} data (Vulkan runs float32 only)"
        if mode not in ("nearest", "linear"):
            return False, f"Resize mode '{mode}' (Vulkan runs nearest and linear)"
        if attrs.get("antialias", 0):
            return False, "Resize antialias (Vulkan has no antialias filter)"
        if attrs["exclude_outside"]:
            return False, "Resize exclude_outside=1 (Vulkan does not renormalise taps)"
        if ctm == "tf_crop_and_resize":
            return False, "Resize tf_crop_and_resize (roi crop with extrapolation_value) is not on Vulkan"
        infos = _expand(op, inputs)
        if any(i is not None and i.value is None for i in infos[1:]):
            return False, "Resize scales/sizes computed at run time"
        shape = infos[0].shape
        scales, sizes = resize_scales_sizes(_context(op, infos, attrs))
        moved = [a for a in range(len(shape)) if sizes[a] != shape[a] or scales[a] != 1]
        if any(a < len(shape) - 2 for a in moved):
            return False, f"Resize of axes {moved} (Vulkan resizes only the last two axes, H and W)"
        return True, ""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0 or x.size == 0:
            return
        scales, _ = resize_scales_sizes(_context(self.op, self.input_infos, self.attrs))
        r = len(x.shape)
        ih, iw = (x.shape[-2] if r >= 2 else 1), x.shape[-1]
        oh, ow = (y.shape[-2] if r >= 2 else 1), y.shape[-1]
        sh = scales[-2] if r >= 2 else 1.0
        linear = self.attrs["mode"] == "linear"
        rows = axis_table(self.attrs, ih, oh, sh, linear)
        cols = axis_table(self.attrs, iw, ow, scales[-1], linear)
        table = np.concatenate([rows.reshape(-1), cols.reshape(-1)])
        self.table = self.backend.constant(table)
        push = struct.pack("<8I", y.size, self.elem_offset(x), self.elem_offset(self.table), self.elem_offset(y), ih, iw, oh, ow)
        name = "resize_linear" if linear else "resize_nearest"
        self.dispatch(name, [x, self.table, y], (2,), push, y.size)

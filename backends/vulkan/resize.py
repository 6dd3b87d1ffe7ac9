"""Vulkan Resize (ONNX operators.md #Resize, opset-18 form after the converter): nearest and
linear (bilinear) over the last two axes, ``X: (..., IH, IW) -> Y: (..., OH, OW)`` (NCHW:
H, W), float32.

The source index (and linear weights) of every output row and column is computed at resize
from the shape function's source coordinates (``mnnpy.ops.geometry``: every
coordinate_transformation_mode but tf_crop_and_resize, every nearest_mode) and uploaded as
one small int32 table (``backend.constant``); the shader (``shaders/vulkan/resize.comp``,
variants ``resize_nearest`` / ``resize_linear``) only gathers, one output per invocation.
Falls back for cubic, ``antialias``, ``exclude_outside``, ``tf_crop_and_resize``
(extrapolation), scales/sizes unknown at resize and resizes of other axes (N, C).
"""

from __future__ import annotations

import struct

import numpy as np

from mnnpy.backends.gpu.checks import data_check
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.resize_tables import axis_table, resize_check
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution


@vulkan_execution("Resize")
class Resize(VulkanExecution):
    """Nearest (any ``nearest_mode``) or bilinear resize of the last two axes of X (float32)."""

    variants = ("resize_nearest", "resize_linear")  # the SPIR-V variants this Execution dispatches

    check = checked_by(data_check, resize_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0 or x.size == 0:
            return
        coords = self.geometry["resize"].coords
        r = len(x.shape)
        ih, iw = (x.shape[-2] if r >= 2 else 1), x.shape[-1]
        oh, ow = (y.shape[-2] if r >= 2 else 1), y.shape[-1]
        linear = self.attrs["mode"] == "linear"
        rows = axis_table(self.attrs, coords.get(r - 2), ih, oh, linear)
        cols = axis_table(self.attrs, coords.get(r - 1), iw, ow, linear)
        table = np.concatenate([rows.reshape(-1), cols.reshape(-1)])
        self.table = self.backend.constant(table)
        push = struct.pack("<8I", y.size, self.elem_offset(x), self.elem_offset(self.table), self.elem_offset(y), ih, iw, oh, ow)
        name = "resize_linear" if linear else "resize_nearest"
        self.dispatch(name, [x, self.table, y], (2,), push, y.size)

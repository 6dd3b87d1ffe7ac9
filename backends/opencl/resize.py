"""OpenCL Resize (ONNX operators.md #Resize, opset-18 form after the converter): nearest and
linear (bilinear) over the last two axes, ``X: (..., IH, IW) -> Y: (..., OH, OW)`` (NCHW: H, W).

The source index (and linear weights) of every output row and column is computed at
resize from the shape function's source coordinates (``mnnpy.ops.geometry``: coordinate
transformation modes, nearest rounding modes, as on the CPU), uploaded as small int tables; the kernels
(``shaders/opencl/resize.cl``) only gather. Falls back for cubic, ``antialias``,
``exclude_outside``, ``tf_crop_and_resize`` (extrapolation) and resizes of other axes.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backends.gpu.checks import data_check
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.resize_tables import axis_table, resize_check
from mnnpy.backends.opencl.execution import OpenCLExecution
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "resize.cl"


@opencl_execution("Resize")
class Resize(OpenCLExecution):
    """Nearest (any ``nearest_mode``) or bilinear resize of the last two axes of X (float32)."""

    check = checked_by(data_check, resize_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        coords = self.geometry["resize"].coords
        r = len(x.shape)
        ih, iw = (x.shape[-2] if r >= 2 else 1), x.shape[-1]
        oh, ow = (y.shape[-2] if r >= 2 else 1), y.shape[-1]
        planes = math.prod(x.shape[:-2])
        linear = self.attrs["mode"] == "linear"
        # kept on self: the device tables must live as long as the launch
        self.htab = self.backend.constant(axis_table(self.attrs, coords.get(r - 2), ih, oh, linear))
        self.wtab = self.backend.constant(axis_table(self.attrs, coords.get(r - 1), iw, ow, linear))
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += tuple(np.int32(v) for v in (ih, iw, oh, ow, planes)) + (self.htab.buffer, self.wtab.buffer)
        name = "resize_linear" if linear else "resize_nearest"
        self.enqueue(SOURCE, name, [], args, (-(-ow // 4), oh, planes))  # 4 outputs per work item

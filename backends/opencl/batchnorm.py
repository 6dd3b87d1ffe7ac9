"""OpenCL BatchNormalization, inference mode (ONNX operators.md #BatchNormalization).

``X: (N, C, D1, ...)``, constant ``scale, B, input_mean, input_var: (C,)`` folded at resize
(numpy, float64) into ``s = scale / sqrt(var + epsilon)``, ``t = B - mean * s``; the run is
the ``affine`` kernel of ``shaders/opencl/elementwise.cl``: ``Y = X * s[c] + t[c]``.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.gpu.norm import batchnorm_check, batchnorm_fold
from mnnpy.backends.opencl.activation import activation
from mnnpy.backends.opencl.registry import opencl_execution


@opencl_execution("BatchNormalization")
class BatchNormalization(Execution):
    """``Y = X * s[c] + t[c]`` per channel (axis 1) with constant statistics."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return batchnorm_check(info, "OpenCL")

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        s, t = batchnorm_fold(self.input_infos[1:5], self.attrs["epsilon"])
        self.scale = self.backend.weights(s.astype(np.float32))
        self.shift = self.backend.weights(t.astype(np.float32))
        channels = x.shape[1] if len(x.shape) > 1 else 1
        inner = math.prod(x.shape[2:])
        option, a0, a1 = activation("")
        args = (x.buffer, np.int32(x.elem_offset), self.scale.buffer, self.shift.buffer, y.buffer, np.int32(y.elem_offset))
        args += (np.int32(y.size), np.int32(inner), np.int32(channels), a0, a1)
        rows = y.size // inner if inner else 0
        self.launch = self.backend.launch("elementwise.cl", "affine", [option], args, (-(-inner // 4), rows))

    def on_execute(self, inputs, outputs):
        self.launch()

"""OpenCL LayerNormalization (ONNX operators.md #LayerNormalization), output ``Y`` only.

Kernel ``layernorm`` of ``shaders/opencl/reduce.cl`` (``-D LAYERNORM``): one row of
``X.shape[axis:]`` per group slice, mean then variance by local-memory reductions.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.gpu.norm import layernorm_check
from mnnpy.backends.opencl.reduce import rows_launch
from mnnpy.backends.opencl.registry import opencl_execution


@opencl_execution("LayerNormalization")
class LayerNormalization(Execution):
    """``Y = (X - mean) / sqrt(var + epsilon) * Scale + B`` with statistics over dims
    ``axis..`` of ``X`` (float32, any rank); ``Scale``/``B`` broadcast to ``X.shape[axis:]``
    (constants are expanded at resize; a run-time Scale/B must already have that size).
    The ``Mean``/``InvStdDev`` outputs are not produced here (CPU fallback)."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return layernorm_check(info, "OpenCL")

    def _param(self, k: int, handle, shape):
        """The device tensor of Scale (k=1) or B (k=2): a constant is expanded to ``shape``
        and kept fp32 in every precision (``OpenCLBackend.weights``)."""
        info = self.input_infos[k]
        if info.value is None:
            return handle
        full = np.ascontiguousarray(np.broadcast_to(np.asarray(info.value, np.float32), shape))
        t = self.backend.weights(full)
        self.keep.append(t)
        return t

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        axis = self.attrs["axis"] % len(x.shape)
        rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
        self.keep = []
        scale = self._param(1, inputs[1], x.shape[axis:])
        has_bias = len(inputs) > 2 and inputs[2] is not None
        bias = self._param(2, inputs[2], x.shape[axis:]) if has_bias else scale
        args = (x.buffer, np.int32(x.elem_offset), scale.buffer, np.int32(scale.elem_offset))
        args += (bias.buffer, np.int32(bias.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += (np.int32(rows), np.int32(cols), np.float32(self.attrs["epsilon"]))
        options = ["-D LAYERNORM"] + (["-D HAS_BIAS"] if has_bias else [])
        if self.backend.half:
            options += [f"-D {slot}_F32" for slot, t in (("B", scale), ("C", bias)) if t.dtype == np.float32]
        self.launch = rows_launch(self.backend, "layernorm", options, args, rows, cols, 1, cache=True)

    def on_execute(self, inputs, outputs):
        self.launch()

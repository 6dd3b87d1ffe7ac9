"""Vulkan LayerNormalization (output ``Y``) and BatchNormalization (inference), ONNX operators.md.

LayerNormalization: variant ``layernorm`` of ``shaders/vulkan/reduce.comp``, one row of
``X.shape[axis:]`` per group slice, mean then variance by shared-memory reductions.
BatchNormalization: the four constant parameters folded at resize (numpy, float64) into a
per-channel scale and shift, run by the ``norm_affine`` variant (one pass over X).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from mnnpy.backends.gpu.norm import batchnorm_check, batchnorm_fold, layernorm_check
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.reduce import row_check, row_dispatch
from mnnpy.backends.vulkan.registry import vulkan_execution


@vulkan_execution("LayerNormalization")
class LayerNormalization(VulkanExecution):
    """``Y = (X - mean) / sqrt(var + epsilon) * Scale + B`` with statistics over dims
    ``axis..`` of ``X`` (float32, any rank); ``Scale``/``B`` broadcast to ``X.shape[axis:]``
    (constants are expanded at resize; one computed at run time must already have that many
    elements). The ``Mean``/``InvStdDev`` outputs are not produced here (CPU fallback)."""

    variants = ("layernorm",)

    @staticmethod
    def check(info) -> tuple[bool, str]:
        ok, why = layernorm_check(info, "Vulkan")
        shape = info.inputs[0].shape
        return row_check(info.op, math.prod(shape[info.attrs["axis"] % len(shape) :]) if shape else 1) if ok else (ok, why)

    def _param(self, k: int, handle, shape):
        """Scale (k=1) or B (k=2) on the device: a constant expanded to ``shape`` at resize."""
        info = self.input_infos[k]
        if info.value is None:
            return handle
        return self.backend.constant(np.broadcast_to(np.asarray(info.value, np.float32), shape))

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        axis = self.attrs["axis"] % len(x.shape)
        rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
        if rows * cols == 0:
            return
        scale = self._param(1, inputs[1], x.shape[axis:])
        has_bias = len(inputs) > 2 and inputs[2] is not None
        bias = self._param(2, inputs[2], x.shape[axis:]) if has_bias else scale
        offsets = (self.elem_offset(x), self.elem_offset(scale), self.elem_offset(bias), self.elem_offset(y))
        push = struct.pack("<6If", *offsets, rows, cols, float(self.attrs["epsilon"]))
        row_dispatch(self, "layernorm", [x, scale, bias, y], (3,), push, rows, cols, 1, spec=((7, has_bias),), cache=True)


@vulkan_execution("BatchNormalization")
class BatchNormalization(VulkanExecution):
    """``Y = X * s[c] + t[c]`` per channel (axis 1) of ``X: (N, C, D1, ...)`` float32, with
    ``s = scale / sqrt(var + epsilon)``, ``t = B - mean * s`` folded at resize from constant
    ``scale, B, input_mean, input_var: (C,)``; inference only (``training_mode`` 0)."""

    variants = ("norm_affine",)

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return batchnorm_check(info, "Vulkan")

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        s, t = batchnorm_fold(self.input_infos[1:5], self.attrs["epsilon"])
        channels = x.shape[1] if len(x.shape) > 1 else 1
        s, t = np.broadcast_to(s, (channels,)), np.broadcast_to(t, (channels,))
        self.st = self.backend.constant(np.concatenate([s, t]).astype(np.float32))
        inner = math.prod(x.shape[2:])
        offsets = (self.elem_offset(x), self.elem_offset(self.st), self.elem_offset(y))
        push = struct.pack("<6I", y.size, max(inner, 1), channels, *offsets)
        self.dispatch("norm_affine", [x, self.st, y], (2,), push, y.size)

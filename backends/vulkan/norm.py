"""Vulkan LayerNormalization (output ``Y``) and BatchNormalization (inference), ONNX operators.md.

LayerNormalization: variant ``layernorm`` of ``shaders/vulkan/reduce.comp``, one row of
``X.shape[axis:]`` per group slice, mean then variance by shared-memory reductions.
BatchNormalization: the folded per-channel scale and shift run by the ``norm_affine`` variant
(one pass over X). Shared part: ``backends/gpu/norm.py``.
"""

from __future__ import annotations

import struct

import numpy as np

from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.norm import BatchNormBase, LayerNormBase, layernorm_check
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.reduce import row_check, row_dispatch
from mnnpy.backends.vulkan.registry import vulkan_execution


@vulkan_execution("LayerNormalization")
class LayerNormalization(LayerNormBase, VulkanExecution):
    """LayerNormalization's ``Y`` (``LayerNormBase``) by one ``row_dispatch``; rows up to ``MAX_ROW``."""

    variants = ("layernorm",)

    check = checked_by(layernorm_check, row_check)

    def layernorm(self, x, scale, bias, y, rows: int, cols: int, has_bias: bool) -> None:
        """``row_dispatch`` of ``layernorm`` (specialization constant 7: B present)."""
        offsets = (self.elem_offset(x), self.elem_offset(scale), self.elem_offset(bias), self.elem_offset(y))
        push = struct.pack("<6If", *offsets, rows, cols, float(self.attrs["epsilon"]))
        row_dispatch(self, "layernorm", [x, scale, bias, y], (3,), push, rows, cols, 1, spec=((7, has_bias),), cache=True)


@vulkan_execution("BatchNormalization")
class BatchNormalization(BatchNormBase, VulkanExecution):
    """``Y = X * s[c] + t[c]`` (``BatchNormBase``) by ``norm_affine``, ``s`` and ``t`` in one table."""

    variants = ("norm_affine",)

    def affine(self, x, y, s, t, channels: int, inner: int) -> None:
        """``norm_affine`` with ``s`` and ``t`` in one float32 table ``(2C,)``."""
        self.st = self.backend.weights(np.concatenate([s, t]))
        offsets = (self.elem_offset(x), self.elem_offset(self.st), self.elem_offset(y))
        push = struct.pack("<6I", y.size, max(inner, 1), channels, *offsets)
        self.dispatch("norm_affine", [x, self.st, y], (2,), push, y.size)

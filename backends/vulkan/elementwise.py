"""Vulkan elementwise Executions: unary activations/math and broadcasting binary ops (float32).

Shaders: ``shaders/vulkan/unary.comp`` (variants ``unary_<op>``, one per op of the
activation table with a GPU expression, made by ``shaders/vulkan/build.py``) and
``binary.comp`` (variants ``binary_<op>``, listed in ``shaders/vulkan/manifest.json``). Op scalars and the
broadcast switch are specialization constants, sizes/offsets/strides push constants. Ops,
checks and scalars: ``backends/gpu/elementwise.py``.
"""

from __future__ import annotations

import struct

from mnnpy.backends.gpu.elementwise import BINARY_OPS, MAX_RANK, UNARY_OPS, BinaryBase, UnaryBase
from mnnpy.backends.gpu.layout import broadcast_strides
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution


@vulkan_execution(*UNARY_OPS)
class Unary(UnaryBase, VulkanExecution):
    """``Y = F(X)``, X and Y float32 of one shape; the scalars are specialization constants 1, 2."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        p0, p1 = self.params()
        push = struct.pack("<3I", y.size, self.elem_offset(x), self.elem_offset(y))
        self.dispatch(self.variant_for(self.op.type), [x, y], (1,), push, y.size, ((1, p0), (2, p1)))

    @staticmethod
    def variant_for(op_type: str) -> str:
        """The SPIR-V variant of ``op_type`` (``unary_<op>``, made by build.py)."""
        return f"unary_{op_type.lower()}"


@vulkan_execution(*BINARY_OPS)
class Binary(BinaryBase, VulkanExecution):
    """``C = A op B`` (float32) with numpy broadcasting."""

    def prepare(self, inputs, outputs):
        a, b = inputs[:2]
        c = outputs[0]
        dims, (sa, sb) = broadcast_strides(c.shape, a.shape, b.shape)
        broadcast = not (a.shape == b.shape == c.shape)
        pad = [0] * (MAX_RANK - len(dims))
        offsets = (self.elem_offset(a), self.elem_offset(b), self.elem_offset(c))
        push = struct.pack("<29I", c.size, len(dims), *offsets, *dims, *pad, *sa, *pad, *sb, *pad)
        self.dispatch(self.variant_for(self.op.type), [a, b, c], (2,), push, c.size, ((1, broadcast),))

    @staticmethod
    def variant_for(op_type: str) -> str:
        """The SPIR-V variant of ``op_type`` (``binary_<op>`` in manifest.json)."""
        return f"binary_{op_type.lower()}"

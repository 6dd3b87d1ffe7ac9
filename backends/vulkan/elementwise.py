"""Vulkan elementwise Executions: unary activations/math, broadcasting binary ops (arithmetic,
comparisons, logic) and conversions (Cast, Not).

Shaders: ``shaders/vulkan/unary.comp`` (variants ``unary_<op>``, one per op of the
activation table with a GPU expression, made by ``shaders/vulkan/build.py``), ``binary.comp``
(variants ``binary_<op>`` and, for integer and bool operands, ``binary_<op>_<dtype>``, listed
in ``shaders/vulkan/manifest.json``) and ``cast.comp`` (``cast_to_<dst>[_<src>]``,
``not_bool``). Op scalars and the broadcast switch are specialization constants,
sizes/offsets/strides push constants. Ops, dtypes, checks and scalars:
``backends/gpu/elementwise.py``.
"""

from __future__ import annotations

import struct

from mnnpy.backends.gpu import elementwise as family
from mnnpy.backends.gpu.dtypes import ALL, F32, code, typed
from mnnpy.backends.gpu.layout import broadcast_strides
from mnnpy.backends.vulkan.execution import VulkanExecution, variant
from mnnpy.backends.vulkan.registry import vulkan_execution


@vulkan_execution(*family.UNARY_OPS)
class Unary(family.UnaryBase, VulkanExecution):
    """``Y = F(X)``, X and Y float32 of one shape; the scalars are specialization constants 1, 2."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        p0, p1 = self.params()
        push = struct.pack("<3I", y.size, self.elem_offset(x), self.elem_offset(y))
        self.dispatch(self.variant_for(self.op.type), [x, y], (1,), push, y.size, ((1, p0), (2, p1)))

    @staticmethod
    def variant_for(op_type: str, dtype=F32) -> str:
        """The SPIR-V variant of ``op_type`` (``unary_<op>``, made by build.py; float32 only)."""
        return variant(f"unary_{op_type.lower()}", dtype)


@vulkan_execution(*family.BINARY_OPS)
class Binary(family.BinaryBase, VulkanExecution):
    """``C = A op B`` with numpy broadcasting, in the dtypes of ``BINARY_DTYPES``; Mod's ``fmod``
    is specialization constant 2."""

    def prepare(self, inputs, outputs):
        a, b = inputs[:2]
        c = outputs[0]
        dims, (sa, sb) = broadcast_strides(c.shape, a.shape, b.shape)
        broadcast = not (a.shape == b.shape == c.shape)
        pad = [0] * (family.MAX_RANK - len(dims))
        offsets = (self.elem_offset(a), self.elem_offset(b), self.elem_offset(c))
        push = struct.pack("<29I", c.size, len(dims), *offsets, *dims, *pad, *sa, *pad, *sb, *pad)
        spec = ((1, broadcast),) + (((2, bool(self.attrs["fmod"])),) if self.op.type == "Mod" else ())
        self.dispatch(self.variant_for(self.op.type, a.dtype), [a, b, c], (2,), push, c.size, spec)

    @staticmethod
    def variant_for(op_type: str, dtype=F32) -> str:
        """The SPIR-V variant of ``op_type`` on operands of ``dtype`` (``binary_<op>[_<dtype>]``
        in manifest.json)."""
        return variant(f"binary_{op_type.lower()}", dtype)


@vulkan_execution(*family.CONVERT_OPS)
class Convert(family.ConvertBase, VulkanExecution):
    """``Y = convert(X)``: Cast between float32 (either storage), int32, int64 and bool
    (``cast_to_<dst>[_<src>]``); Not (``not_bool``)."""

    variants = (*(variant(f"cast_to_{code(dst)}", src) for dst in ALL for src in ALL), "not_bool")

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        shader = "not_bool" if self.op.type == "Not" else variant(f"cast_to_{code(y.dtype if typed(y.dtype) else F32)}", x.dtype)
        push = struct.pack("<3I", y.size, self.elem_offset(x), self.elem_offset(y))
        self.dispatch(shader, [x, y], (1,), push, y.size)

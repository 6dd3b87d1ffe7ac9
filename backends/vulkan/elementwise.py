"""Vulkan elementwise Executions: unary activations/math and broadcasting binary ops (float32).

Shaders: ``shaders/vulkan/unary.comp`` (variants ``unary_<op>``) and ``binary.comp``
(variants ``binary_<op>``), listed in ``shaders/vulkan/manifest.json``. Op scalars and the
broadcast switch are specialization constants, sizes/offsets/strides push constants.
"""

from __future__ import annotations

import struct

import numpy as np

from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution

MAX_RANK = 8  # binary.comp's push-constant arrays


@vulkan_execution(
    "Relu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu", "Clip", "Sqrt", "Abs", "Neg", "Exp", "Swish"
)
class Unary(VulkanExecution):
    """``Y = F(X)``, X and Y float32 of one shape. Scalars (specialization constants 1, 2):
    HardSigmoid ``alpha, beta``; LeakyRelu ``alpha``; Clip ``min, max`` (constant inputs,
    absent = -inf / +inf)."""

    @staticmethod
    def check(op, inputs, attrs) -> tuple[bool, str]:
        """Clip's bounds must be known at resize (constants), one element each."""
        if op.type == "Clip":
            for t in inputs[1:]:
                if t.value is None:
                    return False, "Clip min/max computed at run time (Vulkan takes constant bounds)"
                if t.value.size != 1:
                    return False, "Clip min/max must be one element"
        return True, ""

    def _params(self) -> tuple[float, float]:
        t = self.op.type
        if t == "HardSigmoid":
            return float(self.attrs["alpha"]), float(self.attrs["beta"])
        if t == "LeakyRelu":
            return float(self.attrs["alpha"]), 0.0
        if t == "Clip":
            bounds = [-np.inf, np.inf]
            for k in (1, 2):
                info = self.input_infos[k] if len(self.input_infos) > k else None
                if info is not None:
                    bounds[k - 1] = float(np.asarray(info.value).reshape(()))
            return bounds[0], bounds[1]
        return 0.0, 0.0

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        p0, p1 = self._params()
        push = struct.pack("<3I", y.size, self.elem_offset(x), self.elem_offset(y))
        self.dispatch(self.variant_for(self.op.type), [x, y], (1,), push, y.size, ((1, p0), (2, p1)))

    @staticmethod
    def variant_for(op_type: str) -> str:
        """The SPIR-V variant of ``op_type`` (``unary_<op>`` in manifest.json)."""
        return f"unary_{op_type.lower()}"


def broadcast_strides(out: tuple[int, ...], *shapes: tuple[int, ...]) -> tuple[list[int], list[list[int]]]:
    """Element strides of each input ``shapes[k]`` broadcast to ``out``, with size-1 dims of
    ``out`` dropped and neighbouring dims merged where every input allows it.

    Returns ``(dims, strides)``: ``dims`` outermost first; ``strides[k][j]`` is input k's
    stride (elements) along ``dims[j]``, 0 where it is broadcast. Dims j-1 and j merge when,
    for each input, ``stride[j-1] == stride[j] * dims[j]`` (contiguous, or both 0).
    """
    per_input = []
    for shape in shapes:
        full = (1,) * (len(out) - len(shape)) + tuple(shape)
        st, step = [0] * len(out), 1
        for j in range(len(out) - 1, -1, -1):
            st[j] = step if full[j] != 1 else 0
            step *= full[j]
        per_input.append(st)
    dims: list[int] = []
    strides: list[list[int]] = [[] for _ in shapes]
    for j, d in enumerate(out):
        if d == 1:
            continue
        if dims and all(s[-1] == p[j] * d for s, p in zip(strides, per_input)):
            dims[-1] *= d
            for s, p in zip(strides, per_input):
                s[-1] = p[j]
        else:
            dims.append(d)
            for s, p in zip(strides, per_input):
                s.append(p[j])
    return dims, strides


@vulkan_execution("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min")
class Binary(VulkanExecution):
    """``C = A op B`` (float32) with numpy broadcasting (rank up to ``MAX_RANK`` after
    merging dims). Max/Min: exactly two inputs here."""

    @staticmethod
    def check(op, inputs, attrs) -> tuple[bool, str]:
        if len(inputs) != 2:
            return False, f"{op.type} with {len(inputs)} inputs (Vulkan takes two)"
        out = np.broadcast_shapes(inputs[0].shape, inputs[1].shape)
        dims = broadcast_strides(out, inputs[0].shape, inputs[1].shape)[0]
        if len(dims) > MAX_RANK:
            return False, f"broadcast of rank {len(dims)} after merging dims (Vulkan takes up to {MAX_RANK})"
        return True, ""

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

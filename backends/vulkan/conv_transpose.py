"""Vulkan ConvTranspose 2-D (ONNX operators.md #ConvTranspose), NCHW float32, gather form.

``X: (N, C, IH, IW)``, ``W: (C, M/G, KH, KW)`` (constant), ``B: (M,)`` (constant, optional)
-> ``Y: (N, M, OH, OW)``; group, strides, pads (after ``auto_pad`` / ``output_shape``),
dilations, output_padding. Each invocation of ``shaders/vulkan/conv_transpose.comp`` sums the
input taps that reach 4 output channels at 4 output columns of one stride phase (they share
taps and weights: a 4 x 4 register block); weights are re-laid at resize to
``[G][KH][KW][C/G][M/G padded to 4]`` so that the channel loop reads one vec4 per step.
"""

from __future__ import annotations

import struct
from functools import partial

import numpy as np

from mnnpy.backends.gpu.checks import activation_check, conv_transpose_check, float_check
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution

PX = 4  # output columns per invocation (conv_transpose.comp)
OCB = 4  # output channels per invocation (one vec4)
LOCAL = 64


def _shift(pad: int, k: int, d: int, s: int) -> tuple[int, int]:
    """``(sh, kb)`` with ``sh = pad + s*kb`` and ``sh - (k-1)*d >= 0``: the shader's
    dividends ``o + sh - k*d`` stay non-negative."""
    kb = max(0, -(-((k - 1) * d - pad) // s))
    return pad + s * kb, kb


@vulkan_execution("ConvTranspose")
class ConvTranspose(VulkanExecution):
    """2-D ConvTranspose with constant W (and B), float32."""

    variants = ("conv_transpose",)  # the SPIR-V variant this Execution dispatches

    check = checked_by(float_check, conv_transpose_check, partial(activation_check, activations=("",)))

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0:
            return
        a = self.attrs
        w = np.asarray(self.input_infos[1].value, np.float32)
        b_info = self.input_infos[2] if len(self.input_infos) > 2 else None
        n, c, ih, iw = x.shape
        m, oh, ow = y.shape[1], y.shape[2], y.shape[3]
        g = a["group"]
        cg, mg, kh, kw = c // g, w.shape[1], w.shape[2], w.shape[3]
        _, (sh, sw), (dh, dw), pads = self.geometry["window"].unpack()
        nmb = -(-mg // OCB)
        mgp = nmb * OCB
        wt = np.zeros((g, kh, kw, cg, mgp), np.float32)
        wt[..., :mg] = w.reshape(g, cg, mg, kh, kw).transpose(0, 3, 4, 1, 2)
        bias = np.zeros((g, mgp), np.float32)
        if b_info is not None:
            bias[:, :mg] = np.asarray(b_info.value, np.float32).reshape(g, mg)
        self.w, self.b = self.backend.constant(wt), self.backend.constant(bias)
        w_off, b_off = self.elem_offset(self.w), self.elem_offset(self.b)
        assert w_off % 4 == 0 and b_off % 4 == 0, "constants start vec4-aligned"
        sh_h, kb_h = _shift(pads[0], kh, dh, sh)
        sh_w, kb_w = _shift(pads[1], kw, dw, sw)
        cols = -(-ow // sw)  # output columns of one phase (at most)
        jb = -(-cols // PX)  # blocks of PX of them
        zmax = n * g * nmb
        ints = (self.elem_offset(x), w_off // 4, b_off // 4, self.elem_offset(y), c, ih, iw, m, oh, ow, g, cg, mg, nmb)
        ints += (kh, kw, sh, sw, dh, dw, sh_h, kb_h, sh_w, kb_w, jb, zmax)
        push = struct.pack(f"<{len(ints)}i", *ints)
        max_g = self.backend.runtime.limits["maxComputeWorkGroupCount"]
        groups = (-(-(sw * jb) // LOCAL), min(oh, max_g[1]), min(zmax, max_g[2]))
        self.dispatch("conv_transpose", [x, self.w, self.b, y], (3,), push, y.size, groups=groups, local=(LOCAL, 1, 1))

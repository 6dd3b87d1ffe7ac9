"""Vulkan Conv (ONNX operators.md #Conv), 2-D NCHW float32, with bias and the converter's fused activation.

The three paths of ``backends/gpu/conv.py``, one shader each:

* pointwise: the tiled GEMM of ``gemm.comp`` (``gemm_dispatch``), activation fused; W and B
  used in place;
* depthwise: ``conv.comp`` ``DEPTHWISE``, 4 output pixels per invocation; W and B used in place;
* general / grouped: ``conv.comp`` ``GENERAL``, 4 output channels x 4 pixels per invocation,
  weights re-laid at resize (one vec4 load per tap), bias padded to ``(G*ceil(M/G/4), 4)``;
  small outputs (ResNet's 14x14 and 7x7 stages) split the input channels over
  ``channel_split`` invocations of a work group, partial sums added in shared memory.

Fused activations: Relu, Clip(min, max), LeakyRelu(alpha), Sigmoid, HardSigmoid(alpha,
beta), HardSwish, Tanh (specialization constants). 1-D/3-D convs, weights or bias computed
at run time, non-float32 operands and grids beyond the device limits fall back to the CPU
(``check``, with the reason).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from mnnpy.backends.gpu.checks import activation_check
from mnnpy.backends.gpu.conv import CONV_CHECKS, VW, Conv2D, ConvBase
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.gemm import GEMM_VARIANTS, MAX_GROUPS, act_spec, gemm_dispatch, grid_fits
from mnnpy.backends.vulkan.registry import vulkan_execution

GROUP = 64  # invocations per work group of conv.comp
SPLIT_TARGET = 32768  # general conv: fewer invocations than this leave a big GPU idle: split input channels
MAX_SPLIT = 16


def channel_split(blocks: int, cg: int) -> int:
    """Invocations per output block of the general conv (local size z): a power of two that
    brings ``blocks * split`` towards ``SPLIT_TARGET``, each invocation keeping at least four
    input channels; 1: no split (enough blocks, or too few channels)."""
    s = 1
    while s < MAX_SPLIT and blocks * s < SPLIT_TARGET and 4 * (2 * s) <= cg:
        s *= 2
    return s


def local_size(owb: int, oh: int, split: int = 1) -> tuple[int, int, int]:
    """Work-group size for ``owb`` pixel blocks along W and ``oh`` rows, ``split`` invocations
    per block along z: ``GROUP`` invocations, as many along x as the blocks need (up to 16),
    the rest along y (fewer for short outputs)."""
    lx = 1
    while lx < owb and lx < 16 and lx * split < GROUP:
        lx *= 2
    ly = max(1, GROUP // (lx * split))
    while ly > 1 and ly // 2 >= oh:
        ly //= 2
    return lx, ly, split


def grid_check(info, backend: str) -> tuple[bool, str]:
    """Work-group counts within the limits every device has (the pointwise GEMM's grid, the
    conv shaders' (W, H, N * channel blocks) grid)."""
    x, w, attrs = info.inputs[0], info.inputs[1], info.attrs
    n, c, h, wd = x.shape
    m, g = w.shape[0], attrs.get("group", 1)
    kh, kw = w.shape[2:]
    if g == 1 and kh == kw == 1:  # perhaps the pointwise GEMM: Y[n] is (M, H*W)
        ok, why = grid_fits(m, h * wd, n)
        if not ok:
            return ok, why
    z = n * (c if g == c == m else g * math.ceil(m // g / 4))
    if z > MAX_GROUPS or h > MAX_GROUPS or wd > MAX_GROUPS:
        return False, f"Conv output of {n} x {m} x {h} x {wd} needs more work groups than {backend} guarantees ({MAX_GROUPS})"
    return True, ""


@vulkan_execution("Conv")
class Conv(ConvBase, VulkanExecution):
    """2-D Conv, float32 NCHW: pointwise GEMM, depthwise or register-blocked general shader."""

    variants = (*GEMM_VARIANTS, "conv_general", "conv_depthwise")
    check = checked_by(*CONV_CHECKS, activation_check, grid_check)

    def pointwise(self, conv: Conv2D) -> None:
        """One ``gemm_dispatch``: ``Y[n] (M, HW) = W (M, C) @ X[n] (C, HW) + B`` (B broadcast along
        HW), W and B used in place, activation fused."""
        gemm_dispatch(self, conv.w, conv.x, conv.y, conv.gemm_problem(), c=conv.b, act=conv.act)

    def depthwise(self, conv: Conv2D) -> None:
        """``conv_depthwise``: 4 output pixels of one channel per invocation (a zero bias made when B is absent)."""
        x, w, b, y = conv.x, conv.w, conv.b, conv.y
        n, c, h, wd = x.shape
        kh, kw = w.shape[2:]
        oh, ow = y.shape[2:]
        strides, dil, pads = conv.strides, conv.dil, conv.pads
        if b is None:
            b = self.backend.constant(np.zeros(c, np.float32))
        eo = self.elem_offset
        push = struct.pack("<14I", eo(x), eo(y), eo(w), eo(b), c, h, wd, oh, ow, strides[0], pads[0], pads[1], dil[0], n * c)
        owb = math.ceil(ow / VW)
        local = local_size(owb, oh)
        groups = (math.ceil(owb / local[0]), math.ceil(oh / local[1]), n * c)
        spec = (*act_spec(*conv.act), (4, kh), (5, kw), (6, strides[1]), (7, dil[1]))
        self.dispatch("conv_depthwise", [x, w, b, y], (3,), push, y.size, spec=spec, groups=groups, local=local)

    def general(self, conv: Conv2D) -> None:
        """``conv_general`` on the blocked weights (vec4 bindings), input channels split over a work group where it pays
        (``channel_split``)."""
        x, y = conv.x, conv.y
        kh, kw = conv.wv.shape[2:]
        oh, ow = y.shape[2:]
        wt = self.backend.constant_filled(conv.blocked_shape(), np.float32, conv.blocked_into)  # written into staging
        bt = self.backend.constant(conv.blocked_bias().reshape(-1, 4))
        eo = self.elem_offset
        if eo(wt) % 4 or eo(bt) % 4:  # vec4 bindings: constants sit at 256-byte boundaries
            raise AssertionError("re-laid Conv weights are not vec4-aligned")
        geometry = conv.general_ints()
        cg, nz = geometry[6], geometry[-1]
        push = struct.pack("<21I", eo(x), eo(y), eo(wt) // 4, eo(bt) // 4, *geometry)
        owb = math.ceil(ow / VW)
        local = local_size(owb, oh, channel_split(owb * oh * nz, cg))
        groups = (math.ceil(owb / local[0]), math.ceil(oh / local[1]), nz)
        spec = (*act_spec(*conv.act), (4, kh), (5, kw))
        self.dispatch("conv_general", [x, wt, bt, y], (3,), push, y.size, spec=spec, groups=groups, local=local)

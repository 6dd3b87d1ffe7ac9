"""Vulkan Conv (ONNX operators.md #Conv), 2-D NCHW float32, with bias and the converter's fused activation.

``X: (N, C, H, W)``, ``W: (M, C/G, KH, KW)`` (constant), ``B: (M,)`` (constant, optional)
-> ``Y: (N, M, OH, OW)``; geometry (pads after ``auto_pad``, strides, dilations) from the
shape function's ``window`` (``OpInfo.geometry``). One of three shaders, chosen at resize:

* pointwise (1x1, stride 1, no pads, group 1): the tiled GEMM of ``gemm.comp``,
  ``Y[n] (M, HW) = W (M, C) @ X[n] (C, HW) + B``, activation fused; W and B used in place;
* depthwise (``G == C == M``, a kernel row short enough for registers): ``conv.comp``
  ``DEPTHWISE``, 4 output pixels per invocation; W and B used in place;
* general / grouped: ``conv.comp`` ``GENERAL``, 4 output channels x 4 pixels per invocation,
  weights re-laid at resize as ``(G, ceil(M/G/4), C/G, KH, KW, 4)`` (one vec4 load per tap),
  bias padded to ``(G*ceil(M/G/4), 4)``; small outputs (ResNet's 14x14 and 7x7 stages)
  split the input channels over ``channel_split`` invocations of a work group, partial
  sums added in shared memory.

Fused activations: those of the activation table with ``fuse`` (Relu, Clip(min, max),
LeakyRelu(alpha), Sigmoid, HardSigmoid(alpha, beta), HardSwish, Tanh), by specialization
constants (``act_spec``). 1-D/3-D convs, weights or bias computed
at run time, non-float32 operands and grids beyond the device limits fall back to the CPU
(``check``, with the reason).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from mnnpy.backends.gpu.checks import conv_operands_check
from mnnpy.backends.gpu.conv_geometry import conv_bias, conv_geometry, is_pointwise
from mnnpy.backends.gpu.gemm_geometry import pointwise_conv_problem
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.gemm import GEMM_VARIANTS, MAX_GROUPS, act_spec, gemm_dispatch, grid_fits
from mnnpy.backends.vulkan.registry import vulkan_execution
from mnnpy.ops.activation import GPU

VW = 4  # output pixels along W per invocation (conv.comp)
MAX_ROW = 32  # depthwise: registers for the inputs one kernel row of VW windows spans
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


@vulkan_execution("Conv")
class Conv(VulkanExecution):
    """2-D Conv, float32 NCHW: pointwise GEMM, depthwise or register-blocked general shader."""

    variants = (*GEMM_VARIANTS, "conv_general", "conv_depthwise")

    @staticmethod
    def check(info) -> tuple[bool, str]:
        """2-D only; W and B constant float32; a known fused activation; grids within limits."""
        x, w, attrs = info.inputs[0], info.inputs[1], info.attrs
        ok, why = conv_operands_check(info, "Vulkan")
        if not ok:
            return ok, why
        bad = sorted({str(t.dtype) for t in info.present() if t.dtype != np.float32})
        if bad:
            return False, f"Conv with dtype {', '.join(bad)} (Vulkan runs float32 only)"
        act = attrs.get("activation", "")
        if act not in ("", *GPU):
            return False, f"fused activation {act!r} has no Vulkan shader"
        n, c, h, wd = x.shape
        m, g = w.shape[0], attrs.get("group", 1)
        kh, kw = w.shape[2:]
        if g == 1 and kh == kw == 1:  # perhaps the pointwise GEMM: Y[n] is (M, H*W)
            ok, why = grid_fits(m, h * wd, n)
            if not ok:
                return ok, why
        z = n * (c if g == c == m else g * math.ceil(m // g / 4))
        if z > MAX_GROUPS or h > MAX_GROUPS or wd > MAX_GROUPS:
            return False, f"Conv output of {n} x {m} x {h} x {wd} needs more work groups than Vulkan guarantees ({MAX_GROUPS})"
        return True, ""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        wv, strides, dil, pads, row = conv_geometry(self, x.shape, VW)
        m, cg, kh, kw = wv.shape
        c = x.shape[1]
        g = int(self.attrs["group"])
        act = (self.attrs["activation"], self.attrs["activation_params"])
        b = inputs[2] if len(inputs) > 2 else None
        if y.size == 0:
            return
        if is_pointwise(kh, kw, g, strides, pads):
            # Y[n] (M, HW) = W (M, C) @ X[n] (C, HW) + B (broadcast along HW)
            mnk, kw = pointwise_conv_problem(x.shape, m)
            gemm_dispatch(self, inputs[1], x, y, *mnk, c=b, act=act, **kw)
        elif g == c == m and row <= MAX_ROW:
            self._depthwise(inputs[0], inputs[1], b, y, strides, dil, pads, act)
        else:
            self._general(x, wv, y, strides, dil, pads, act)

    def _depthwise(self, x, w, b, y, strides, dil, pads, act):
        n, c, h, wd = x.shape
        kh, kw = w.shape[2:]
        oh, ow = y.shape[2:]
        if b is None:
            b = self.backend.constant(np.zeros(c, np.float32))
        eo = self.elem_offset
        push = struct.pack("<14I", eo(x), eo(y), eo(w), eo(b), c, h, wd, oh, ow, strides[0], pads[0], pads[1], dil[0], n * c)
        owb = math.ceil(ow / VW)
        local = local_size(owb, oh)
        groups = (math.ceil(owb / local[0]), math.ceil(oh / local[1]), n * c)
        spec = (*act_spec(*act), (4, kh), (5, kw), (6, strides[1]), (7, dil[1]))
        self.dispatch("conv_depthwise", [x, w, b, y], (3,), push, y.size, spec=spec, groups=groups, local=local)

    def _general(self, x, wv, y, strides, dil, pads, act):
        n, c, h, w = x.shape
        m, cg, kh, kw = wv.shape
        oh, ow = y.shape[2:]
        g = int(self.attrs["group"])
        mg = m // g
        mbg = math.ceil(mg / 4)
        wp = np.zeros((g, mbg * 4, cg, kh, kw), np.float32)
        wp[:, :mg] = wv.reshape(g, mg, cg, kh, kw)
        wp = wp.reshape(g, mbg, 4, cg, kh, kw).transpose(0, 1, 3, 4, 5, 2)  # (G, MBg, Cg, KH, KW, 4)
        bp = np.zeros((g, mbg * 4), np.float32)
        bp[:, :mg] = conv_bias(self, m).reshape(g, mg)
        wt = self.backend.constant(np.ascontiguousarray(wp))
        bt = self.backend.constant(bp.reshape(g * mbg, 4))
        eo = self.elem_offset
        if eo(wt) % 4 or eo(bt) % 4:  # vec4 bindings: constants sit at 256-byte boundaries
            raise AssertionError("re-laid Conv weights are not vec4-aligned")
        nz = n * g * mbg
        push = struct.pack(
            "<21I",
            eo(x),
            eo(y),
            eo(wt) // 4,
            eo(bt) // 4,
            c,
            h,
            w,
            m,
            oh,
            ow,
            cg,
            mg,
            mbg,
            g,
            strides[0],
            strides[1],
            pads[0],
            pads[1],
            dil[0],
            dil[1],
            nz,
        )
        owb = math.ceil(ow / VW)
        local = local_size(owb, oh, channel_split(owb * oh * nz, cg))
        groups = (math.ceil(owb / local[0]), math.ceil(oh / local[1]), nz)
        spec = (*act_spec(*act), (4, kh), (5, kw))
        self.dispatch("conv_general", [x, wt, bt, y], (3,), push, y.size, spec=spec, groups=groups, local=local)

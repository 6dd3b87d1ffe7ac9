"""2-D Conv op family shared by the GPU backends (ONNX operators.md #Conv, NCHW float32).

``X: (N, C, H, W)``, constant ``W: (M, C/G, KH, KW)``, constant ``B: (M,)`` (optional) ->
``Y: (N, M, OH, OW)``, with the converter's fused activation (``CONV_CHECKS``: operands, dtypes). ``ConvBase.prepare`` derives the
geometry (``conv_geometry``) and picks one of three paths, each a method of the backend's
class taking a ``Conv2D``:

* ``pointwise`` (1x1, stride 1, no pads, group 1): a GEMM per image
  (``Conv2D.gemm_problem``: ``Y[n] (M, HW) = W (M, C) @ X[n] (C, HW) + B``);
* ``depthwise`` (``G == C == M``, a kernel row of ``VW`` windows short enough for registers);
* ``general`` / grouped: 4 output channels x ``VW`` pixels per work item, weights re-laid by
  ``Conv2D.blocked`` for one 4-wide load per tap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.backends.gpu.checks import conv_operands_check, float_check
from mnnpy.backends.gpu.conv_geometry import conv_bias, conv_geometry, is_pointwise
from mnnpy.backends.gpu.execution import GPUExecution
from mnnpy.backends.gpu.gemm_geometry import GemmProblem, pointwise_conv_problem

CONV_CHECKS = (conv_operands_check, float_check)  # then the backend's activations and limits
VW = 4  # output pixels along W per work item of the depthwise and general kernels
MAX_ROW = 32  # depthwise: registers for the inputs one kernel row of VW windows spans


@dataclass
class Conv2D:
    """One Conv at resize: handles ``x``, ``w``, ``b`` (None: no bias), ``y``; the weights
    ``wv`` float32 ``(M, C/G, KH, KW)``, ``bias`` float32 ``(M,)`` (zeros without B), strides,
    dilations, pads (top, left, bottom, right), ``group``, the fused activation ``act``
    ``(kind, params)``."""

    x: Any
    w: Any
    b: Any
    y: Any
    wv: np.ndarray
    bias: np.ndarray
    strides: tuple
    dil: tuple
    pads: tuple
    group: int
    act: tuple

    def gemm_problem(self) -> GemmProblem:
        """The pointwise Conv as a GEMM (W the A operand, X the B operand, B the C term)."""
        return pointwise_conv_problem(self.x.shape, self.wv.shape[0])

    def blocked(self) -> tuple[np.ndarray, np.ndarray]:
        """``(weights, bias)`` of the general kernel: ``(G, MBg, C/G, KH, KW, 4)`` (each group's
        ``M/G`` output channels in blocks of 4, zero-padded) and ``(G, MBg * 4)``, float32."""
        wp = np.empty(self.blocked_shape(), np.float32)
        self.blocked_into(wp)
        return wp, self.blocked_bias()

    def blocked_shape(self) -> tuple[int, ...]:
        """``(G, MBg, C/G, KH, KW, 4)``: the shape of ``blocked``'s weights."""
        m, cg, kh, kw = self.wv.shape
        return (self.group, math.ceil(m // self.group / 4), cg, kh, kw, 4)

    def blocked_into(self, out: np.ndarray) -> None:
        """Write ``blocked``'s weights into ``out`` (``blocked_shape()``, float32, C-contiguous:
        a staging buffer's view, so that the weights are written once). One lane of the 4
        at a time: a copy whose inner loop runs along ``C/G*KH*KW`` is about 1.3-4x faster
        than a transpose whose inner loop is the 4 lanes."""
        m, cg, kh, kw = self.wv.shape
        g = self.group
        mg, mbg = m // g, math.ceil(m // g / 4)
        k, full = cg * kh * kw, mg // 4  # full blocks transposed into place, the last one padded
        src = self.wv.reshape(g, mg, k)
        wp = out.reshape(g, mbg, k, 4)
        lanes = src[:, : full * 4].reshape(g, full, 4, k)
        for j in range(4):
            wp[:, :full, :, j] = lanes[:, :, j]
        if full < mbg:
            wp[:, full:] = 0
            wp[:, full, :, : mg - full * 4] = src[:, full * 4 :].transpose(0, 2, 1)

    def blocked_bias(self) -> np.ndarray:
        """``(G, MBg * 4)`` float32: ``blocked``'s bias."""
        m, g = self.wv.shape[0], self.group
        mg, mbg = m // g, math.ceil(m // g / 4)
        bp = np.zeros((g, mbg * 4), np.float32)
        bp[:, :mg] = self.bias.reshape(g, mg)
        return bp

    def general_ints(self) -> tuple[int, ...]:
        """``(C, H, W, M, OH, OW, C/G, M/G, MBg, G, SH, SW, PT, PL, DH, DW, N*G*MBg)``: the
        general kernel's integer geometry, in its argument order."""
        n, c, h, w = self.x.shape
        m, cg = self.wv.shape[:2]
        g = self.group
        mg, mbg = m // g, math.ceil(m // g / 4)
        oh, ow = self.y.shape[2:]
        s, p, d = self.strides, self.pads, self.dil
        return (c, h, w, m, oh, ow, cg, mg, mbg, g, s[0], s[1], p[0], p[1], d[0], d[1], n * g * mbg)


class ConvBase(GPUExecution):
    """2-D Conv: the path chosen at resize (module docstring); the backend's class implements
    ``pointwise``, ``depthwise`` and ``general`` (each taking a ``Conv2D``) and ``check``."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0:
            return
        wv, strides, dil, pads, row = conv_geometry(self, x.shape, VW)
        m, _, kh, kw = wv.shape
        g = int(self.attrs["group"])
        b = inputs[2] if len(inputs) > 2 else None
        act = (self.attrs["activation"], self.attrs["activation_params"])
        conv = Conv2D(x, inputs[1], b, y, wv, conv_bias(self, m), strides, dil, pads, g, act)
        if is_pointwise(kh, kw, g, strides, pads):
            self.pointwise(conv)
        elif g == x.shape[1] == m and row <= MAX_ROW:
            self.depthwise(conv)
        else:
            self.general(conv)

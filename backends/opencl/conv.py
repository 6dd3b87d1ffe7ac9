"""OpenCL Conv (ONNX operators.md #Conv), 2-D NCHW, with bias and the converter's fused activation.

``X: (N, C, H, W)``, ``W: (M, C/G, KH, KW)`` (constant), ``B: (M,)`` (constant, optional)
-> ``Y: (N, M, OH, OW)``; geometry (pads after ``auto_pad``, strides, dilations) from
``windows.window``. One of three kernels, chosen at resize:

* pointwise (1x1, stride 1, no pads, group 1): the tiled GEMM of ``gemm.cl``,
  ``Y[n] (M, HW) = W (M, C) @ X[n] (C, HW) + B``, activation fused;
* depthwise (``G == C == M``): ``conv.cl`` ``depthwise``, VW pixels per work item;
* general / grouped: ``conv.cl`` ``conv2d``, 4 output channels x VW pixels per work item,
  weights re-laid as ``(G, ceil(M/G/4), C/G, KH, KW, 4)`` for one vector load per tap;
  on GPUs, small outputs (ResNet's 14x14 and 7x7 stages) split the input channels over the
  items of a work group (``channel_split``), partial sums added in local memory.

1-D/3-D convs and weights or bias computed at run time fall back to the CPU (``check``).
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.gpu.checks import conv_operands_check
from mnnpy.backends.gpu.conv_geometry import conv_bias, conv_geometry, is_pointwise
from mnnpy.backends.gpu.gemm_geometry import pointwise_conv_problem
from mnnpy.backends.opencl.activation import activation
from mnnpy.backends.opencl.gemm import gemm_launch, use_local_tiles
from mnnpy.backends.opencl.registry import opencl_execution
from mnnpy.ops.activation import GPU

SOURCE = "conv.cl"
VW = 4  # output pixels along W per work item
MAX_KERNEL = 32  # kernel loops are unrolled at compile time
MAX_ROW = 32  # depthwise: registers for the inputs one kernel row spans
SPLIT_TARGET = 32768  # conv2d: fewer work items than this leave a GPU idle: split input channels
MAX_SPLIT = 32
GROUP = 64  # conv2d with a split: work-group size (as GY in conv.cl)


def channel_split(items: int, cg: int) -> int:
    """Work items per output block of ``conv2d`` (-D SPLIT): a power of two that brings
    ``items`` towards ``SPLIT_TARGET``, each item keeping at least two input channels; 1: no split."""
    s = 1
    while s < MAX_SPLIT and items * s < SPLIT_TARGET and 4 * s <= cg:
        s *= 2
    return s if s >= 4 else 1


@opencl_execution("Conv")
class Conv(Execution):
    """2-D Conv, float32 NCHW: pointwise GEMM, depthwise or register-blocked general kernel."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        """2-D only; W and B constants; a known fused activation; kernel dims up to MAX_KERNEL."""
        inputs, attrs = info.inputs, info.attrs
        w = inputs[1]
        ok, why = conv_operands_check(info, "OpenCL")
        if not ok:
            return ok, why
        if any(t is not None and t.dtype != np.float32 for t in inputs):
            return False, "Conv with non-float32 weights (OpenCL runs float32 only)"
        if attrs.get("activation", "") not in ("", *GPU):
            return False, f"fused activation {attrs['activation']!r} has no OpenCL kernel"
        if max(w.shape[2:]) > MAX_KERNEL:
            return False, f"kernel {list(w.shape[2:])} larger than {MAX_KERNEL} (OpenCL unrolls kernel loops)"
        return True, ""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        wv, strides, dil, pads, row = conv_geometry(self, x.shape, VW)
        m, cg, kh, kw = wv.shape
        c = x.shape[1]
        bias = conv_bias(self, m)
        g = self.attrs["group"]
        act = activation(self.attrs["activation"], self.attrs["activation_params"])
        if is_pointwise(kh, kw, g, strides, pads):
            self._pointwise(x, y, wv, bias, act)
        elif g == c == m and row <= MAX_ROW:
            self._depthwise(x, y, wv, bias, act, strides, dil, pads)
        else:
            self._general(x, y, wv, bias, act, strides, dil, pads)

    def _pointwise(self, x, y, wv, bias, act):
        m, c = wv.shape[0], x.shape[1]
        self.weights = self.backend.weights(wv.reshape(m, c))
        self.bias = self.backend.weights(bias)
        mnk, kw = pointwise_conv_problem(x.shape, m)
        self.launch, self.keep = gemm_launch(self.backend, self.weights, x, y, *mnk, c=self.bias, act=act, **kw)

    def _depthwise(self, x, y, wv, bias, act, strides, dil, pads):
        n, c, h, w = x.shape
        kh, kw = wv.shape[2:]
        oh, ow = y.shape[2:]
        self.weights = self.backend.weights(wv.reshape(c, kh * kw))
        self.bias = self.backend.weights(bias)
        opts = [act[0], f"-D KH={kh}", f"-D KW={kw}", f"-D SW={strides[1]}", f"-D DW={dil[1]}", f"-D VW={VW}"]
        args = self._args(x, y, (c, h, w, oh, ow, strides[0], pads[0], pads[1], dil[0], n * c), act)
        self.launch = self.backend.launch(SOURCE, "depthwise", opts, args, (math.ceil(ow / VW), oh, n * c))

    def _args(self, x, y, geometry, act) -> tuple:
        """Kernel arguments of ``conv2d``/``depthwise``: x, weights, bias, y, the int geometry, a0, a1."""
        i32 = np.int32
        head = (x.buffer, i32(x.elem_offset), self.weights.buffer, self.bias.buffer, y.buffer, i32(y.elem_offset))
        return (*head, *(i32(v) for v in geometry), act[1], act[2])

    def _general(self, x, y, wv, bias, act, strides, dil, pads):
        n, c, h, w = x.shape
        m, cg, kh, kw = wv.shape
        oh, ow = y.shape[2:]
        g = self.attrs["group"]
        mg = m // g
        mbg = math.ceil(mg / 4)
        wp = np.zeros((g, mbg * 4, cg, kh, kw), np.float32)
        wp[:, :mg] = wv.reshape(g, mg, cg, kh, kw)
        wp = wp.reshape(g, mbg, 4, cg, kh, kw).transpose(0, 1, 3, 4, 5, 2)  # (G, MBg, Cg, KH, KW, 4)
        bp = np.zeros((g, mbg * 4), np.float32)
        bp[:, :mg] = bias.reshape(g, mg)
        self.weights = self.backend.weights(np.ascontiguousarray(wp))
        self.bias = self.backend.weights(bp)
        opts = [act[0], f"-D KH={kh}", f"-D KW={kw}", f"-D VW={VW}"]
        nz = n * g * mbg
        owb = math.ceil(ow / VW)
        split = channel_split(owb * oh * nz, cg) if use_local_tiles(self.backend) else 1
        geometry = (c, h, w, m, oh, ow, cg, mg, mbg, g, strides[0], strides[1], pads[0], pads[1], dil[0], dil[1], nz)
        args = self._args(x, y, geometry, act)
        if split > 1:
            local = (split, GROUP // split, 1)
            la = self.backend.launch(SOURCE, "conv2d", [*opts, f"-D SPLIT={split}"], args, (split, owb * oh, nz), local)
            if la.local == local:  # the kernel requires exactly this work-group size
                self.launch = la
                return
        self.launch = self.backend.launch(SOURCE, "conv2d", opts, args, (owb, oh, nz))

    def on_execute(self, inputs, outputs):
        self.launch()

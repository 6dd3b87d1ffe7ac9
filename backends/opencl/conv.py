"""OpenCL Conv (ONNX operators.md #Conv), 2-D NCHW, with bias and the converter's fused activation.

The three paths of ``backends/gpu/conv.py``, weights and bias fp32 in every precision:

* pointwise: the tiled GEMM of ``gemm.cl`` (``gemm_launch``), activation fused;
* depthwise: ``conv.cl`` ``depthwise``, VW pixels per work item;
* general / grouped: ``conv.cl`` ``conv2d``, 4 output channels x VW pixels per work item; on
  GPUs, small outputs (ResNet's 14x14 and 7x7 stages) split the input channels over the items
  of a work group (``channel_split``), partial sums added in local memory.

1-D/3-D convs, weights or bias computed at run time and kernels over ``MAX_KERNEL`` fall back
to the CPU (``check``).
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backends.gpu.checks import activation_check
from mnnpy.backends.gpu.conv import CONV_CHECKS, VW, Conv2D, ConvBase
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.opencl.activation import activation
from mnnpy.backends.opencl.execution import OpenCLExecution
from mnnpy.backends.opencl.gemm import gemm_launch, use_local_tiles
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "conv.cl"
MAX_KERNEL = 32  # kernel loops are unrolled at compile time
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


def kernel_check(info, backend: str) -> tuple[bool, str]:
    """Kernel dims up to ``MAX_KERNEL`` (the kernels unroll their loops)."""
    w = info.inputs[1]
    if max(w.shape[2:]) > MAX_KERNEL:
        return False, f"kernel {list(w.shape[2:])} larger than {MAX_KERNEL} ({backend} unrolls kernel loops)"
    return True, ""


@opencl_execution("Conv")
class Conv(ConvBase, OpenCLExecution):
    """2-D Conv, float32 NCHW: pointwise GEMM, depthwise or register-blocked general kernel."""

    check = checked_by(*CONV_CHECKS, activation_check, kernel_check)

    def pointwise(self, conv: Conv2D) -> None:
        """The tiled GEMM (``gemm_launch``) with W ``(M, C)`` and B as fp32 buffers, activation fused."""
        m, c = conv.wv.shape[:2]
        self.weights = self.backend.weights(conv.wv.reshape(m, c))
        self.bias = self.backend.weights(conv.bias)
        act = activation(*conv.act)
        launch, self.keep = gemm_launch(self.backend, self.weights, conv.x, conv.y, conv.gemm_problem(), c=self.bias, act=act)
        self.add(launch)

    def depthwise(self, conv: Conv2D) -> None:
        """Kernel ``depthwise``: ``VW`` output pixels of one channel per work item, work (OW/VW, OH, N*C)."""
        x, y = conv.x, conv.y
        n, c, h, w = x.shape
        kh, kw = conv.wv.shape[2:]
        oh, ow = y.shape[2:]
        strides, dil, pads = conv.strides, conv.dil, conv.pads
        self.weights = self.backend.weights(conv.wv.reshape(c, kh * kw))
        self.bias = self.backend.weights(conv.bias)
        act = activation(*conv.act)
        opts = [act[0], f"-D KH={kh}", f"-D KW={kw}", f"-D SW={strides[1]}", f"-D DW={dil[1]}", f"-D VW={VW}"]
        args = self._args(x, y, (c, h, w, oh, ow, strides[0], pads[0], pads[1], dil[0], n * c), act)
        self.enqueue(SOURCE, "depthwise", opts, args, (math.ceil(ow / VW), oh, n * c))

    def _args(self, x, y, geometry, act) -> tuple:
        """Kernel arguments of ``conv2d``/``depthwise``: x, weights, bias, y, the int geometry, a0, a1."""
        i32 = np.int32
        head = (x.buffer, i32(x.elem_offset), self.weights.buffer, self.bias.buffer, y.buffer, i32(y.elem_offset))
        return (*head, *(i32(v) for v in geometry), act[1], act[2])

    def general(self, conv: Conv2D) -> None:
        """Kernel ``conv2d`` on the blocked weights, work (OW/VW, OH, N*G*MBg); input channels split over a work group where
        it pays (``channel_split``)."""
        wp, bp = conv.blocked()
        self.weights, self.bias = self.backend.weights(wp), self.backend.weights(bp)
        kh, kw = conv.wv.shape[2:]
        oh, ow = conv.y.shape[2:]
        act = activation(*conv.act)
        opts = [act[0], f"-D KH={kh}", f"-D KW={kw}", f"-D VW={VW}"]
        geometry = conv.general_ints()
        cg, nz = geometry[6], geometry[-1]
        owb = math.ceil(ow / VW)
        split = channel_split(owb * oh * nz, cg) if use_local_tiles(self.backend) else 1
        args = self._args(conv.x, conv.y, geometry, act)
        if split > 1:
            local = (split, GROUP // split, 1)
            la = self.backend.launch(SOURCE, "conv2d", [*opts, f"-D SPLIT={split}"], args, (split, owb * oh, nz), local)
            if la.local == local:  # the kernel requires exactly this work-group size
                self.add(la)
                return
        self.enqueue(SOURCE, "conv2d", opts, args, (owb, oh, nz))

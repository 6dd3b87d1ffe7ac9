"""OpenCL pooling (ONNX operators.md): MaxPool (output Y), AveragePool, GlobalAveragePool, GlobalMaxPool.

Windowed pools: ``shaders/opencl/pool.cl`` (``-D POOL_MAX | POOL_AVG``), one work item per
output, 1-D and 2-D windows (a 1-D pool runs as H = 1); geometry (pads, auto_pad,
ceil_mode, dilations) from the shape function's ``window`` (``OpInfo.geometry``). Global pools, and windowed
pools whose one window is the whole unpadded map, are row reductions of ``reduce.cl``
(a work-group per (n, c) row, local-memory combine).
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.gpu.reduce_axes import global_pool_check, pool_check
from mnnpy.backends.opencl.reduce import reduce_launches
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "pool.cl"


def _global_launches(backend, kind: str, x, y) -> tuple[list, object]:
    """Row reduction ``Y[n, c] = mean/max(X[n, c, ...])`` (``kind``: "MEAN" or "MAX"):
    ``(launches, scratch)`` of ``reduce_launches``."""
    return reduce_launches(backend, kind, x, y, x.shape[0] * x.shape[1], math.prod(x.shape[2:]), 1)


@opencl_execution("MaxPool", "AveragePool")
class Pool(Execution):
    """MaxPool / AveragePool over ``kernel_shape`` windows, ``X: (N, C, [H,] W) -> Y: (N, C, [OH,] OW)``
    float32. MaxPool: max of the window (pads act as -inf); its ``Indices`` output is not
    produced here (CPU fallback). AveragePool: sum / count (``count_include_pad``)."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return pool_check(info, "OpenCL", 2)

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        a, k = self.attrs, list(self.attrs["kernel_shape"])
        out, strides, dil, pads = self.geometry["window"].unpack()
        is_max = self.op.type == "MaxPool"
        if list(out) == [1] * len(k) and k == list(x.shape[2:]) and not any(pads):
            kind = "MAX" if is_max else "MEAN"  # one window = the whole map
            self.launches, self.scratch = _global_launches(self.backend, kind, x, y)
            return
        nd = len(k)
        pb, pe = pads[:nd], pads[nd:]
        if nd == 1:  # 1-D: H = 1
            k, out, strides, dil, pb, pe = [1, *k], [1, *out], [1, *strides], [1, *dil], [0, *pb], [0, *pe]
        ih, iw = (1, x.shape[2]) if len(x.shape) == 3 else x.shape[2:]
        nc = x.shape[0] * x.shape[1]
        options = ["-D POOL_MAX"] if is_max else ["-D POOL_AVG"] + (["-D COUNT_INCLUDE_PAD"] if a["count_include_pad"] else [])
        geom = (nc, ih, iw, out[0], out[1], k[0], k[1], *strides, *dil, pb[0], pb[1], pe[0], pe[1])
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset), *(np.int32(v) for v in geom))
        self.launches = [self.backend.launch(SOURCE, "pool2d", options, args, (out[1], out[0], nc))]

    def on_execute(self, inputs, outputs):
        for launch in self.launches:
            launch()


@opencl_execution("GlobalAveragePool", "GlobalMaxPool")
class GlobalPool(Execution):
    """``Y[n, c, 1, ...] = mean (or max) of X[n, c, ...]``, ``X: (N, C, *S)`` float32: a
    work-group reduction per (n, c) row."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return global_pool_check(info)

    def on_resize(self, inputs, outputs):
        kind = "MEAN" if self.op.type == "GlobalAveragePool" else "MAX"
        self.launches, self.scratch = _global_launches(self.backend, kind, inputs[0], outputs[0])

    def on_execute(self, inputs, outputs):
        for launch in self.launches:
            launch()

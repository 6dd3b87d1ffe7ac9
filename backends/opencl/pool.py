"""OpenCL pooling (ONNX operators.md): MaxPool (output Y), AveragePool, GlobalAveragePool, GlobalMaxPool.

Windowed pools: ``shaders/opencl/pool.cl`` (``-D POOL_MAX | POOL_AVG``), one work item per
output, 1-D and 2-D windows (a 1-D pool runs as H = 1); geometry (pads, auto_pad,
ceil_mode, dilations) from the shape function's ``window`` (``OpInfo.geometry``). Global pools, and windowed
pools whose one window is the whole unpadded map, are row reductions of ``reduce.cl``
(a work-group per (n, c) row, local-memory combine).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.pool import GLOBAL, WINDOWED, GlobalPoolBase
from mnnpy.backends.gpu.reduce_axes import pool_check
from mnnpy.backends.opencl.reduce import Reductions
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "pool.cl"


@opencl_execution(*WINDOWED)
class Pool(Reductions):
    """MaxPool / AveragePool over ``kernel_shape`` windows, ``X: (N, C, [H,] W) -> Y: (N, C, [OH,] OW)``
    float32. MaxPool: max of the window (pads act as -inf); its ``Indices`` output is not
    produced here (CPU fallback). AveragePool: sum / count (``count_include_pad``)."""

    check = checked_by(partial(pool_check, max_spatial=2))

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        a, k = self.attrs, list(self.attrs["kernel_shape"])
        out, strides, dil, pads = self.geometry["window"].unpack()
        is_max = self.op.type == "MaxPool"
        if list(out) == [1] * len(k) and k == list(x.shape[2:]) and not any(pads):
            kind = "max" if is_max else "mean"  # one window = the whole map
            self.reduce(kind, x, y, x.shape[0] * x.shape[1], math.prod(x.shape[2:]), 1)
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
        self.enqueue(SOURCE, "pool2d", options, args, (out[1], out[0], nc))


@opencl_execution(*GLOBAL)
class GlobalPool(GlobalPoolBase, Reductions):
    """Global pools (``GlobalPoolBase``): a row reduction of ``reduce.cl``."""

"""Vulkan pooling (ONNX operators.md): MaxPool (output Y), AveragePool, GlobalAveragePool,
GlobalMaxPool.

Windowed pools: ``shaders/vulkan/pool.comp`` (variants ``pool_max``, ``pool_avg``), one
invocation per output, 1-D to 3-D windows (run as 3-D with leading size-1 dims); geometry
(pads, auto_pad, ceil_mode, dilations, strides) from the shape function's ``window``.
Global pools, and windowed pools whose one window is the whole unpadded map, are row
reductions of ``reduce.comp`` (a work group per (n, c) row, shared-memory combine; see
``reduce.reduce_dispatches``).
"""

from __future__ import annotations

import math
import struct
from functools import partial

from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.pool import GLOBAL, WINDOWED, GlobalPoolBase
from mnnpy.backends.gpu.reduce_axes import pool_check
from mnnpy.backends.vulkan.reduce import Reductions
from mnnpy.backends.vulkan.registry import vulkan_execution

MAX_SPATIAL = 3  # pool.comp's window dims


@vulkan_execution(*WINDOWED)
class Pool(Reductions):
    """MaxPool / AveragePool over ``kernel_shape`` windows, ``X: (N, C, *S) -> Y: (N, C, *O)``
    float32, 1 to 3 spatial dims. MaxPool: max of the window (pads act as -inf; NaN
    propagates); its ``Indices`` output is not produced here (CPU fallback). AveragePool:
    sum / count (``count_include_pad``: taps inside the explicitly padded input count)."""

    variants = ("pool_max", "pool_avg", "reduce_max", "reduce_mean")

    check = checked_by(partial(pool_check, max_spatial=MAX_SPATIAL))

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        a, k = self.attrs, list(self.attrs["kernel_shape"])
        out, strides, dil, pads = self.geometry["window"].unpack()
        is_max = self.op.type == "MaxPool"
        nc, spatial = x.shape[0] * x.shape[1], list(x.shape[2:])
        whole = list(out) == [1] * len(k) and k == spatial and not any(pads) and all(d == 1 for d in dil)
        if whole and math.prod(spatial) > 0:
            # one window = the whole map: a row reduction per (n, c)
            self.reduce("max" if is_max else "mean", x, y, nc, math.prod(spatial), 1)
            return
        nd = len(k)
        lead = MAX_SPATIAL - nd

        def full(v, fill):
            return [fill] * lead + list(v)

        geom = (
            full(spatial, 1)
            + full(out, 1)
            + full(k, 1)
            + full(strides, 1)
            + full(dil, 1)
            + full(pads[:nd], 0)
            + full(pads[nd:], 0)
        )
        push = struct.pack("<3I21i", y.size, self.elem_offset(x), self.elem_offset(y), *geom)
        shader = "pool_max" if is_max else "pool_avg"
        spec = () if is_max else ((1, bool(a["count_include_pad"])),)
        self.scratch, self.passes = None, 1
        self.dispatch(shader, [x, y], (1,), push, y.size if nc else 0, spec)


@vulkan_execution(*GLOBAL)
class GlobalPool(GlobalPoolBase, Reductions):
    """Global pools (``GlobalPoolBase``): a shared-memory row reduction of ``reduce.comp`` (two
    passes for few very long rows)."""

    variants = ("reduce_mean", "reduce_max")

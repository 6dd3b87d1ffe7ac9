"""Compiled im2col Conv for the CPU Conv execution (``conv.py``): float32 2-D Conv, any
stride, dilation, padding and group count; the column buffer is written by one numba
kernel (``mnnpy.backends.cpu.kernels.im2col``) instead of one NumPy copy per kernel tap,
and bias plus the fused activation run as an epilogue on each block of outputs while it is
still in cache.

Measured against the NumPy im2col it replaces (``conv._Im2col``: one strided copy per tap,
bias through a row of ones), whole Conv with bias and Relu on 2 threads, medians of 40 runs
alternated in one process on the shared 2-core machine, ms: ResNet-18's stem 3->64 7x7/2 at
224x224 3.77 -> 2.65; PP-OCR det's stem 3->16 3x3/2 at 640x640 9.05 -> 6.20; 3x3/2
64->128 at 56x56 1.12 -> 0.99, 128->256 at 28x28 0.78 -> 0.76, 256->512 at 14x14 1.08 ->
1.08; 3x3/1 512->512 at 7x7 2.28 -> 2.27; 1x1/2 256->512 at 14x14 0.19 -> 0.17.

The products run on weights packed at prepare (``kernels/packed_gemm.py``, ``PACKED``), bias and
activation in the same call; blocks of output channels are whole weight panels. Measured
with the column fill apart, one thread: ResNet-18's stem product 1.20 ms (197 GFLOP/s),
3x3/2 64->128 at 56x56 0.54 ms; whole ResNet-18, one process, alternated: 13.34 / 13.52 ->
13.12 / 13.29 ms.
"""

from __future__ import annotations

import functools

import numpy as np

from mnnpy.backends.cpu.blas import MIN_FLOPS, native_product
from mnnpy.backends.cpu.kernels import packed_gemm
from mnnpy.backends.cpu.kernels.epilogue import codes
from mnnpy.backends.cpu.kernels.im2col import kernels as im2col_kernels
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import run_phases, sequence, split, workers
from mnnpy.backends.cpu.scratch import scratch

CHUNK_BYTES = 1 << 20  # bytes of one block of columns (at least one output row)
PACKED = True  # products on packed weights (kernels/packed_gemm.py) where it compiles
SMALL_M = 32  # output channels under which blocks are SMALL_M_CHUNK_BYTES
SMALL_M_CHUNK_BYTES = 1 << 18  # (PP-OCR det's 3->16 stem: its product 0.7 ms a core against 1.1-1.7 with 1 MiB blocks)


def usable(x, w, y) -> bool:
    """Whether the compiled im2col takes this Conv: 2-D, float32, C-contiguous, numba here."""
    if x.ndim != 4 or any(a.dtype != np.float32 for a in (x, w, y)) or not (x.flags.c_contiguous and y.flags.c_contiguous):
        return False
    return im2col_kernels() is not None


class _Im2colNumba:
    """im2col + GEMM, ``X: (N, C, H, W) -> Y: (N, M, Ho, Wo)``, per group
    ``Y[n, g] (M/G, P) = W[g] (M/G, C/G*KH*KW) @ col (C/G*KH*KW, P)``, then bias and activation.

    Output rows are cut into blocks of at most ``CHUNK_BYTES`` of columns; with at least
    one block per thread each thread fills, multiplies and finishes its own blocks (its own
    column buffer). Otherwise (small maps, many channels: all outputs fit one block) the
    image's whole column buffer is filled (split by channels when it has at least
    ``parallel.PARALLEL_MIN`` elements), then the products and the epilogue are split by
    output channels (from ``blas.MIN_FLOPS``).
    """

    fused_bias = True

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        n, c, m, g = x.shape[0], x.shape[1], w.shape[0], exe.attrs["group"]
        cg, mg, kh, kw = c // g, m // g, w.shape[2], w.shape[3]
        ho, wo = out
        rowsz = cg * kh * kw
        threads = exe.backend.num_threads
        self.beside = exe.backend.helper.submit if exe.const else None  # prepare runs once, in on_resize
        self.b = scratch((m,), np.float32)
        self.has_bias = bias is not None
        fused = codes(exe.attrs["activation"], exe.attrs["activation_params"])
        self.fused_activation = fused is not None  # else Conv applies the activation afterwards
        code, a0, a1 = fused or (0, np.float32(0), np.float32(0))
        fill, epi = im2col_kernels()
        y3 = view_as(y, (n, m, ho * wo))
        geo = (kh, kw, *strides, *dil, pads[0], pads[1])
        finish = bias is not None or code != 0
        pk = packed_gemm.kernel() if PACKED and ho * wo >= packed_gemm.MIN_COLS else None
        mr = packed_gemm.MR
        # the products on weights packed at prepare, bias and activation in the same call
        self.wp = None if pk is None else scratch((g, -(-mg // mr), rowsz, mr), np.float32, fill=None)
        self.w = scratch((g, mg, rowsz), np.float32, fill=None) if pk is None else None  # both written whole by prepare

        def epilogue(i, m0, m1, p0, p1):
            return [bind(epi, y3, self.b, i, m0, m1, p0, p1, code, a0, a1)] if finish and pk is None else []

        def product(gi, col, i, m0, m1, p0, p1):
            """``y3[i, gi*mg + m0 : gi*mg + m1, p0:p1] = W[gi, m0:m1] @ col[:, :p1-p0]`` (``m0`` a
            multiple of the panel rows where packed), with bias and activation where packed."""
            yg = y3[i, gi * mg : (gi + 1) * mg]
            if pk is not None:
                c2 = view_as(col, (1, rowsz, col.shape[-1]))
                wp, bg = self.wp[gi : gi + 1], self.b[gi * mg : (gi + 1) * mg]
                return bind(pk, wp, c2, view_as(yg, (1, mg, ho * wo)), bg, m0, m1, 0, p0, p1 - p0, code, a0, a1)
            return native_product(self.w[gi], col, yg, m0, m1, 0, p0, p1 - p0) or functools.partial(
                np.matmul, self.w[gi, m0:m1], col[:, : p1 - p0], out=yg[m0:m1, p0:p1]
            )

        rows = max(1, min(ho, (SMALL_M_CHUNK_BYTES if mg < SMALL_M else CHUNK_BYTES) // (rowsz * wo * 4)))
        blocks = [(i, r, min(ho, r + rows)) for i in range(n) for r in range(0, ho, rows)]
        self.phases = []
        if len(blocks) >= threads:
            tasks = []
            for lo, hi in split(len(blocks), threads):
                col = exe.ws.take((rowsz, rows * wo), np.float32)
                steps = []
                for i, r0, r1 in blocks[lo:hi]:
                    p0, p1 = r0 * wo, r1 * wo
                    for gi in range(g):
                        steps.append(bind(fill, x, col, i, gi * cg, (gi + 1) * cg, r0, r1, wo, *geo))
                        steps.append(product(gi, col, i, 0, mg, p0, p1))
                    steps += epilogue(i, 0, m, p0, p1)
                tasks.append(sequence(steps))
            self.phases.append(tasks)
            return
        col = exe.ws.take((g, rowsz, ho * wo), np.float32)
        kk = kh * kw
        for i in range(n):
            fills = [
                bind(fill, x, col[gi, c0 * kk :], i, gi * cg + c0, gi * cg + c1, 0, ho, wo, *geo)
                for gi in range(g)
                for c0, c1 in split(cg, workers(exe.backend, col.size))
            ]
            prods = []
            parts = threads if 2.0 * m * rowsz * ho * wo >= MIN_FLOPS else 1  # as blas.MatMul
            cuts = max(1, parts // g)
            for gi in range(g):
                if pk is not None:  # whole panels per thread
                    rows_of = packed_gemm.panel_rows(mg, cuts)
                else:
                    rows_of = split(mg, cuts)
                for m0, m1 in rows_of:
                    o0, o1 = gi * mg + m0, gi * mg + m1
                    prods.append([product(gi, col[gi], i, m0, m1, 0, ho * wo), *epilogue(i, o0, o1, 0, ho * wo)])
            self.phases.append(_spread(fills, workers(exe.backend, col.size)))
            self.phases.append(_spread([s for p in prods for s in p], parts, groups=[len(p) for p in prods]))

    def prepare(self, w, b):
        if self.wp is not None:  # (G, M/G, C/G*KH*KW) packed straight from the weight tensor
            packed_gemm.pack_later(np.asarray(w).reshape(self.wp.shape[0], -1, self.wp.shape[2]), self.wp, self.beside)
        else:
            np.copyto(self.w, np.asarray(w).reshape(self.w.shape))
        if b is not None:
            np.copyto(self.b, b)

    def native_phases(self):
        """The column fills and products, phase by phase (``program.py``)."""
        return self.phases

    def run(self, exe):
        run_phases(exe.backend, self.phases)


def _spread(steps, threads, groups=None):
    """``steps`` (runs of ``groups`` steps that stay together, in order) dealt into at most
    ``threads`` tasks of consecutive runs."""
    runs, k = [], 0
    for size in groups or [1] * len(steps):
        runs.append(steps[k : k + size])
        k += size
    return [sequence([s for r in runs[lo:hi] for s in r]) for lo, hi in split(len(runs), threads)]

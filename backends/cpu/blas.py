"""Matrix products on the CPU backend, on a BLAS that runs single-threaded during a run.

OpenBLAS's own threads spin-wait after each multi-threaded call; on a 2-core machine
that halves the speed of whatever the engine's threads do next (measured: a 5x5
depthwise conv on (192, 40, 40) took 1.74 ms on 2 threads after a 1-thread GEMM,
3.21 ms after a 2-thread one). So the CPU backend sets BLAS to one thread for a run
(threadpoolctl, restored afterwards) and ``MatMul`` cuts big products into blocks run
on the backend's own pool, each a plain ``np.matmul`` (which releases the GIL).
"""

from __future__ import annotations

import functools

import numpy as np

from mnnpy.backends.cpu.parallel import parallel

MIN_FLOPS = 30e6  # FLOPs (2*M*N*K*batch) from which a product is split over threads
MIN_K = 16
MIN_SPLIT_COLS = 256  # output columns per thread from which a product is cut into column blocks


class BlasThreads:
    """The BLAS library's thread count (process-wide), through threadpoolctl's controller."""

    def __init__(self):
        self._lib = None
        try:
            from threadpoolctl import ThreadpoolController

            ctl = ThreadpoolController().select(user_api="blas")
            if ctl.lib_controllers:
                self._lib = ctl.lib_controllers[0]
        except Exception:  # no threadpoolctl-supported BLAS: leave its default alone
            self._lib = None

    def use(self, n: int) -> int | None:
        """Make the BLAS run on ``n`` threads; returns the previous count (ctypes calls, ~1 µs)."""
        if self._lib is None:
            return None
        before = self._lib.get_num_threads()
        if before != n:
            self._lib.set_num_threads(n)
        return before


def _blocks(a: np.ndarray, b: np.ndarray, out: np.ndarray, parts: int) -> list[tuple]:
    """``(a_i, b_i, out_i)`` views whose products fill ``out``: column blocks when each gets at
    least ``MIN_SPLIT_COLS`` columns, else row blocks of 2-D ``a`` (few columns: 7x7 maps)."""

    def cuts(n):
        edges = [n * i // parts for i in range(parts + 1)]
        return list(zip(edges, edges[1:]))

    rows, cols = out.shape[-2], out.shape[-1]
    if b.ndim == out.ndim and (cols >= MIN_SPLIT_COLS * parts or a.ndim != 2 or rows < 32 * parts):
        return [(a, b[..., lo:hi], out[..., lo:hi]) for lo, hi in cuts(cols)]
    if a.ndim == 2 and out.ndim == 2:
        return [(a[lo:hi], b, out[lo:hi]) for lo, hi in cuts(rows)]
    return [(a, b, out)]


class MatMul:
    """A prepared ``np.matmul(a, b, out=out)`` (views fixed at resize), cut over the pool when big.

    BLAS stays single-threaded during a run: a product with at least ``MIN_FLOPS`` FLOPs
    and an inner dimension of at least ``MIN_K`` is cut into one block per pool thread
    (``_blocks``); measured on the 2-core machine, two column halves of
    (64 x 577) @ (577 x 3136) take 1.33 ms against 1.33 ms for OpenBLAS's own 2 threads,
    without the spinning workers.
    """

    def __init__(self, backend, a: np.ndarray, b: np.ndarray, out: np.ndarray):
        self.backend = backend
        k = a.shape[-1]
        flops = 2.0 * out.size * k
        threads = backend.num_threads if flops >= MIN_FLOPS and k >= MIN_K else 1
        blocks = _blocks(a, b, out, threads) if threads > 1 else [(a, b, out)]
        self.tasks = [functools.partial(np.matmul, a, b, out=out) for a, b, out in blocks]

    def __call__(self) -> None:
        parallel(self.backend, self.tasks)

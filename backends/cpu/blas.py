"""Matrix products on the CPU backend: single-threaded BLAS calls, split over the backend's pool.

OpenBLAS's own threads spin-wait after each multi-threaded call; on a 2-core machine
that halves the speed of whatever the engine's threads do next (measured: a 5x5
depthwise conv on (192, 40, 40) took 1.74 ms on 2 threads after a 1-thread GEMM,
3.21 ms after a 2-thread one). So BLAS runs on one thread (set once through
threadpoolctl) and a big product is cut into row (or column, or batch) blocks, one
per thread of the backend's pool, each a plain ``np.matmul`` (which releases the GIL).
A product is split when it has at least ``MIN_FLOPS`` FLOPs and an inner dimension
of at least ``MIN_K``: smaller ones are faster on one thread.
"""

from __future__ import annotations

import numpy as np

MIN_FLOPS = 30e6  # FLOPs (2*M*N*K*batch) from which a product is split over threads
MIN_K = 16
MIN_ROWS = 32  # a row block smaller than this is a poor GEMM: split columns instead


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
    """``(a_i, b_i, out_i)`` views whose products fill ``out``: batch, row or column blocks."""
    bounds = lambda n: [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]  # noqa: E731
    if out.ndim > 2 and out.shape[0] >= parts and a.ndim == out.ndim and b.ndim == out.ndim:
        return [(a[lo:hi], b[lo:hi], out[lo:hi]) for lo, hi in bounds(out.shape[0])]
    if a.ndim == 2 and out.ndim == 2 and out.shape[0] >= parts * MIN_ROWS:
        return [(a[lo:hi], b, out[lo:hi]) for lo, hi in bounds(out.shape[0])]
    if b.ndim == 2 and out.shape[-1] >= parts * 8:
        return [(a, b[:, lo:hi], out[..., lo:hi]) for lo, hi in bounds(out.shape[-1])]
    return [(a, b, out)]


class MatMul:
    """A prepared ``np.matmul(a, b, out=out)`` (views fixed at resize), split over the pool when big."""

    def __init__(self, backend, a: np.ndarray, b: np.ndarray, out: np.ndarray):
        self.pool = backend.pool
        k = a.shape[-1]
        flops = 2.0 * out.size * k
        parts = backend.num_threads if flops >= MIN_FLOPS and k >= MIN_K else 1
        self.blocks = _blocks(a, b, out, parts) if parts > 1 else [(a, b, out)]

    def __call__(self) -> None:
        if len(self.blocks) == 1:
            a, b, out = self.blocks[0]
            np.matmul(a, b, out=out)
            return
        futures = [self.pool.submit(np.matmul, a, b, out=out) for a, b, out in self.blocks[1:]]
        a, b, out = self.blocks[0]
        np.matmul(a, b, out=out)
        for f in futures:
            f.result()

"""Matrix products on the CPU backend, on a BLAS that runs single-threaded during a run.

OpenBLAS's own threads spin-wait after each multi-threaded call; on a 2-core machine
that halves the speed of whatever the engine's threads do next (measured: a 5x5
depthwise conv on (192, 40, 40) took 1.74 ms on 2 threads after a 1-thread GEMM,
3.21 ms after a 2-thread one). So the CPU backend sets BLAS to one thread for a run
(threadpoolctl, restored afterwards) and ``MatMul`` cuts big products into blocks run
on the backend's own pool, each a plain ``np.matmul`` (which releases the GIL).
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

from mnnpy.backends.cpu.parallel import parallel

# FLOPs (2*M*N*K*batch) from which a product is split over threads. 5 MFLOP since the pool's
# spinning hand-over (about 14 µs a round trip): whole models, interleaved, 2 threads, Zen 5
# (2026-12-02, fourth session), 30 -> 5 MFLOP: MobileNetV2 5.24 -> 4.39 ms, ResNet-18 and
# PP-OCRv4 rec and det within noise or 2-5% faster; PP-OCR cls 2 MFLOP slower (0.48 -> 0.59).
MIN_FLOPS = 5e6
MIN_K = 16
MIN_SPLIT_COLS = 256  # output columns per thread from which a product is cut into column blocks


class BlasThreads:
    """The thread counts of every BLAS library loaded in the process (threadpoolctl).

    NumPy and SciPy each bundle an OpenBLAS, and numba's compiled products call SciPy's:
    all of them are set, not the first threadpoolctl lists. Leaving one at 2 threads let
    its worker spin beside the backend's pool: ResNet-18 took 105-195 ms a run instead of
    12-17 in the processes where the numba warm-up had loaded SciPy, whose library
    threadpoolctl lists first, before the runtime looked (3 of 4 processes here). The list
    is read again (about 1 ms) when more modules have been imported since (``refresh``).
    """

    def __init__(self):
        self._libs: list = []
        self._modules = -1
        self.refresh()

    def refresh(self) -> None:
        """Read the loaded BLAS libraries again if modules were imported since the last look."""
        import sys

        if len(sys.modules) == self._modules:
            return
        self._modules = len(sys.modules)
        try:
            from threadpoolctl import ThreadpoolController

            self._libs = [_calls(lib) for lib in ThreadpoolController().select(user_api="blas").lib_controllers]
        except Exception:  # no threadpoolctl-supported BLAS: leave their defaults alone
            self._libs = []

    def use(self, n: int) -> list[int] | None:
        """Make every BLAS run on ``n`` threads; returns the previous counts for ``restore``
        (``None`` when nothing changed; about 0.2 µs per library and call)."""
        before = [get() for get, _ in self._libs]
        if all(b == n for b in before):
            return None
        for (_, set_), b in zip(self._libs, before):
            if b != n:
                set_(n)
        return before

    def restore(self, before: list[int] | None) -> None:
        """Put back the counts ``use`` returned."""
        if before is None:
            return
        for (_, set_), b in zip(self._libs, before):
            set_(b)

    @contextlib.contextmanager
    def single(self):
        """Every BLAS on one thread inside the ``with`` block, as during a run; for products
        at resize (weight transforms): a small one that OpenBLAS splits over its own threads
        waited 10-20 ms for them on the loaded 2-core machine (PP-OCRv4 det's Winograd weights,
        0.3-0.6 ms each on one thread)."""
        self.refresh()
        before = self.use(1)
        try:
            yield
        finally:
            self.restore(before)


def _calls(lib) -> tuple:
    """``(get_num_threads, set_num_threads)`` of a threadpoolctl controller: for OpenBLAS its
    own C functions through ctypes (threadpoolctl's wrappers look each symbol up again on
    every call: 1.9 µs a call against 0.2), else the controller's methods."""
    if getattr(lib, "internal_api", None) == "openblas":
        try:
            get, set_ = lib._get_symbol("openblas_get_num_threads"), lib._get_symbol("openblas_set_num_threads")
            if get is not None and set_ is not None:
                return get, set_
        except Exception:  # another threadpoolctl: its public methods
            pass
    return lib.get_num_threads, lib.set_num_threads


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

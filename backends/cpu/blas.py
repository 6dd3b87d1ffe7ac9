"""Matrix products on the CPU backend, on a BLAS that runs single-threaded during a run.

OpenBLAS's own threads spin-wait after each multi-threaded call; on a 2-core machine
that halves the speed of whatever the engine's threads do next (measured: a 5x5
depthwise conv on (192, 40, 40) took 1.74 ms on 2 threads after a 1-thread GEMM,
3.21 ms after a 2-thread one). So the CPU backend sets BLAS to one thread for a run
(threadpoolctl, restored afterwards) and ``MatMul`` cuts big products into blocks run
on the backend's own pool. Each block is one compiled call of ``cblas_sgemm``
(``native_product``, ``kernels/gemm.py``), which a worker makes without taking the GIL
(worker_pool.py's native tasks; MobileNetV2 4.81 -> 4.22 ms on 2 threads, PP-OCRv4 rec 7.86
-> 7.37, interleaved in one process), else a plain ``np.matmul`` (which releases the GIL).
"""

from __future__ import annotations

import contextlib
import functools

import numpy as np

from mnnpy.backends.cpu.parallel import parallel, split

# FLOPs (2*M*N*K*batch) from which a product is split over threads. 5 MFLOP since the pool's
# spinning hand-over (about 14 µs a round trip): whole models, interleaved, 2 threads, Zen 5
# (2026-12-02, fourth session), 30 -> 5 MFLOP: MobileNetV2 5.24 -> 4.39 ms, ResNet-18 and
# PP-OCRv4 rec and det within noise or 2-5% faster; PP-OCR cls 2 MFLOP slower (0.48 -> 0.59).
MIN_FLOPS = 5e6
MIN_K = 16
MIN_SPLIT_COLS = 256  # output columns per thread from which a product is cut into column blocks
MIN_SPLIT_ROWS = 32  # output rows per thread from which a product with few columns is cut into row blocks
NATIVE_PRODUCTS = True  # products as one compiled call each (kernels/gemm.py: native tasks) where it compiles
# weights (K*N elements) from which a product of one row is cut into column blocks over the threads
# (kernels/gemv.py); below, one thread (BLAS's sgemv, or the kernel where it is one call anyway)
GEMV_SPLIT = 1 << 17


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


@functools.lru_cache(maxsize=1)
def sgemm_address() -> tuple[int, bool] | None:
    """``(address, ilp64)`` of ``cblas_sgemm`` in a loaded OpenBLAS (NumPy's first), for compiled
    kernels that call it (``kernels/gemm.py``); ``ilp64``: the library's integers are 64-bit
    (OpenBLAS's ``64_`` symbol suffix, as in NumPy's ``scipy_openblas64_``). ``None`` where no
    OpenBLAS with CBLAS is loaded (another BLAS: products stay on ``np.matmul``)."""
    import ctypes

    try:
        from threadpoolctl import ThreadpoolController

        libs = [c for c in ThreadpoolController().select(user_api="blas").lib_controllers if c.internal_api == "openblas"]
    except Exception:  # noqa: BLE001 - no threadpoolctl-supported BLAS
        return None
    libs.sort(key=lambda c: "numpy" not in str(c.filepath))
    for lib in libs:
        try:
            dll = ctypes.CDLL(lib.filepath)
        except OSError:
            continue
        for prefix in ("scipy_", ""):
            for suffix in ("64_", ""):
                fn = getattr(dll, f"{prefix}cblas_sgemm{suffix}", None)
                if fn is not None:
                    return ctypes.cast(fn, ctypes.c_void_p).value, suffix == "64_"
    return None


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


def blocks(m: int, cols: int, flops: float, k: int, parts: int, two_d: bool) -> list[tuple[int, int, int, int]]:
    """``(r0, r1, c0, c1)`` blocks of an ``(m, cols)`` product output, at most ``parts``:
    one when the product is under ``MIN_FLOPS`` or its inner dimension under ``MIN_K``; column
    blocks when each gets ``MIN_SPLIT_COLS``; else row blocks (2-D products only, at least
    ``MIN_SPLIT_ROWS`` rows each); else column blocks."""
    if parts <= 1 or flops < MIN_FLOPS or k < MIN_K:
        return [(0, m, 0, cols)]
    if cols >= MIN_SPLIT_COLS * parts or not two_d or m < MIN_SPLIT_ROWS * parts:
        return [(0, m, c0, c1) for c0, c1 in split(cols, parts)]
    return [(r0, r1, 0, cols) for r0, r1 in split(m, parts)]


def native_product(w, x, y, r0, r1, xc0, yc0, cols, bias=None, act=(0, 0.0, 0.0)):
    """A callable of no arguments computing ``y[.., r0:r1, yc0:yc0+cols] = w[.., r0:r1, :] @
    x[.., :, xc0:xc0+cols]`` (2-D, or 3-D batches with ``w`` of batch 1 or the same), then
    ``act(y + bias[r])`` where ``bias`` (``(M,)``) is given, in one compiled call
    (``kernels/gemm.py``) that a worker thread makes without the GIL (a native task,
    ``worker_pool.py``). ``None`` where it cannot: a matrix-vector product, not float32 C-contiguous arrays, another
    BLAS than OpenBLAS, numba unable to compile, or ``NATIVE_PRODUCTS`` off (callers then use
    ``np.matmul``). ``act``: ``kernels/epilogue.codes``."""
    if not NATIVE_PRODUCTS or any(a.dtype != np.float32 or not a.flags.c_contiguous or a.ndim not in (2, 3) for a in (w, x, y)):
        return None
    if r1 - r0 == 1 or cols == 1:  # a matrix-vector product: np.matmul calls BLAS's gemv (sgemm: 2-5x slower)
        return None
    from mnnpy.backends.cpu.kernels import gemm
    from mnnpy.backends.cpu.kernels.native import NativeKernel, bind

    kernel, where = gemm.kernel(), sgemm_address()
    if not isinstance(kernel, NativeKernel) or where is None:  # numba's own dispatcher (MNNPY_NATIVE_KERNELS=0) types
        return None  # its arrays writable: the weights are read-only views of the model
    w3, x3, y3 = (a if a.ndim == 3 else a.reshape(1, *a.shape) for a in (w, x, y))
    if w3.shape[0] not in (1, x3.shape[0]) or x3.shape[0] != y3.shape[0]:
        return None
    b = np.zeros(0, np.float32) if bias is None else bias
    code, a0, a1 = act
    return bind(kernel, where[0], where[1], w3, x3, y3, b, r0, r1, xc0, yc0, cols, code, np.float32(a0), np.float32(a1))


def _blocks(a: np.ndarray, b: np.ndarray, out: np.ndarray, parts: int) -> list[tuple]:
    """``(a_i, b_i, out_i)`` views whose products fill ``out``: column blocks when each gets at
    least ``MIN_SPLIT_COLS`` columns, else row blocks of 2-D ``a`` (few columns: 7x7 maps)."""

    rows, cols = out.shape[-2], out.shape[-1]
    if b.ndim == out.ndim and (cols >= MIN_SPLIT_COLS * parts or a.ndim != 2 or rows < MIN_SPLIT_ROWS * parts):
        return [(a, b[..., lo:hi], out[..., lo:hi]) for lo, hi in split(cols, parts)]
    if a.ndim == 2 and out.ndim == 2:
        return [(a[lo:hi], b, out[lo:hi]) for lo, hi in split(rows, parts)]
    return [(a, b, out)]


def _gemv_tasks(a: np.ndarray, b: np.ndarray, out: np.ndarray, threads: int) -> list | None:
    """Column blocks of a product of one row, ``a (1, K) @ b (K, N) -> out (1, N)``, as native
    calls of ``kernels/gemv.py``, one per thread (each a multiple of 16 columns: no cache line
    written by two threads) where ``b`` holds at least ``GEMV_SPLIT`` elements; ``None`` where
    this is not such a product (not 2-D float32 C-contiguous arrays), for a smaller one, or where
    the kernel does not compile (``np.matmul`` then)."""
    if threads <= 1 or a.ndim != 2 or b.ndim != 2 or out.ndim != 2 or a.shape[0] != 1 or b.size < GEMV_SPLIT:
        return None
    if any(v.dtype != np.float32 or not v.flags.c_contiguous for v in (a, b, out)):
        return None
    from mnnpy.backends.cpu.kernels import gemv
    from mnnpy.backends.cpu.kernels.native import NativeKernel, bind

    kernel = gemv.kernel()
    if not isinstance(kernel, NativeKernel):  # numba's dispatcher types its arrays writable: weights are read-only
        return None
    n = out.shape[1]
    edges = sorted({min(n, (n * i // threads + 8) // 16 * 16) for i in range(1, threads)} | {0, n})
    x, y = a.reshape(-1), out.reshape(-1)
    return [bind(kernel, x, b, y, c0, c1) for c0, c1 in zip(edges, edges[1:]) if c1 > c0]


class MatMul:
    """A prepared ``np.matmul(a, b, out=out)`` (views fixed at resize), cut over the pool when big.

    BLAS stays single-threaded during a run: a product with at least ``MIN_FLOPS`` FLOPs
    and an inner dimension of at least ``MIN_K`` is cut into one block per pool thread
    (``_blocks``); measured on the 2-core machine, two column halves of
    (64 x 577) @ (577 x 3136) take 1.33 ms against 1.33 ms for OpenBLAS's own 2 threads,
    without the spinning workers. A product of one row with big weights (a classifier's Gemm)
    is cut into column blocks of ``kernels/gemv.py`` instead (``_gemv_tasks``).
    """

    def __init__(self, backend, a: np.ndarray, b: np.ndarray, out: np.ndarray):
        self.backend = backend
        tasks = _gemv_tasks(a, b, out, backend.num_threads)
        if tasks is not None:
            self.tasks = tasks
            return
        k = a.shape[-1]
        flops = 2.0 * out.size * k
        threads = backend.num_threads if flops >= MIN_FLOPS and k >= MIN_K else 1
        if a.ndim == b.ndim == out.ndim and a.ndim in (2, 3):
            m, cols = out.shape[-2], out.shape[-1]
            cuts = blocks(m, cols, flops, k, threads, a.ndim == 2)
            tasks = [native_product(a, b, out, r0, r1, c0, c0, c1 - c0) for r0, r1, c0, c1 in cuts]
            if all(t is not None for t in tasks):
                self.tasks = tasks
                return
        parts = _blocks(a, b, out, threads) if threads > 1 else [(a, b, out)]
        self.tasks = [functools.partial(np.matmul, a, b, out=out) for a, b, out in parts]

    def __call__(self) -> None:
        parallel(self.backend, self.tasks)

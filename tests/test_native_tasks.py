"""Native tasks (backends/cpu/worker_pool.py, kernels/spin.py ``serve``): tasks made of
compiled kernels run on the workers without Python, and products as one compiled call
(backends/cpu/blas.py ``native_product``, kernels/gemm.py) equal NumPy's."""

import threading

import numpy as np
import pytest

from mnnpy.backends.cpu import blas
from mnnpy.backends.cpu.kernels import epilogue, native
from mnnpy.backends.cpu.parallel import sequence
from mnnpy.backends.cpu.worker_pool import WorkerPool


def _kernels():
    from mnnpy.backends.cpu.kernels.spin import kernel, serve_kernel

    spin, serve, rows = kernel(), serve_kernel(), epilogue.kernel()
    if not all(isinstance(k, native.NativeKernel) for k in (spin, serve, rows)):
        pytest.skip("no machine-code kernels here (numba or llvmlite missing, or MNNPY_NATIVE_KERNELS=0)")
    return spin, serve, rows


@pytest.fixture
def pool():
    spin, serve, _ = _kernels()
    p = WorkerPool(3)
    p.use_spin(spin, serve)
    p.wake()
    yield p
    p.park()


def _relu_rows(rows, y, parts):
    """Bound epilogue tasks (Relu with a bias of 1) over ``parts`` row blocks of ``y``."""
    b = np.ones(y.shape[0], np.float32)
    cuts = np.linspace(0, y.shape[0], parts + 1).astype(int)
    return [native.bind(rows, y, b, lo, hi, 0, y.shape[1], 1, np.float32(0), np.float32(0)) for lo, hi in zip(cuts, cuts[1:])]


def test_bound_void_kernels_are_native_tasks():
    _, _, rows = _kernels()
    y = np.zeros((4, 8), np.float32)
    (task,) = _relu_rows(rows, y, 1)
    assert task.native.dtype == np.int64 and task.native.shape == (3,)
    assert task.native[0] == rows.address != 0


@pytest.mark.parametrize("parts", [2, 3, 5, 12])
def test_native_tasks_run_once_each_on_the_workers(pool, parts):
    _, _, rows = _kernels()
    rng = np.random.default_rng(parts)
    x = rng.standard_normal((24, 40)).astype(np.float32)
    for _ in range(30):  # each run adds the bias once to every row: a task run twice or never shows
        y = x.copy()
        pool.run(_relu_rows(rows, y, parts))
        np.testing.assert_array_equal(y, np.maximum(x + 1, 0))
    assert pool.flags[5] > 0  # CALLS of worker 0's row: the last task it got was native


def test_native_and_python_tasks_mix(pool):
    _, _, rows = _kernels()
    y = np.full((6, 10), -3.0, np.float32)
    hits, lock = [], threading.Lock()

    def python_task():
        with lock:
            hits.append(threading.get_ident())

    for _ in range(20):
        tasks = _relu_rows(rows, y, 3)
        pool.run([tasks[0], python_task, tasks[1], python_task, tasks[2]])
    assert len(hits) == 40
    assert (y == 19).all()  # -3 + 1 -> Relu 0 in the first run, then +1 in each of the other 19


def test_sequence_concatenates_native_steps():
    _, _, rows = _kernels()
    y = np.zeros((4, 8), np.float32)
    steps = _relu_rows(rows, y, 4)
    task = sequence(steps)
    assert task.native.shape == (12,)
    task()
    np.testing.assert_array_equal(y, np.ones_like(y))
    assert not hasattr(sequence([*steps, lambda: None]), "native")  # one Python step: a Python task


def test_workers_survive_park_and_wake_with_native_tasks(pool):
    _, _, rows = _kernels()
    for _ in range(10):
        y = np.zeros((8, 16), np.float32)
        pool.run(_relu_rows(rows, y, 3))
        pool.park()  # workers sleep on their semaphores; the next task must still reach them
        pool.wake()
        np.testing.assert_array_equal(y, np.ones_like(y))


def _product_or_skip(*args, **kw):
    task = blas.native_product(*args, **kw)
    if task is None:
        pytest.skip("no native product here (numba, llvmlite or an OpenBLAS with CBLAS missing)")
    return task


@pytest.mark.parametrize("m,k,n", [(7, 5, 9), (64, 33, 100), (128, 300, 17)])
def test_native_product_equals_numpy(m, k, n):
    rng = np.random.default_rng(m)
    w, x = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    y = np.full((m, n), np.nan, np.float32)
    r0, r1, c0 = m // 3, m, n // 4
    _product_or_skip(w, x, y, r0, r1, c0, c0, n - c0)()
    np.testing.assert_allclose(y[r0:r1, c0:], w[r0:r1] @ x[:, c0:], rtol=1e-5, atol=1e-5)
    assert np.isnan(y[:r0]).all() and np.isnan(y[:, :c0]).all()  # outside the block: untouched


def test_native_product_batched_with_bias_and_clip():
    rng = np.random.default_rng(1)
    w, x = rng.standard_normal((4, 16, 24)).astype(np.float32), rng.standard_normal((4, 24, 30)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)
    y = np.zeros((4, 16, 40), np.float32)  # wider than x: columns 10..29 of y from columns 0..19 of x
    _product_or_skip(w, x, y, 0, 16, 0, 10, 20, b, epilogue.codes("Clip", (0.0, 6.0)))()
    want = np.clip(w @ x[:, :, :20] + b[:, None], 0, 6)
    np.testing.assert_allclose(y[:, :, 10:30], want, rtol=1e-5, atol=1e-5)
    assert not y[:, :, :10].any() and not y[:, :, 30:].any()


def test_native_product_declines_what_it_cannot_do():
    f32 = np.zeros((8, 8), np.float32)
    assert blas.native_product(f32.astype(np.float64), f32, f32, 0, 8, 0, 0, 8) is None  # not float32
    assert blas.native_product(f32, f32[:, ::2], f32[:, :4], 0, 8, 0, 0, 4) is None  # not C-contiguous
    assert blas.native_product(f32[:1], f32, f32[:1], 0, 1, 0, 0, 8) is None  # a matrix-vector product: gemv
    blas.NATIVE_PRODUCTS, old = False, blas.NATIVE_PRODUCTS
    try:
        assert blas.native_product(f32, f32, f32, 0, 8, 0, 0, 8) is None
    finally:
        blas.NATIVE_PRODUCTS = old

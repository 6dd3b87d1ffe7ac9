"""The CPU backend's worker pool (backends/cpu/worker_pool.py) and its BLAS thread control
(backends/cpu/blas.py): every task runs once, errors come back to the caller, nested and
concurrent callers neither deadlock nor lose tasks, workers stop polling when a run ends,
a forked child gets its own workers, and every loaded BLAS is set for a run."""

import multiprocessing as mp
import os
import threading
import time

import numpy as np
import pytest

from mnnpy.backends.cpu.worker_pool import WorkerPool


def _spin():
    try:
        from mnnpy.backends.cpu.kernels.spin import kernel
    except ImportError:
        return None
    return kernel()


@pytest.fixture(params=["spin", "semaphores"])
def pool(request):
    p = WorkerPool(3)
    if request.param == "spin":
        spin = _spin()
        if spin is None:
            pytest.skip("numba cannot compile here: no spinning kernel")
        p.use_spin(spin)
    p.wake()
    yield p
    p.park()


def _count_tasks(n, hits, lock):
    def task(i):
        with lock:
            hits[i] += 1

    return [lambda i=i: task(i) for i in range(n)]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 50])
def test_every_task_runs_once(pool, n):
    hits, lock = [0] * n, threading.Lock()
    for _ in range(20):
        pool.run(_count_tasks(n, hits, lock))
    assert hits == [20] * n


def test_work_is_spread_over_the_threads(pool):
    seen, lock = set(), threading.Lock()

    def task():
        time.sleep(0.01)  # long enough that one thread cannot take them all
        with lock:
            seen.add(threading.get_ident())

    pool.run([task] * 3)
    assert len(seen) == 3


@pytest.mark.parametrize("where", [0, 1, 2])
def test_an_error_in_a_task_is_raised_after_the_others_finished(pool, where):
    done = []

    def ok():
        time.sleep(0.005)
        done.append(1)

    def bad():
        raise ValueError("task failed")

    tasks = [ok, ok, ok]
    tasks[where] = bad
    with pytest.raises(ValueError, match="task failed"):
        pool.run(tasks)
    assert len(done) == 2
    hits, lock = [0] * 3, threading.Lock()
    pool.run(_count_tasks(3, hits, lock))  # still usable
    assert hits == [1, 1, 1]


def test_a_task_that_runs_the_pool_again_runs_its_tasks_itself(pool):
    hits, lock = [0] * 4, threading.Lock()

    def outer():
        pool.run(_count_tasks(4, hits, lock))

    pool.run([outer, outer])
    assert hits == [2] * 4


def test_concurrent_callers_lose_no_task(pool):
    hits, lock = [0] * 6, threading.Lock()
    tasks = _count_tasks(6, hits, lock)

    def caller():
        for _ in range(200):
            pool.run(tasks)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert hits == [600] * 6


def _cpu_ticks(native_ids):
    total = 0
    for tid in native_ids:
        fields = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime + stime, clock ticks
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc to read the workers' CPU time")
@pytest.mark.parametrize("serve", [False, True], ids=["spin", "serve"])
def test_parked_workers_do_not_spin(monkeypatch, serve):
    spin = _spin()
    if spin is None:
        pytest.skip("numba cannot compile here: no spinning kernel")
    from mnnpy.backends.cpu import worker_pool
    from mnnpy.backends.cpu.kernels.spin import serve_kernel

    monkeypatch.setattr(worker_pool, "SPIN_US", 2_000_000)  # poll 2 s after a task: visible in CPU time
    before = {t.native_id for t in threading.enumerate()}
    p = WorkerPool(3)
    p.use_spin(spin, serve_kernel() if serve else None)  # serve: parked workers poll GRACE_US more
    workers = [t.native_id for t in threading.enumerate() if t.native_id not in before and t.name.startswith("mnnpy-cpu")]
    assert len(workers) == 2
    p.wake()
    p.run([lambda: None] * 3)
    t0 = _cpu_ticks(workers)
    time.sleep(0.3)
    polling = _cpu_ticks(workers) - t0  # between tasks of a run the workers poll (SPIN_US)
    p.park()
    time.sleep(0.05 + worker_pool.GRACE_US / 1e6)
    t0 = _cpu_ticks(workers)
    time.sleep(0.5)
    parked = _cpu_ticks(workers) - t0
    tick = os.sysconf("SC_CLK_TCK")
    assert parked <= 0.02 * tick, f"parked workers used {parked / tick:.3f} s of CPU in 0.5 s"
    assert polling >= 0.2 * tick, "the measurement did not see the workers polling"


def _child_runs(q):
    p = _CHILD_POOL
    hits, lock = [0] * 5, threading.Lock()
    p.run(_count_tasks(5, hits, lock))
    q.put(hits)


_CHILD_POOL = None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX only")
def test_a_forked_child_starts_its_own_workers():
    global _CHILD_POOL
    _CHILD_POOL = WorkerPool(2)
    _CHILD_POOL.use_spin(_spin())
    _CHILD_POOL.run([lambda: None] * 2)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    child = ctx.Process(target=_child_runs, args=(q,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert q.get(timeout=5) == [1] * 5


def test_every_blas_library_is_set_for_a_run():
    pytest.importorskip("scipy.linalg")  # NumPy's and SciPy's OpenBLAS both loaded
    from threadpoolctl import threadpool_info, threadpool_limits

    from mnnpy.backends.cpu.blas import BlasThreads

    with threadpool_limits(2, user_api="blas"):
        blas = BlasThreads()
        libs = [i for i in threadpool_info() if i["user_api"] == "blas"]
        before = blas.use(1)
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas"), threadpool_info()
        blas.restore(before)
        assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == [i["num_threads"] for i in libs]


def test_the_backend_sets_blas_to_one_thread_during_a_run_and_restores_it():
    pytest.importorskip("scipy.linalg")
    from onnx import TensorProto, helper
    from threadpoolctl import threadpool_info, threadpool_limits

    import mnnpy
    from mnnpy.converter import convert
    from tests.backend_compare import only_execution

    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [64, 64]) for n in "ab"]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "g", ins, [out])
    data = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    seen = []
    with threadpool_limits(2, user_api="blas"):
        s = mnnpy.Interpreter(data).create_session(num_threads=2)
        s.run({"a": np.ones((64, 64), np.float32), "b": np.ones((64, 64), np.float32)})
        exe = only_execution(s)
        inner = exe.on_execute

        def spy(ins, outs):
            seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
            inner(ins, outs)

        exe.on_execute = spy
        x = np.ones((64, 64), np.float32)
        s.run({"a": x, "b": x})
        after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert seen and all(n == 1 for n in seen[0]), seen
    assert all(n == 2 for n in after), after


def test_workers_are_kept_off_the_callers_cpu():
    """wake() lets each worker run on every CPU of the process but the caller's (worker_pool.py,
    module doc: a worker placed on the caller's CPU made runs slower than one thread)."""
    from mnnpy.backends.cpu import worker_pool

    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if worker_pool._GETCPU is None or len(allowed) < 2:
        pytest.skip(f"needs sched_getcpu and at least 2 CPUs to run on (allowed: {sorted(allowed)})")
    p = WorkerPool(3)
    try:
        for _ in range(3):
            p.wake()
            cpu = p._caller_cpu
            assert cpu in allowed
            for t in p._threads:
                assert os.sched_getaffinity(t.native_id) == allowed - {cpu}
            hits, lock = [0] * 4, threading.Lock()
            p.run(_count_tasks(4, hits, lock))  # the tasks still run, on the workers' CPUs
            assert hits == [1] * 4
            p.park()
            p._caller_cpu = -1  # the next wake() places them again
    finally:
        p.park()

"""NNAPI's executions on every backend (issue 14): synchronous, asynchronous, fenced and burst
runs; timing; caller-provided outputs; deadlines; priorities; many threads; close.

Each GPU backend runs here on its CPU implementation (PoCL, lavapipe) and is skipped with the
reason where its driver is missing. Outputs are compared with the CPU backend's plain ``run``.
"""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.errors import DeadlineMissedError, DependencyFailedError, InputError, OutputBufferTooSmallError
from mnnpy.fence import Fence
from mnnpy.timing import RunOutputs, Timing
from tests.backend_compare import backends, gpu_backends


def _model(shape=(2, 3, 8, 8)) -> bytes:
    """x -> Relu -> Mul(2) -> Conv 3x3 (3 -> 4 channels) -> y; the Conv keeps GPUs busy a little."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (4, 3, 3, 3), rng.standard_normal((4, 3, 3, 3)).astype(np.float32).ravel())
    two = helper.make_tensor("two", TensorProto.FLOAT, (), [2.0])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Mul", ["r", "two"], ["m"]),
        helper.make_node("Conv", ["m", "w"], ["y"], pads=[1, 1, 1, 1]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", [x], [y], [w, two])
    return convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


MODEL = _model()
X = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def expected():
    return mnnpy.Interpreter(MODEL).create_session().run({"x": X})["y"]


def _session(backend, **options):
    return mnnpy.Interpreter(MODEL).create_session(backend=backend, **options)


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


# -- run, timing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_run_returns_outputs_with_timing_when_asked(backend, expected):
    with _session(backend) as s:
        plain = s.run({"x": X})
        assert isinstance(plain, RunOutputs) and plain.timing is None
        timed = s.run({"x": X}, measure_timing=True)
        _close(timed["y"], expected)
        t = timed.timing
        assert isinstance(t, Timing) and t.in_driver_us is not None and t.in_driver_us > 0
        if backend == "cpu":
            assert t.on_device_us is not None and 0 < t.on_device_us <= t.in_driver_us
        elif t.on_device_us is not None:  # a GPU without timestamps reports None
            assert 0 < t.on_device_us <= t.in_driver_us


# -- caller-provided outputs ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_outputs_are_written_into_the_callers_arrays(backend, expected):
    with _session(backend) as s:
        out = np.full(expected.shape, np.nan, np.float32)
        r = s.run({"x": X}, outputs={"y": out})
        assert r["y"] is out
        _close(out, expected)
        flat = np.zeros(expected.size + 5, np.float32)  # larger: the output takes its first elements
        r = s.run({"x": X}, outputs={"y": flat})
        assert r["y"].shape == expected.shape and np.shares_memory(r["y"], flat)
        _close(flat[: expected.size].reshape(expected.shape), expected)


@pytest.mark.parametrize("backend", backends())
def test_an_output_array_too_small_lists_the_shapes_needed_and_the_session_stays_usable(backend, expected):
    with _session(backend) as s:
        with pytest.raises(OutputBufferTooSmallError) as e:
            s.run({"x": X}, outputs={"y": np.zeros(7, np.float32)})
        assert e.value.needed == {"y": expected.shape}
        assert "needs" in str(e.value) and "'y'" in str(e.value)
        _close(s.run({"x": X})["y"], expected)


def test_an_output_known_only_after_the_run_is_checked_when_read():
    """NonZero's output shape depends on the input's contents: the declared shape has
    unknown dims, so the check happens after the run, with the shape found then."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "g", [x], [y])
    s = mnnpy.Interpreter(
        convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    ).create_session()
    a = np.array([0, 1, 0, 2, 3, 0], np.float32)
    with pytest.raises(OutputBufferTooSmallError) as e:
        s.run({"x": a}, outputs={"y": np.zeros(2, np.int64)})
    assert e.value.needed == {"y": (1, 3)}
    out = np.zeros((1, 3), np.int64)
    assert s.run({"x": a}, outputs={"y": out})["y"] is out and out.tolist() == [[1, 3, 4]]


@pytest.mark.parametrize(
    "outputs, match",
    [
        ({"nope": np.zeros(4, np.float32)}, "unknown output name"),
        ({"y": np.zeros((2, 4, 8, 8), np.float64)}, "is float32, the array given is float64"),
        ({"y": [0.0] * 512}, "takes an ndarray"),
        ({"y": np.zeros((8, 8, 4, 2), np.float32).T}, "C-contiguous"),
        ("y", "dict of output name"),
    ],
)
def test_bad_output_arrays_are_refused_before_the_run(outputs, match):
    s = _session("cpu")
    with pytest.raises(InputError, match=match):
        s.run({"x": X}, outputs=outputs)


def test_a_read_only_output_array_is_refused():
    out = np.zeros((2, 4, 8, 8), np.float32)
    out.flags.writeable = False
    with pytest.raises(InputError, match="writeable"):
        _session("cpu").run({"x": X}, outputs={"y": out})


# -- deadlines ------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_a_deadline_already_past_fails_before_the_run_and_the_session_stays_usable(backend, expected):
    with _session(backend) as s:
        with pytest.raises(DeadlineMissedError, match="before the run started"):
            s.run({"x": X}, deadline=time.monotonic() - 0.01)
        with pytest.raises(DeadlineMissedError):
            s.run({"x": X}, timeout_ms=0)
        _close(s.run({"x": X}, timeout_ms=60_000)["y"], expected)


@pytest.mark.parametrize("bad", [float("nan"), "soon", True])
def test_bad_deadlines_are_input_errors(bad):
    with pytest.raises(InputError, match="deadline"):
        _session("cpu").run({"x": X}, deadline=bad)
    with pytest.raises(InputError, match="timeout_ms"):
        _session("cpu").run({"x": X}, timeout_ms=bad if bad is not True else -1)


def test_a_deadline_passing_during_a_cpu_run_stops_it_between_ops(monkeypatch):
    s = _session("cpu")
    s.run({"x": X})
    exes = list(s.runner.plan.executions.values())
    first = exes[0]
    slow = first.on_execute

    def sleepy(ins, outs):
        time.sleep(0.05)
        slow(ins, outs)

    monkeypatch.setattr(first, "on_execute", sleepy)
    with pytest.raises(DeadlineMissedError, match="before op"):
        s.run({"x": X}, timeout_ms=20)
    monkeypatch.undo()
    assert s.run({"x": X})["y"].shape == (2, 4, 8, 8)


def test_a_preparation_deadline():
    with pytest.raises(DeadlineMissedError, match="before preparing"):
        mnnpy.Interpreter(MODEL).create_session(deadline=time.monotonic() - 1)
    s = mnnpy.Interpreter(MODEL).create_session(timeout_ms=60_000)
    assert s.run({"x": X})["y"].shape == (2, 4, 8, 8)


# -- asynchronous ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_run_async_returns_a_future_of_the_outputs(backend, expected):
    with _session(backend) as s:
        futures = [s.run_async({"x": X}, measure_timing=True) for _ in range(5)]
        for f in futures:
            r = f.result(timeout=60)
            _close(r["y"], expected)
            assert r.timing is not None


@pytest.mark.parametrize("backend", backends())
def test_an_error_inside_an_async_run_is_raised_by_the_future(backend):
    with _session(backend) as s:
        f = s.run_async({"x": X}, deadline=time.monotonic() - 1)
        with pytest.raises(DeadlineMissedError):
            f.result(timeout=60)
        with pytest.raises(InputError):  # bad inputs: raised at the call
            s.run_async({"x": X.astype(np.float64)})


# -- fenced ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_a_fenced_run_waits_for_its_fences_from_another_session(backend, expected):
    a, b = _session(backend), _session(backend)
    gate = Fence("gate")
    fa, ra = a.run_fenced({"x": X}, wait_for=[gate], measure_timing=True)
    fb, rb = b.run_fenced({"x": X}, wait_for=[fa], measure_timing=True)
    time.sleep(0.05)
    assert not fa.signalled and not fb.signalled and not fb.wait(0.01)
    gate.signal()
    assert fb.wait(60) and fa.signalled
    _close(ra.result()["y"], expected)
    _close(rb.result()["y"], expected)
    for t in (fb.timing_launched, fb.timing_fenced):
        assert isinstance(t, Timing) and t.in_driver_us > 0
    assert fb.timing_fenced.in_driver_us <= fb.timing_launched.in_driver_us
    assert fb.error is None


@pytest.mark.parametrize("backend", backends())
def test_a_fence_that_never_signals_times_out_cleanly(backend, expected):
    with _session(backend) as s:
        t0 = time.monotonic()
        fence, future = s.run_fenced({"x": X}, wait_for=[Fence("never")], timeout_ms=100)
        with pytest.raises(DeadlineMissedError, match="waiting for"):
            future.result(timeout=60)
        assert time.monotonic() - t0 < 30
        assert fence.signalled and isinstance(fence.error, DeadlineMissedError)
        _close(s.run({"x": X})["y"], expected)


def test_a_failed_run_fails_the_runs_that_wait_for_its_fence():
    s = _session("cpu")
    failed, f1 = s.run_fenced({"x": X}, deadline=time.monotonic() - 1)
    later, f2 = s.run_fenced({"x": X}, wait_for=[failed])
    with pytest.raises(DeadlineMissedError):
        f1.result(timeout=60)
    with pytest.raises(DependencyFailedError, match="failed run"):
        f2.result(timeout=60)
    assert later.signalled and isinstance(later.error, DependencyFailedError)


def test_wait_for_takes_only_fences():
    with pytest.raises(InputError, match="Fence"):
        _session("cpu").run_fenced({"x": X}, wait_for=[threading.Event()])


# -- burst ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_burst_runs_give_the_same_outputs_and_notice_new_shapes(backend, expected):
    with _session(backend) as s, s.burst() as burst:
        for _ in range(5):
            _close(burst.run({"x": X})["y"], expected)
        with pytest.raises(InputError):  # a wrong dtype is still caught after the fast runs
            burst.run({"x": X.astype(np.float64)})
        _close(burst.run({"x": X}, measure_timing=True)["y"], expected)
    with pytest.raises(InputError, match="closed"):
        burst.run({"x": X})


@pytest.mark.parametrize("backend", backends())
def test_bound_burst_runs_copy_out_and_follow_the_sessions_plan(backend, expected):
    """After the first run a burst runs through its ``BoundRun``: each output is a new array,
    a plain run with other shapes in between sends it back through the full path, and feeds
    it was not bound for are checked."""
    x2 = X[:1].copy()
    with mnnpy.Interpreter(_model(("N", 3, 8, 8))).create_session(backend=backend) as s, s.burst() as burst:
        first = burst.run({"x": X})["y"]
        second = burst.run({"x": X})["y"]
        assert burst._bound() is not None and burst._bound().plan is s.runner.plan
        assert not np.shares_memory(first, second)
        first[...] = 0  # the caller's copy: the next run is not affected
        _close(burst.run({"x": X})["y"], expected)
        _close(burst.run({"x": -X})["y"], mnnpy.Interpreter(MODEL).create_session().run({"x": -X})["y"])
        _close(s.run({"x": x2})["y"], expected[:1])  # the session's plan changes
        _close(burst.run({"x": X})["y"], expected)
        assert s.output_shapes == {"y": (2, 4, 8, 8)}
        with pytest.raises(InputError, match="unknown|not an input"):
            burst.run({"x": X, "z": 1})
        with pytest.raises(InputError):
            burst.run({"x": X[..., :4]})


def test_bound_burst_runs_ignore_float_errors_and_wait_for_a_busy_device():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Div", ["x", "x"], ["y"])], "g", [x], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    s = mnnpy.Interpreter(convert(model.SerializeToString())).create_session()
    feeds = {"x": np.array([0.0, 1.0, -2.0], np.float32)}
    burst = s.burst()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            out = burst.run(feeds)["y"]  # 0/0: NaN, silently, as onnxruntime gives
            np.testing.assert_array_equal(out, [np.nan, 1.0, 1.0])
        assert burst._bound() is not None and s._bound() is None  # no plain run yet
    queue = s._devices[0][1].device_queue()  # the CPU runtime's
    held = queue.acquire(2, queue.capacity)  # every unit of the CPU: the burst's run waits
    done = threading.Event()
    t = threading.Thread(target=lambda: (burst.run(feeds), done.set()))
    t.start()
    assert not done.wait(0.2)
    queue.release(held)
    t.join(10)
    assert done.is_set()


@pytest.mark.parametrize("backend", backends())
def test_async_runs_on_two_lanes_use_a_sibling_session_and_give_each_runs_outputs(backend, monkeypatch):
    """A device with 2 lanes (forced here: lavapipe and PoCL have one queue, the CPU one
    lane): runs in flight go to the session and to its sibling of lane 1, which submits to
    the device's queue 1 (modulo the queues there are); each future has its own input's
    outputs, the output shapes are the parent's, and closing closes the sibling."""
    from mnnpy.backend import get_runtime

    monkeypatch.setattr(get_runtime(backend), "lanes", 2)
    ref = mnnpy.Interpreter(MODEL).create_session()
    inputs = [X * k for k in (1.0, -1.0, 0.5, 2.0, -3.0, 0.25, 4.0, -0.5)]
    with _session(backend) as s:
        for _ in range(3):
            futures = [s.run_async({"x": x}) for x in inputs]
            for x, f in zip(inputs, futures):
                _close(f.result(timeout=60)["y"], ref.run({"x": x})["y"])
        assert set(s._siblings) == {1} and s._siblings[1] is not s
        sibling = s._siblings[1]
        assert all(b.config.lane == 1 for b in sibling.backends)
        assert sibling._run_count > 0 and s._run_count > 0  # both lanes ran
        assert s.output_shapes == {"y": (2, 4, 8, 8)}
        fence, future = s.run_fenced({"x": X})
        _close(future.result(timeout=60)["y"], ref.run({"x": X})["y"])
        assert fence.signalled
    assert sibling._closed


@pytest.mark.parametrize("backend", gpu_backends())
def test_a_gpu_run_whose_ops_all_run_on_the_gpu_leaves_the_cpus_queue_alone(backend, expected):
    """Every op on the GPU: its runs take turns on the GPU's queue only, so a CPU queue held
    by other runs does not hold them up (it did: two Vulkan sessions took turns on the CPU's
    queue through their fallback backend, 0.82x instead of 1.5x with two runs in flight)."""
    with _session(backend) as s:
        assert "cpu" not in s.partitions()
        cpu = next(rt for _, rt in s._devices if rt.name == "cpu").device_queue()
        held = cpu.acquire(2, cpu.capacity)
        try:
            done = []
            t = threading.Thread(target=lambda: done.append(s.run({"x": X})["y"]))
            t.start()
            t.join(30)
            assert done, "the GPU run waited for the CPU's queue"
            _close(done[0], expected)
        finally:
            cpu.release(held)


def test_plain_runs_take_the_bound_path_and_evicted_plans_free_their_memory():
    """``run`` with no options on feeds like the last plain run's goes through that run's
    ``BoundRun`` (same outputs); the plan keeps it, so a session that forgets the plan (new
    shapes beyond its cache, or ``close``) frees the plan's arena with it."""
    import gc
    import weakref

    from mnnpy.graph_runner import RESIZE_CACHE

    s = mnnpy.Interpreter(_model(("N", 3, 8, 8))).create_session()
    ref = mnnpy.Interpreter(MODEL).create_session()
    want = ref.run({"x": X})["y"]
    _close(s.run({"x": X})["y"], want)
    bound = s._bound()
    assert bound is not None and bound.plan is s.runner.plan
    calls = []
    real = type(bound).run
    type(bound).run = lambda self, feeds: (calls.append(1) if self is bound else None) or real(self, feeds)
    try:
        _close(s.run({"x": X})["y"], want)
        want_neg = ref.run({"x": -X})["y"]
        _close(s.run({"x": -X})["y"], want_neg)
        assert len(calls) == 2
        s.run({"x": X}, measure_timing=True)  # options: the full path
        assert len(calls) == 2
    finally:
        type(bound).run = real
    arena, bound = weakref.ref(s.backends[-1].arena), weakref.ref(bound)
    for n in range(3, RESIZE_CACHE + 4):  # other batch sizes push the first plan out of the cache
        s.run({"x": np.concatenate([X] * n)})
    gc.collect()
    assert bound() is None and arena() is None
    s.close()


def test_unknown_run_options_and_none_feeds_are_input_errors():
    """Found by a newcomer's try: ``burst().run(feeds, timeout=5)`` raised a ``TypeError``
    naming an internal function, and ``None`` for a float input became NaN."""
    s = _session("cpu")
    for call in (lambda: s.run_async({"x": X}, timeout=5), lambda: s.burst().run({"x": X}, timeout=5)):
        with pytest.raises(InputError, match=r"unknown run option\(s\) \['timeout'\]"):
            call()
    with pytest.raises(InputError, match="None is not a value"):
        s.run({"x": None})


# -- priorities -----------------------------------------------------------------------------------


def test_higher_priority_runs_go_first_when_runs_wait_for_a_device():
    """A 1-thread CPU device queue (capacity 1 for these sessions: the queue is asked
    directly); a run holds it while a low- and a high-priority run wait."""
    from mnnpy.device_queue import DeviceQueue, priority_level

    q = DeviceQueue(1)
    order, started = [], threading.Event()
    held = q.acquire(priority_level("medium"))

    def waiter(name, level):
        started.set()
        units = q.acquire(priority_level(level))
        order.append(name)
        q.release(units)

    low = threading.Thread(target=waiter, args=("low", "low"))
    low.start()
    time.sleep(0.05)
    high = threading.Thread(target=waiter, args=("high", "high"))
    high.start()
    time.sleep(0.05)
    q.release(held)
    low.join(10)
    high.join(10)
    assert order == ["high", "low"]


def test_a_deadline_ends_the_wait_for_a_busy_device():
    from mnnpy.device_queue import DeviceQueue

    q = DeviceQueue(1)
    held = q.acquire(1)
    with pytest.raises(DeadlineMissedError, match="waiting for the device"):
        q.acquire(1, deadline=time.monotonic() + 0.05)
    q.release(held)
    q.release(q.acquire(1))


@pytest.mark.parametrize("backend", backends())
def test_sessions_of_each_priority_run_on_every_backend(backend, expected):
    for p in ("low", "medium", "high"):
        with _session(backend, priority=p) as s:
            assert s.priority == p
            _close(s.run({"x": X})["y"], expected)
    with pytest.raises(InputError, match="priority"):
        _session(backend, priority="urgent")


# -- many threads, many sessions, close ------------------------------------------------------------


@pytest.mark.parametrize("backend", backends())
def test_threads_on_one_session_and_on_many_sessions_get_serial_results(backend):
    rng = np.random.default_rng(5)
    feeds = [rng.standard_normal((2, 3, 8, 8)).astype(np.float32) for _ in range(8)]
    ref = mnnpy.Interpreter(MODEL).create_session()
    want = [ref.run({"x": f})["y"] for f in feeds]
    shared = _session(backend)
    own = [_session(backend) for _ in range(8)]
    errors = []

    def worker(i, runs=60):
        try:
            for k in range(runs):
                j = (i + k) % 8
                s = shared if k % 2 else own[i]
                np.testing.assert_allclose(s.run({"x": feeds[j]})["y"], want[j], rtol=1e-4, atol=1e-4)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors[0]


def test_interleaved_sessions_as_in_nnapis_example(expected):
    """Prepare m1 and m2, run r1 on m1, r2 on m2, r3 on m1, r4 on m2, release m1, release m2."""
    m1, m2 = _session("cpu"), _session("cpu", num_threads=1)
    r = [m1.run_async({"x": X}), m2.run_async({"x": X}), m1.run_async({"x": X}), m2.run_async({"x": X})]
    for f in r:
        _close(f.result(60)["y"], expected)
    m1.close()
    _close(m2.run({"x": X})["y"], expected)
    m2.close()


@pytest.mark.parametrize("backend", backends())
def test_close_frees_the_plans_and_refuses_later_runs(backend):
    s = _session(backend)
    s.run({"x": X})
    assert s.runner.cached()
    s.close()
    assert not s.runner.cached()
    with pytest.raises(InputError, match="closed"):
        s.run({"x": X})
    with pytest.raises(InputError, match="closed"):
        s.run_async({"x": X})
    with pytest.raises(InputError, match="closed"):  # it planned again, and kept the plan
        s.resize({"x": X.shape})
    assert not s.runner.cached()
    s.close()  # twice: nothing

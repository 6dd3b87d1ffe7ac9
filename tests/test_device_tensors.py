"""Device-resident outputs (issue 14 item 6): ``outputs_on_device=True`` returns
``DeviceTensor`` s, which equal the host outputs, can be fed to another session on the same
device without a host round trip, go stale at their session's next run, and reach other
backends through the host."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import mnnpy
from mnnpy.cli import main
from mnnpy.converter import convert
from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import InputError, StaleTensorError
from tests.backend_compare import backends, device_backend, gpu_backends, partitioned_model
from tests.oracle import ELEMENTWISE, make_model, rand


def _first(rng):
    """x (1, 3, 8, 8) -> Relu -> Sigmoid -> y: every op on every backend."""
    x = rand(rng, 1, 3, 8, 8)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"]), x


def _second(rng):
    """x (1, 3, 8, 8) -> Mul 2 -> Tanh -> y."""
    x = rand(rng, 1, 3, 8, 8)
    nodes = [helper.make_node("Mul", ["x", "two"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], initializers={"two": np.array(2.0, np.float32)}), x


def _session(model, backend: str, precision: str = "normal"):
    return mnnpy.Interpreter(convert(model)).create_session(backend=[backend, "cpu"], precision=precision)


class _NoHost:
    """Makes every host transfer of ``backends`` (their classes' ``download``,
    ``download_into`` and, for the instances in ``no_upload``, ``upload``) fail while active."""

    def __init__(self, monkeypatch, classes, no_upload):
        self.mp, self.classes, self.no_upload = monkeypatch, classes, no_upload

    def __enter__(self):
        def fail(*a, **k):
            raise AssertionError("a host round trip happened")

        for cls in self.classes:
            self.mp.setattr(cls, "download", fail)
            self.mp.setattr(cls, "download_into", fail)
            real = cls.upload
            self.mp.setattr(cls, "upload", lambda b, src, dst, _real=real: fail() if b in self.no_upload else _real(b, src, dst))
        return self

    def __exit__(self, *exc):
        self.mp.undo()


@pytest.mark.parametrize("backend", backends())
def test_outputs_on_device_equal_the_host_outputs(rng, backend):
    model, x = _first(rng)
    s = _session(model, backend)
    want = s.run({"x": x})["y"]
    out = s.run({"x": x}, outputs_on_device=True)
    y = out["y"]
    assert isinstance(y, DeviceTensor)
    assert (y.name, y.shape, y.dtype, y.device) == ("y", (1, 3, 8, 8), np.float32, backend)
    assert y.valid and "stale" not in repr(y)
    np.testing.assert_array_equal(y.numpy(), want)
    assert s.output_shapes == {"y": (1, 3, 8, 8)}


@pytest.mark.parametrize("backend", backends())
def test_every_execution_mode_takes_outputs_on_device(rng, backend):
    model, x = _first(rng)
    s = _session(model, backend)
    want = s.run({"x": x})["y"]
    y = s.run_async({"x": x}, outputs_on_device=True).result()["y"]
    np.testing.assert_array_equal(y.numpy(), want)
    fence, future = s.run_fenced({"x": x}, outputs_on_device=True, measure_timing=True)
    assert fence.wait(30)
    np.testing.assert_array_equal(future.result()["y"].numpy(), want)
    with s.burst() as burst:
        for _ in range(3):
            y = burst.run({"x": x}, outputs_on_device=True)["y"]
            np.testing.assert_array_equal(y.numpy(), want)


@pytest.mark.parametrize("backend", backends())
def test_a_chain_on_one_device_equals_the_host_chain_without_a_host_round_trip(rng, monkeypatch, backend):
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    want = b.run({"x": a.run({"x": x})["y"]})["y"]
    for _ in range(2):  # the second chained run reuses what the first one set up
        y = a.run({"x": x}, outputs_on_device=True)["y"]
        if backend == "cpu":
            z = b.run({"x": y}, outputs_on_device=True)["y"]
        else:
            with _NoHost(monkeypatch, [type(device_backend(b))], [device_backend(b)]):
                z = b.run({"x": y}, outputs_on_device=True)["y"]
        assert z.device == backend
        np.testing.assert_allclose(z.numpy(), want, **ELEMENTWISE)


@pytest.mark.parametrize("backend", gpu_backends(precision="low"))
@pytest.mark.parametrize("first,second", [("low", "normal"), ("normal", "low"), ("low", "low")])
def test_a_chain_across_storage_precisions_stays_on_the_device(rng, monkeypatch, backend, first, second):
    """fp16 storage on either side: the tensor crosses as float32 (the border twins), cast on
    the device."""
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend, first), _session(m2, backend, second)
    want = b.run({"x": a.run({"x": x})["y"]})["y"]
    y = a.run({"x": x}, outputs_on_device=True)["y"]
    with _NoHost(monkeypatch, [type(device_backend(b))], [device_backend(b)]):
        z = b.run({"x": y}, outputs_on_device=True)["y"]
    np.testing.assert_array_equal(z.numpy(), want)


@pytest.mark.parametrize("backend", gpu_backends())
def test_a_device_tensor_feeds_a_partitioned_session(rng, monkeypatch, backend):
    """Into a GPU, CPU, GPU session: the GPU partition takes it on the device."""
    x = rand(rng, 1, 3, 13, 7)
    m1 = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])], {"x": x}, ["y"])
    a, b = _session(m1, backend), _session(partitioned_model(rng), backend)
    z = rand(rng, 3, 1, 1)
    want = b.run({"x": a.run({"x": x})["y"], "z": z})["y"]
    y = a.run({"x": x}, outputs_on_device=True)["y"]
    got = b.run({"x": y, "z": z})["y"]
    np.testing.assert_allclose(got, want, **ELEMENTWISE)


@pytest.mark.parametrize("backend", backends())
def test_a_device_tensor_goes_stale_at_its_sessions_next_run_and_at_close(rng, backend):
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    y = a.run({"x": x}, outputs_on_device=True)["y"]
    a.run({"x": x})
    assert not y.valid and "stale" in repr(y)
    with pytest.raises(StaleTensorError, match="ran again"):
        y.numpy()
    with pytest.raises(StaleTensorError):
        b.run({"x": y})
    y = a.run({"x": x}, outputs_on_device=True)["y"]
    a.close()
    with pytest.raises(StaleTensorError, match="closed"):
        y.numpy()
    assert issubclass(StaleTensorError, InputError)


@pytest.mark.parametrize("backend", backends())
def test_a_session_fed_its_own_device_output_reads_it_first(rng, backend):
    model, x = _first(rng)
    s = _session(model, backend)
    y = s.run({"x": x}, outputs_on_device=True)["y"]
    want = s.run({"x": y.numpy()})["y"]
    y = s.run({"x": x}, outputs_on_device=True)["y"]
    np.testing.assert_allclose(s.run({"x": y})["y"], want, **ELEMENTWISE)


def _pairs():
    names = ("cpu", "opencl", "vulkan")
    out = []
    for src in names:
        for dst in names:
            if src != dst:
                marks = [m for p in backends(src, dst) for m in p.marks]
                out.append(pytest.param(src, dst, id=f"{src}-to-{dst}", marks=marks))
    return out


@pytest.mark.parametrize("src,dst", _pairs())
def test_a_device_tensor_of_another_backend_goes_through_the_host(rng, src, dst):
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, src), _session(m2, dst)
    want = b.run({"x": a.run({"x": x})["y"]})["y"]
    y = a.run({"x": x}, outputs_on_device=True)["y"]
    np.testing.assert_allclose(b.run({"x": y})["y"], want, **ELEMENTWISE)


@pytest.mark.parametrize("backend", backends())
def test_a_device_tensor_of_the_wrong_shape_or_dtype_is_an_input_error(rng, backend):
    model, x = _first(rng)
    small = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": rand(rng, 1, 3, 4, 4)}, ["y"])
    ints = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)], {"x": rand(rng, 1, 3, 8, 8)}, ["y"])
    s = _session(model, backend)
    wrong_shape = _session(small, backend).run({"x": rand(rng, 1, 3, 4, 4)}, outputs_on_device=True)["y"]
    with pytest.raises(InputError, match="dim 2 is 4, expected 8"):
        s.run({"x": wrong_shape})
    wrong_dtype = _session(ints, backend).run({"x": x}, outputs_on_device=True)["y"]
    with pytest.raises(InputError, match="int32, expected float32"):
        s.run({"x": wrong_dtype})
    with pytest.raises(InputError, match="exclude each other"):
        s.run({"x": x}, outputs={"y": np.empty((1, 3, 8, 8), np.float32)}, outputs_on_device=True)
    with pytest.raises(InputError, match="True or False"):
        s.run({"x": x}, outputs_on_device="yes")


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_vulkan_records_a_fed_partition_once(rng, monkeypatch, backend):
    """The partition fed device to device is recorded at the first chained run, then reused."""
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    gpu = device_backend(b)
    recorded = []
    real = gpu._command_buffers
    monkeypatch.setattr(gpu, "_command_buffers", lambda pool, n: recorded.append(n) or real(pool, n))
    for _ in range(3):
        b.run({"x": a.run({"x": x}, outputs_on_device=True)["y"]})
    assert recorded == [1]


def test_cli_run_outputs_on_device(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "m.mnnpy"
    path.write_bytes(convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()))
    assert main(["run", str(path), "--repeat", "2", "--outputs-on-device"]) == 0
    out = capsys.readouterr().out
    assert "outputs stayed on the device: y on cpu" in out and "output y: float32 (2, 5) first values" in out


@pytest.mark.parametrize("backend", backends())
def test_closing_the_source_frees_its_memory_while_its_tensors_are_held(rng, backend):
    """A device tensor (and a Vulkan partition recorded to copy from it) refers to its
    session's memory weakly: ``close()`` frees it; a new source chains correctly after."""
    import gc
    import weakref

    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    want = b.run({"x": a.run({"x": x})["y"]})["y"]
    y = a.run({"x": x}, outputs_on_device=True)["y"]
    b.run({"x": y})
    memory = weakref.ref(getattr(y.handle, "memory", y.handle))  # Vulkan: the resize's device memory
    a.close()
    gc.collect()
    assert memory() is None and not y.valid
    a2 = _session(m1, backend)
    np.testing.assert_allclose(b.run({"x": a2.run({"x": x}, outputs_on_device=True)["y"]})["y"], want, **ELEMENTWISE)


@pytest.mark.parametrize("backend", backends())
def test_a_fenced_chain_feeds_the_earlier_runs_device_output(rng, monkeypatch, backend):
    """``fence.output(name)`` stands for the earlier run's output: the later run takes it (a
    device tensor) once the fence signals, device to device on one GPU."""
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    want = b.run({"x": a.run({"x": x})["y"]})["y"]
    for _ in range(2):
        with _NoHost(monkeypatch, [type(device_backend(b))] if backend != "cpu" else [], [device_backend(b)]):
            fa, _ = a.run_fenced({"x": x}, outputs_on_device=True)
            fb, future = b.run_fenced({"x": fa.output("y")}, wait_for=[fa], outputs_on_device=True)
            z = future.result(timeout=60)["y"]
        assert fb.signalled and fb.error is None and isinstance(fa.outputs["y"], DeviceTensor)
        np.testing.assert_allclose(z.numpy(), want, **ELEMENTWISE)


def test_a_fenced_output_is_fed_only_to_a_run_waiting_for_its_fence(rng):
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, "cpu"), _session(m2, "cpu")
    fa, _ = a.run_fenced({"x": x})
    with pytest.raises(InputError, match="returns no output 'nope'"):
        fa.output("nope")
    with pytest.raises(InputError, match="wait_for"):
        b.run({"x": fa.output("y")})
    with pytest.raises(InputError, match="wait_for"):
        b.run_fenced({"x": fa.output("y")})
    ints = make_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)], {"x": x}, ["y"])
    fi, _ = _session(ints, "cpu").run_fenced({"x": x})
    with pytest.raises(InputError, match="int32, expected float32"):  # checked when known
        b.run_fenced({"x": fi.output("y")}, wait_for=[fi])[1].result(timeout=60)
    _, future = b.run_fenced({"x": fa.output("y")}, wait_for=[fa])
    np.testing.assert_allclose(future.result(timeout=60)["y"], b.run({"x": a.run({"x": x})["y"]})["y"], **ELEMENTWISE)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_a_fenced_vulkan_chain_is_ordered_by_the_queue_not_by_a_host_wait(rng, monkeypatch, backend):
    """A fenced run whose outputs stay on the device returns after submitting (from the
    caller's thread, its future done); the run fed its output on the same queue is submitted
    before anything waits for the first one's fence; waiting for the first fence, reading its
    output, a resize and a new run of its session each wait for that work first."""
    import mnnpy.backends.vulkan.backend as vb

    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    want_y = a.run({"x": x})["y"]
    want = b.run({"x": want_y})["y"]
    log = []
    real_submit, real_wait = vb.submit_only, vb.wait_for

    def submit(rt, info, fence, lane=0):
        log.append(("submit", id(fence)))
        real_submit(rt, info, fence, lane)

    def wait(rt, fence):
        log.append(("wait", id(fence)))
        real_wait(rt, fence)

    monkeypatch.setattr(vb, "submit_only", submit)
    monkeypatch.setattr(vb, "wait_for", wait)
    fence_a, fence_b = id(device_backend(a).fence), id(device_backend(b).fence)
    for _ in range(2):
        log.clear()
        fa, ra = a.run_fenced({"x": x}, outputs_on_device=True)
        assert ra.done() and fa.signalled and fa.in_flight == [device_backend(a)]
        fb, rb = b.run_fenced({"x": fa.output("y")}, wait_for=[fa], outputs_on_device=True)
        assert rb.done()  # both submitted from this thread
        assert log == [("submit", fence_a), ("submit", fence_b)]
        np.testing.assert_allclose(rb.result()["y"].numpy(), want, **ELEMENTWISE)
        assert ("wait", fence_b) in log and ("wait", fence_a) not in log  # reading b's output waited for b only
        assert fa.wait(10) and ("wait", fence_a) in log and not device_backend(a).in_flight()
    fa, _ = a.run_fenced({"x": x}, outputs_on_device=True)
    np.testing.assert_array_equal(fa.outputs["y"].numpy(), want_y)  # a read waits for the device
    a.run_fenced({"x": x}, outputs_on_device=True)
    np.testing.assert_array_equal(a.run({"x": x})["y"], want_y)  # the next run waits first
    a.run_fenced({"x": x}, outputs_on_device=True)
    a.resize({"x": (1, 3, 8, 8)})
    a.run_fenced({"x": x}, outputs_on_device=True)
    a.close()  # waits before freeing
    b.close()


@pytest.mark.parametrize("backend", backends())
def test_fenced_runs_that_cannot_defer_go_to_the_run_thread(rng, backend):
    """Timing, a deadline, host outputs or a backend that always waits: the fenced run is not
    run in the caller's thread; its outputs are the same."""
    model, x = _first(rng)
    s = _session(model, backend)
    want = s.run({"x": x})["y"]
    for options in ({}, {"measure_timing": True}, {"timeout_ms": 60_000}, {"outputs_on_device": True}):
        fence, future = s.run_fenced({"x": x}, **options)
        y = future.result(timeout=60)["y"]
        np.testing.assert_array_equal(y.numpy() if isinstance(y, DeviceTensor) else y, want)
        assert fence.wait(10) and not any(b.in_flight() for b in s.backends)


@pytest.mark.parametrize("backend", gpu_backends())
def test_a_device_tensor_fed_to_a_session_of_another_lane_is_correct(rng, monkeypatch, backend):
    """Two lanes (forced: one queue here): a device tensor of a lane-0 session fed to a
    lane-1 session (an asynchronous run's sibling) gives the host chain's result (Vulkan takes
    it through the host: only one queue's order keeps the copy after the source's work)."""
    from mnnpy.backend import get_runtime

    monkeypatch.setattr(get_runtime(backend), "lanes", 2)
    (m1, x), (m2, _) = _first(rng), _second(rng)
    a = _session(m1, backend)
    b = mnnpy.Interpreter(convert(m2)).create_session(backend=[backend, "cpu"])
    want = b.run({"x": a.run({"x": x})["y"]})["y"]
    b1 = b._spawn(1)
    assert all(be.config.lane == 1 for be in b1.backends)
    for _ in range(2):
        y = a.run({"x": x}, outputs_on_device=True)["y"]
        np.testing.assert_allclose(b1.run({"x": y})["y"], want, **ELEMENTWISE)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_a_repeated_fenced_chain_is_bound_after_its_first_run(rng, monkeypatch, backend):
    """After a fenced run with its outputs on the device went the full path in the caller's
    thread, the next ones with feeds like its own go through the plan's bound run
    (``mnnpy.fenced_runs``): no new fenced job, the same outputs as the host chain, also for a
    host array where a device tensor was; a stale device tensor still raises."""
    import mnnpy.fenced_runs as fr

    (m1, x), (m2, _) = _first(rng), _second(rng)
    a, b = _session(m1, backend), _session(m2, backend)
    xs = [x * (k + 1) - k for k in range(4)]
    wants = [b.run({"x": a.run({"x": xk})["y"]})["y"] for xk in xs]
    jobs, real = [], fr.fenced_job
    monkeypatch.setattr(fr, "fenced_job", lambda s, *rest: jobs.append(s) or real(s, *rest))
    for xk, want in zip(xs, wants):
        fa, ra = a.run_fenced({"x": xk}, outputs_on_device=True)
        fb, rb = b.run_fenced({"x": fa.output("y")}, wait_for=[fa], outputs_on_device=True)
        assert ra.done() and rb.done() and fa.signalled and fb.signalled
        z = rb.result()["y"]
        assert isinstance(z, DeviceTensor) and z.session is b and fb.outputs["y"] is z
        np.testing.assert_allclose(z.numpy(), want, **ELEMENTWISE)
    assert jobs == [a, b]  # the first chain only
    y = a.run({"x": xs[0]})["y"]
    _, rb = b.run_fenced({"x": y}, outputs_on_device=True)  # a host array: uploaded
    np.testing.assert_allclose(rb.result()["y"].numpy(), wants[0], **ELEMENTWISE)
    assert jobs == [a, b]
    fa, _ = a.run_fenced({"x": xs[1]}, outputs_on_device=True)
    stale = fa.outputs["y"]
    a.run({"x": xs[1]})  # its next run makes the device tensor stale
    _, rb = b.run_fenced({"x": stale}, outputs_on_device=True)
    with pytest.raises(StaleTensorError):
        rb.result(timeout=60)
    a.close()
    b.close()

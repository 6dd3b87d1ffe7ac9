"""``Backend.device_time_us``: the device time of a partition's last ``execute_partition``, from
the device's own clock (Vulkan: two timestamp queries around its command buffer; OpenCL:
profiling events of its first and last kernel); ``None`` before a run, after a failed one,
where not measured and on the CPU; never above the host wall time of the call that produced
it (NNAPI's "on-device never above in-driver").

The GPU cases are skipped, with the reason, where the driver is missing (CI: PoCL and Mesa's
lavapipe).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import device_backend, gpu_backends, partitioned_model, sessions
from tests.oracle import ELEMENTWISE, make_model, rand

UNCLAMPED = 2**62  # a wall time (ns) no run reaches: device_time_us then gives the device's own value


def _feeds(rng) -> dict:
    return {"x": rand(rng, 1, 3, 13, 7), "z": rand(rng, 3, 1, 1)}


def _timed(session, monkeypatch) -> dict:
    """Wrap each backend's ``execute_partition`` of ``session``: returns a dict that each call
    fills with ``id(partition) -> host wall time of the call, µs``."""
    walls: dict[int, float] = {}
    for backend in session.backends:
        real = backend.execute_partition

        def timed(partition, _real=real):
            t0 = time.perf_counter_ns()
            _real(partition)
            walls[id(partition)] = (time.perf_counter_ns() - t0) / 1e3

        monkeypatch.setattr(backend, "execute_partition", timed)
    return walls


def _unclamped_us(step) -> float | None:
    """``step``'s device time as the device's clock gives it, before the clamp to the wall time."""
    holder = getattr(step.recording, "clock", step.recording)  # Vulkan: PartitionClock; OpenCL: KernelSpan
    wall, holder.wall_ns = holder.wall_ns, UNCLAMPED
    try:
        return step.backend.device_time_us(step)
    finally:
        holder.wall_ns = wall


@pytest.mark.parametrize("backend", gpu_backends())
def test_every_gpu_partition_has_its_device_time(rng, monkeypatch, backend):
    """GPU, CPU, GPU partitions: before a run every partition gives ``None``; after each run each
    GPU partition gives a float > 0 that is at most the host wall time of its ``execute_partition``
    (also before the clamp), and the CPU partition ``None``."""
    dev, cpu = sessions(partitioned_model(rng), backend=backend)
    feeds = _feeds(rng)
    dev.resize({k: v.shape for k, v in feeds.items()})
    steps = dev.runner.plan.steps
    assert [s.backend.name for s in steps] == [backend, "cpu", backend]
    assert [s.backend.device_time_us(s) for s in steps] == [None, None, None]
    walls = _timed(dev, monkeypatch)
    want = cpu.run(feeds)["y"]
    for _ in range(3):
        np.testing.assert_allclose(dev.run(feeds, measure_timing=True)["y"], want, **ELEMENTWISE)
        for step in steps:
            us = step.backend.device_time_us(step)
            if step.backend.name == "cpu":
                assert us is None
                continue
            raw = _unclamped_us(step)
            assert isinstance(us, float) and 0 < us <= walls[id(step)], (us, walls[id(step)])
            assert raw is not None and raw <= walls[id(step)], (raw, walls[id(step)])


def test_cpu_gives_none(rng):
    """The CPU backend measures nothing itself: the session layer uses host wall time there."""
    s = mnnpy.Interpreter(convert(partitioned_model(rng))).create_session(backend="cpu")
    s.run(_feeds(rng), measure_timing=True)
    assert [step.backend.device_time_us(step) for step in s.runner.plan.steps] == [None]


@pytest.mark.parametrize("backend", gpu_backends())
def test_a_partition_of_another_backend_gives_none(rng, backend):
    """A backend asked about a partition it does not run answers ``None``."""
    dev, _ = sessions(partitioned_model(rng), backend=backend)
    dev.run(_feeds(rng), measure_timing=True)
    gpu_step, cpu_step, _ = dev.runner.plan.steps
    assert gpu_step.backend.device_time_us(cpu_step) is None
    assert cpu_step.backend.device_time_us(gpu_step) is None


@pytest.mark.parametrize("backend", gpu_backends())
def test_a_failed_run_leaves_none(rng, monkeypatch, backend):
    """A run that raises inside ``execute_partition`` leaves no stale device time behind."""
    dev, _ = sessions(partitioned_model(rng), backend=backend)
    feeds = _feeds(rng)
    dev.run(feeds, measure_timing=True)
    step = dev.runner.plan.steps[0]
    assert step.backend.device_time_us(step) > 0

    def broken(*a, **k):
        raise RuntimeError("device lost")

    if backend == "vulkan":
        monkeypatch.setattr(step.backend, "submit", broken)
    else:
        from mnnpy.backend import Backend

        monkeypatch.setattr(Backend, "execute_partition", broken)  # the enqueueing part of OpenCL's
    with pytest.raises(RuntimeError, match="device lost"):
        dev.run(feeds, measure_timing=True)
    assert step.backend.device_time_us(step) is None


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_vulkan_without_timestamps_gives_none(rng, monkeypatch, backend):
    """A queue without timestamps (``timestampValidBits`` 0: ``timestamp_period`` 0) records
    no query pool and gives ``None``."""
    from mnnpy.backend import get_runtime

    monkeypatch.setattr(get_runtime("vulkan"), "timestamp_period", 0.0)
    dev, _ = sessions(partitioned_model(rng), backend=backend)
    dev.run(_feeds(rng), measure_timing=True)
    step = dev.runner.plan.steps[0]
    assert step.recording.clock is None and step.backend.device_time_us(step) is None


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_vulkan_profile_and_device_time_together(rng, monkeypatch, backend):
    """With ``MNNPY_VULKAN_PROFILE=1`` the per-dispatch profile still fills, and its intervals
    (after the uploads to after the last dispatch) lie inside the partition's device time."""
    from mnnpy.backends.vulkan import profile

    x = rand(rng, 1, 3, 16, 16)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    monkeypatch.setenv(profile.PROFILE_ENV, "1")
    s = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"]))).create_session(backend="vulkan")
    b = device_backend(s)
    if not b.profiling:
        pytest.skip("this device's compute queue has no timestamps")
    s.run({"x": x}, measure_timing=True)
    b.profile.clear()
    s.run({"x": x}, measure_timing=True)
    (step,) = s.runner.plan.steps
    assert set(b.profile) == {"Relu", "Sigmoid"}, b.profile
    assert sum(b.profile.values()) * 1e3 <= _unclamped_us(step) + 1e-6, (b.profile, _unclamped_us(step))


def test_vulkan_timestamps_wrap_at_their_valid_bits():
    """Ticks count modulo ``2**timestampValidBits``: a counter that wrapped between the two
    timestamps still gives the interval; one tick is ``timestampPeriod`` ns."""
    from mnnpy.backends.vulkan.timestamps import Timestamps

    stamps = Timestamps.__new__(Timestamps)  # no device: only the arithmetic
    stamps.mask, stamps.period_ns = 2**36 - 1, 2.5
    stamps.ticks = lambda: [2**36 - 10, 6]
    assert stamps.intervals_ns() == [16 * 2.5]
    stamps.ticks = lambda: None  # results not available
    assert stamps.intervals_ns() == []


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_opencl_events_without_profiling_give_none(backend):
    """Events of a queue without ``CL_QUEUE_PROFILING_ENABLE`` have no profiling information:
    ``None``, not an error."""
    from types import SimpleNamespace

    from mnnpy.backend import get_runtime
    from mnnpy.backends.opencl.device_time import KernelSpan

    rt = get_runtime("opencl")
    plain = rt.cl.CommandQueue(rt.context, rt.device)
    event = rt.cl.enqueue_marker(plain)
    plain.finish()
    span = KernelSpan([SimpleNamespace(event=event)])
    span.wall_ns = 10**9
    assert span.device_time_us(rt.cl) is None


@pytest.mark.parametrize("backend", gpu_backends())
def test_timing_off_measures_nothing(rng, backend):
    """``timing`` off (runs without ``measure_timing``): the outputs are the same, every
    partition gives ``None``, and a timed run measures again."""
    dev, cpu = sessions(partitioned_model(rng), backend=backend)
    feeds = _feeds(rng)
    want = cpu.run(feeds)["y"]
    dev.run(feeds, measure_timing=True)
    gpu = device_backend(dev)
    np.testing.assert_allclose(dev.run(feeds)["y"], want, **ELEMENTWISE)
    assert gpu.timing is False
    steps = dev.runner.plan.steps
    assert [s.backend.device_time_us(s) for s in steps] == [None, None, None]
    dev.run(feeds, measure_timing=True)
    assert all(s.backend.device_time_us(s) > 0 for s in steps if s.backend is gpu)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_vulkan_timed_runs_submit_the_clock_around_the_partition(rng, monkeypatch, backend):
    """A timed run submits the partition's command buffer between its clock's two (one batch);
    an untimed one submits it alone, as a session without timestamps does."""
    from mnnpy.backends.vulkan import backend as vulkan_backend

    dev, _ = sessions(partitioned_model(rng), backend=backend)
    feeds = _feeds(rng)
    dev.run(feeds)
    batches = []
    real = vulkan_backend.submit_and_wait

    def counted(rt, info, fence, lane=0):
        batches.append(info)
        real(rt, info, fence, lane)

    monkeypatch.setattr(vulkan_backend, "submit_and_wait", counted)
    dev.run(feeds, measure_timing=True)
    dev.run(feeds)
    parts = [s.recording for s in dev.runner.plan.steps if s.backend is device_backend(dev)]
    commands = [[info.pCommandBuffers[k] for k in range(info.commandBufferCount)] for info in batches]
    assert commands == [[p.clock.begin, p.command, p.clock.end] for p in parts] + [[p.command] for p in parts]

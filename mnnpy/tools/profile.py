"""What a benchmark measures besides latency: per-op time, FLOPs, peak RSS, arena memory, and
the latency statistics themselves (shared by ``mnnpy bench``, ``bench/bench.py`` and
``bench/bench_gpu.py``).

- ``latency_stats(times_ms)``: TFLite benchmark_model's statistics (avg, std, min, max)
  and its percentiles p50/p90/p99, all in ms.
- ``op_profile(session, feeds, runs)``: each Execution's ``on_execute`` timed (wall ms),
  followed by a finish of its backend's queue where it has one (OpenCL: serialises the
  device, so the ops' sum exceeds a plain run); ``vulkan_op_profile`` / ``opencl_op_profile``:
  device ms per op from the Vulkan backend's timestamp queries (``backends/vulkan/profile.py``)
  and from OpenCL's profiling events per kernel (``backends/opencl/profile.py``).
- ``plan_mflops(session)``: MFLOPs of one run (the op schemas' rules, ``Session.op_mflops``).
- ``peak_rss_mib()``: ``VmHWM`` of this process, MiB; ``arena_mib(session)``: the bytes of
  the session's activation arenas per backend, MiB; ``device_mib(session)``: all device memory
  per GPU backend (arena, weights and constants, scratch, staging), MiB.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

PERCENTILES = (50, 90, 99)


def latency_stats(times_ms: list[float]) -> dict[str, float]:
    """``{"avg", "std", "min", "max", "p50", "p90", "p99"}`` of latencies in ms (TFLite's
    benchmark_model; std is the population standard deviation, percentiles interpolated
    linearly). Raises ``ValueError`` for no times."""
    if not times_ms:
        raise ValueError("no latencies to summarise")
    a = np.asarray(times_ms, np.float64)
    out = {"avg": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max())}
    out.update((f"p{q}", float(np.percentile(a, q))) for q in PERCENTILES)
    return out


def plan_mflops(session) -> float:
    """MFLOPs of one run of ``session`` for the shapes of its last resize or run (the schemas'
    FLOPs rules, ``Session.op_mflops``; a multiply-add counts two)."""
    return sum(v for _, _, v in session.op_mflops())


def peak_rss_mib() -> float:
    """This process's peak resident set in MiB: ``VmHWM`` of ``/proc/self/status`` (reset at
    exec, unlike ``ru_maxrss``, which keeps the forking parent's peak), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def arena_mib(session) -> dict[str, float]:
    """backend name -> MiB of the activation arenas of the session's current plans (weights
    and constants not counted)."""
    out: dict[str, float] = defaultdict(float)
    for plan in session.runner.segments or [session.runner.plan]:
        if plan is None:
            continue
        for backend, memory in zip(plan.backends, plan.memory):
            out[backend.name] += memory.arena_bytes / 2**20
    return dict(out)


def device_mib(session) -> dict[str, float]:
    """GPU backend name -> MiB of device memory the session's current plans hold on it: the
    activation arena, constants and uploaded (re-laid) weights, scratch and staging buffers,
    as charged to the session's memory limit (``mnnpy.limits.PlanCharge.by_backend``, kept as
    ``Plan.device_bytes``). Not counted: the driver's own memory (programs, pipelines,
    command buffers) and the CPU backend (its arena is in ``arena_mib``)."""
    out: dict[str, float] = defaultdict(float)
    for plan in session.runner.segments or [session.runner.plan]:
        for name, nbytes in getattr(plan, "device_bytes", {}).items():
            if name != "cpu":
                out[name] += nbytes / 2**20
    return dict(out)


def op_profile(session, feeds: dict, runs: int, run=None) -> tuple[list[tuple[str, str, float]], float]:
    """``([(op name, op type, ms per run)] in op order, whole run's mean ms)`` over ``runs``
    runs of ``run(feeds)`` (default ``session.run``). Each Execution of the current plans has
    its ``on_execute`` wrapped in a timer (plus a queue finish on a backend with a queue) for
    the duration; control-flow bodies count inside their op; the run minus the ops is the
    session's own cost (checks, copies, Python)."""
    run = run or session.run
    total: dict[int, float] = defaultdict(float)
    wrapped = []
    for plan in session.runner.segments or [session.runner.plan]:
        for i, exe in plan.executions.items():
            queue = getattr(getattr(exe, "backend", None), "queue", None)

            def timed(ins, outs, _orig=exe.on_execute, _i=i, _queue=queue):
                t0 = time.perf_counter()
                _orig(ins, outs)
                if _queue is not None:
                    _queue.finish()
                total[_i] += time.perf_counter() - t0

            exe.on_execute = timed
            wrapped.append(exe)
    whole = []
    try:
        for _ in range(runs):
            t0 = time.perf_counter()
            run(feeds)
            whole.append((time.perf_counter() - t0) * 1e3)
    finally:
        for exe in wrapped:
            del exe.on_execute  # back to the class's method
    ops = session.graph.ops
    rows = [(ops[i].name, ops[i].type, total[i] * 1e3 / runs) for i in sorted(total)]
    return rows, statistics.fmean(whole)


def by_type(rows: list[tuple[str, str, float]]) -> list[tuple[str, int, float]]:
    """``op_profile`` rows summed per op type: ``[(type, ops, ms per run)]``, slowest first."""
    ms: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for _, kind, t in rows:
        ms[kind] += t
        count[kind] += 1
    return sorted(((k, count[k], ms[k]) for k in ms), key=lambda t: -t[2])


def device_profile(interp, backend: str, precision: str, feeds: dict, runs: int = 10, warmup: int = 3) -> dict[str, float]:
    """Per op type: device ms per run (``device_op_profile`` summed by type, slowest first)."""
    return {kind: ms for kind, _, ms in by_type(device_op_profile(interp, backend, precision, feeds, runs, warmup))}


def vulkan_op_profile(interp, precision: str, feeds: dict, runs: int = 10, warmup: int = 3) -> list[tuple[str, str, float]]:
    """``[(op name, op type, GPU ms per run)]`` in dispatch order from the Vulkan backend's
    timestamp queries (``MNNPY_VULKAN_PROFILE``, ``backends/vulkan/profile.py``; an op of
    several dispatches sums them); ``[]`` where the device has no timestamps."""
    return device_op_profile(interp, "vulkan", precision, feeds, runs, warmup)


def opencl_op_profile(interp, precision: str, feeds: dict, runs: int = 10, warmup: int = 3) -> list[tuple[str, str, float]]:
    """``[(op name, op type, kernel ms per run)]`` in op order from OpenCL profiling events,
    end minus start of each kernel (``MNNPY_OPENCL_PROFILE``, ``backends/opencl/profile.py``;
    an op of several kernels sums them); ``[]`` where the device has no profiling queue."""
    return device_op_profile(interp, "opencl", precision, feeds, runs, warmup)


def device_op_profile(interp, backend: str, precision: str, feeds: dict, runs: int, warmup: int) -> list[tuple[str, str, float]]:
    """``[(op name, op type, device ms per run)]`` from GPU backend ``backend``'s own profile
    (``profile_ops``) over ``runs`` runs after ``warmup``, of a separate session created with
    ``$MNNPY_<BACKEND>_PROFILE=1``; an op the backend did not run is absent; ``[]`` where
    the backend could not turn profiling on."""
    key = f"MNNPY_{backend.upper()}_PROFILE"
    old = os.environ.get(key)
    os.environ[key] = "1"
    try:
        s = interp.create_session(backend=backend, precision=precision)
    finally:
        if old is None:
            del os.environ[key]
        else:
            os.environ[key] = old
    try:
        for _ in range(warmup):
            s.run(feeds)
        dev = s.backends[0]
        if not dev.profiling:
            return []
        dev.profile.clear()
        dev.profile_ops.clear()
        for _ in range(runs):
            s.run(feeds)
        return [(name, kind, ms / runs) for (name, kind), ms in dev.profile_ops.items()]
    finally:
        s.close()

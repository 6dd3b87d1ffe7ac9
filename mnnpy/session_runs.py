"""The run path of a Session, shared by its executions (NNAPI's: ``run``, ``run_async``,
``run_fenced``, bursts): device turns, the session lock, deadlines, timing, the caller's
output arrays; and the job of a fenced run.

Order of waiting: the exit gate (``mnnpy.exit_gate``), then each device's queue in name
order by the session's priority (``mnnpy.device_queue``), then the session's lock. Every
run waits for devices the same way, so two runs never hold one device each while waiting
for the other's.
"""

from __future__ import annotations

import math
import numbers
import time
from concurrent.futures import Future
from functools import partial
from typing import Any

import numpy as np

from mnnpy.deadline import check, remaining
from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import DependencyFailedError, InputError, ShapeError
from mnnpy.exit_gate import GATE
from mnnpy.fence import Fence, FencedOutput
from mnnpy.graph_runner import MAX_LOOP_TIMEOUT_S, RunContext, shape_of
from mnnpy.io_desc import on_host_where_needed
from mnnpy.log import get_logger
from mnnpy.run_request import RunRequest
from mnnpy.timing import RunOutputs, Timing, TimingMeter

_log = get_logger("session")


def execute(session, arrays: dict[int, Any], request: RunRequest, key: tuple | None = None, parent=None) -> RunOutputs:
    """One execution of ``session`` on checked ``arrays`` (input tensor -> array) with
    ``request``; ``key``: the plan key of ``arrays`` where the caller (a burst) has it;
    ``parent``: the session whose run this is when ``session`` is its sibling of another lane
    (``lane_context``; its output shapes are set too). Raises what ``Session.run`` documents."""
    if parent is not None and parent is not session:
        if parent._closed:
            raise InputError("the session is closed")
        out = execute(session, arrays, request, key)
        parent._output_shapes = session._output_shapes
        return out
    if session._closed:
        raise InputError("the session is closed")
    check(request.deadline, "before the run started")
    context = RunContext(request.loop_timeout, run_deadline=request.deadline)
    if request.measure_timing:
        context.meter = TimingMeter()
    into = (lambda plan, t: request.into(session.graph, plan, t)) if request.outputs else None
    GATE.enter()
    held = []
    try:
        for units, runtime in run_devices(session, session.runner.plan):
            queue = runtime.device_queue()
            held.append((queue, queue.acquire(session.priority_level, units, request.deadline)))
        with session._lock:
            return _locked(session, arrays, request, key, context, into)
    finally:
        for queue, units in reversed(held):
            queue.release(units)
        GATE.leave()


def _locked(session, arrays, request: RunRequest, key, context: RunContext, into) -> RunOutputs:
    if session._closed:
        raise InputError("the session is closed")
    runner, graph = session.runner, session.graph
    key = runner.key(arrays) if key is None else key
    if runner.plan is None or runner.plan.key != key:
        session._check_shapes({graph.tensors[t].name: a.shape for t, a in arrays.items() if not isinstance(a, list)})
        settle(session, locked=True)  # planning may free the memory of work still in flight
    session._run_count += 1  # device tensors of earlier runs go stale now (mnnpy.device_tensor)
    keep = partial(device_output, session, session._run_count) if request.outputs_on_device else None
    deadline, timing = request.deadline, request.measure_timing
    defer = request.outputs_on_device and not timing and deadline is None  # nothing read on the host at its end
    for b in session.backends:
        if b.timing is not timing:
            b.timing = timing  # GPU device time costs a little per partition: only when asked for
        if b.defer_wait is not defer:
            b.defer_wait = defer
        if deadline is not None:
            b.run_deadline = deadline
    t0 = time.perf_counter()
    try:
        results = runner.run(arrays, request.wanted, context, key, into, keep)
    except MemoryError as e:
        raise out_of_memory({graph.tensors[t].name: shape_of(a) for t, a in arrays.items()}, e) from None
    finally:
        if deadline is not None:
            for b in session.backends:
                b.run_deadline = None
    names = graph.tensors
    session._output_shapes = {names[t].name: shape_of(results[t]) for t in request.wanted}
    out = RunOutputs((names[t].name, results[t]) for t in request.wanted)
    if context.meter is not None:
        context.meter.span(time.perf_counter() - t0)
        out.timing = context.meter.timing()
    return out


def out_of_memory(shapes: dict, error: MemoryError) -> ShapeError:
    """The ``ShapeError`` of a run (input name -> shape ``shapes``) that raised ``MemoryError``
    (a kernel's temporaries beyond what the machine has)."""
    return ShapeError(f"input shapes {shapes}: the run ran out of memory: {error or 'MemoryError'}")


def device_output(session, run: int, plan, t: int, arrays: dict[int, Any]) -> Any:
    """Output ``t`` of run number ``run`` as a ``DeviceTensor`` where ``plan`` left it (a
    sequence output: its host list)."""
    backend, value = plan.resident(t, arrays)
    if isinstance(value, list):
        return value
    name = session.graph.tensors[t].name
    if backend is None:
        value = np.asarray(value)
        return DeviceTensor(name, value.shape, value.dtype, None, None, session, run, value)
    info = plan.sizes.tensor(t)
    return DeviceTensor(name, info.shape, info.dtype, backend, value, session, run)


def lane_context(session, lane: int):
    """What runs ``session``'s asynchronous jobs on ``lane`` (``mnnpy.run_queue``): the session
    itself on lane 0, else its sibling of that lane (``session._spawn(lane)``: the same model
    and options on the device's queue ``lane``), made once; the session itself where it has
    no ``_spawn`` or making the sibling fails (logged)."""
    if lane == 0 or session._spawn is None:
        return session
    if lane not in session._siblings:
        try:
            session._siblings[lane] = session._spawn(lane)
        except Exception as e:  # noqa: BLE001 - the lane runs on the session itself
            _log.warning("lane %d: no sibling session (%s: %s); its runs take turns with lane 0", lane, type(e).__name__, e)
            session._siblings[lane] = session
        if session._closed:  # closed while the sibling was made: close it too
            session._siblings[lane].close()
    return session._siblings[lane]


def fenced_job(session, arrays: dict[int, Any], request: RunRequest, waits: list[Fence]):
    """``(fence, job)`` of ``Session.run_fenced``: ``job(context)`` (``session`` or its sibling
    of a lane, ``lane_context``) waits for every fence in
    ``waits`` (until ``request.deadline``), puts in the outputs of fenced runs fed
    (``Fence.output``), runs, signals ``fence`` (with the error of a failed run, else
    with the outputs in ``fence.outputs``) and sets its timings (``mnnpy.fence``)."""
    g = session.graph
    fence, launched = Fence(f"{g.name or 'session'} run", [g.tensors[t].name for t in request.wanted]), time.perf_counter()

    def job(context=None) -> RunOutputs:
        context = context or session
        try:
            for f in waits:
                if not f.wait_queued(remaining(request.deadline)) or not (
                    device_ordered(f, context) or f.wait(remaining(request.deadline))
                ):
                    check(request.deadline, f"waiting for {f!r}")
                if f.error is not None:
                    raise DependencyFailedError(f"{f!r} signalled a failed run: {type(f.error).__name__}: {f.error}")
            fenced = time.perf_counter()
            desc = session._input_desc
            ins = {t: desc[t].array(v.resolve()) if isinstance(v, FencedOutput) else v for t, v in arrays.items()}
            result = execute(context, on_host_where_needed(ins, context, session.runner.value_inputs), request, parent=session)
        except BaseException as e:
            fence.signal(e)
            raise
        completed(fence, context, result)
        if result.timing is not None:
            done, device = time.perf_counter(), result.timing.on_device_us
            fence.timing_launched = Timing(device, (done - launched) * 1e6)
            fence.timing_fenced = Timing(device, (done - fenced) * 1e6)
        fence.signal()
        return result

    return fence, job


def completed(fence: Fence, session, result: RunOutputs) -> None:
    """Record on ``fence`` the outputs of ``session``'s run and the device work it left in
    flight (``Backend.defer_wait``), which ``fence.wait()`` then waits for (``settle``); the
    caller signals it."""
    fence.outputs = result
    fence.in_flight = [b for b in session.backends if b.in_flight()]
    if fence.in_flight:
        fence._complete = partial(settle, session)


def run_devices(session, plan) -> list[tuple[int, Any]]:
    """``(units, runtime)`` of the devices a run of ``plan`` takes turns on (``device_units``):
    those its partitions run on (a GPU session whose ops all run on the GPU leaves the CPU's
    queue to others); every device of the session where no plan is made yet or the run may
    go beyond ``plan`` (a later segment, a host step)."""
    if plan is None or plan.host is not None or plan.sizes.barrier is not None:
        return session._devices
    if plan.devices is None:
        plan.devices = device_units(list({id(step.backend): step.backend for step in plan.steps}.values()))
    return plan.devices


def settle(session, locked: bool = False) -> None:
    """Wait for device work of ``session``'s last run left in flight (``Backend.finish``),
    under its lock unless the caller holds it (``locked``)."""
    if not locked:
        with session._lock:
            return settle(session, True)
    for b in session.backends:
        b.finish()


def device_ordered(fence: Fence, session, queues=None) -> bool:
    """Whether the work that ``fence``'s run left in flight is ordered before anything
    ``session`` submits next by a device queue alone: each such backend shares its Runtime
    and lane (queue) with one of ``session``'s (``mnnpy.fence``; ``queues``: their
    ``queue_key`` s where the caller has them). Then ``session``'s run need not wait for it
    on the host."""
    if queues is None:
        queues = {b.queue_key() for b in session.backends}
    pending = fence.in_flight
    return bool(pending) and all(p.queue_key() in queues for p in pending)


def inline_fenced(session, request: RunRequest, waits: list[Fence], job) -> Future | None:
    """Run a fenced ``job`` in the calling thread when that only submits work: its outputs
    stay on the device (no timing, no deadline), its plan runs on backends that defer their
    wait (``Backend.defers``), every fence it waits for has signalled and no other run of the
    session is queued. Returns its finished Future, else ``None`` (the session's run thread
    takes the job): no thread hand-over before a GPU chain's first submission."""
    plan = session.runner.plan
    if not request.outputs_on_device or request.measure_timing or request.deadline is not None:
        return None
    if plan is None or plan.host is not None or plan.sizes.barrier is not None or not plan.steps:
        return None
    if not all(step.backend.defers for step in plan.steps) or not all(f.signalled for f in waits) or not session._queue.quiet():
        return None
    future: Future = Future()
    future.set_running_or_notify_cancel()
    try:
        future.set_result(job(session))
    except BaseException as e:  # noqa: BLE001 - delivered by future.result(), as from the run thread
        future.set_exception(e)
    return future


def device_units(backends) -> list[tuple[int, Any]]:
    """``(units, runtime)`` per device of ``backends`` in name order: what a run takes of each
    device's queue (the CPU backend's threads; 1 on a GPU)."""
    runtimes = {id(b.runtime): (b.runtime, b) for b in backends}
    return [(getattr(b, "num_threads", 1) or 1, rt) for rt, b in sorted(runtimes.values(), key=lambda rb: rb[0].name)]


def checked_timeout(seconds: Any) -> float:
    """``loop_timeout`` as a float in (0, ``MAX_LOOP_TIMEOUT_S``]; else ``InputError``."""
    if isinstance(seconds, (bool, np.bool_)) or not isinstance(seconds, numbers.Real) or not math.isfinite(seconds):
        raise InputError(f"loop_timeout must be a number of seconds, got {seconds!r}")
    if not 0 < seconds <= MAX_LOOP_TIMEOUT_S:
        raise InputError(f"loop_timeout must be in (0, {MAX_LOOP_TIMEOUT_S:g}] s (NNAPI's maximum), got {seconds}")
    return float(seconds)

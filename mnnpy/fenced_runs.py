"""Fenced runs (NNAPI's ``executeFenced``) of a Session: ``Session.run_fenced``'s path.

The full path checks the feeds and options, makes the run's job (``fenced_job``: wait for
the fences, resolve ``Fence.output`` feeds, run, signal) and runs it in the caller's thread
where that only submits device work (``inline_fenced``), else on the session's run thread.

A chain's fenced runs repeat: ``fa = A.run_fenced(x, outputs_on_device=True)``, then
``B.run_fenced({"x": fa.output("y")}, wait_for=[fa], outputs_on_device=True)``. After a
fenced run with only ``outputs_on_device=True`` went the full path in the caller's thread,
its plan is bound for feeds like its own (``mnnpy.burst.BoundRun``, ``on_device``); the
next such run whose fences have signalled (their device work, if any, ordered before this
run's by the device queue: ``device_ordered``) and whose session has no queued run goes
through it: the feeds' names, shapes and dtypes compared as one list, then the copies in,
the partitions and the device-resident outputs, in the caller's thread. On the H200's
Vulkan this halves the host time of a fenced submission (``bench/bench_device_chain.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np

from mnnpy.burst import BoundRun
from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import InputError
from mnnpy.fence import Fence, FencedOutput
from mnnpy.graph_runner import LOOP_TIMEOUT_S
from mnnpy.run_request import wanted_outputs
from mnnpy.session_runs import completed, device_ordered, fenced_job, inline_fenced

DEVICE_ONLY = {"outputs_on_device": True}  # the options of a run that may be bound


def run_fenced(session, feeds: Mapping[str, Any], wait_for, output_names, loop_timeout: float, options: dict):
    """``Session.run_fenced`` (its doc): ``(fence, future)`` by the bound path where it applies
    (module doc), else by the full one. Raises ``InputError`` for a ``wait_for`` that is not a list of fences and
    what the checks of feeds and options raise."""
    if not isinstance(wait_for, (list, tuple)) or not all(isinstance(f, Fence) for f in wait_for):
        raise InputError("run_fenced: wait_for must be a list of Fence objects (from run_fenced)")
    plain = output_names is None and loop_timeout == LOOP_TIMEOUT_S and options == DEVICE_ONLY
    if plain:
        done = _bound(session, feeds, wait_for)
        if done is not None:
            return done
    arrays = session._check_feeds(feeds, wait_for)
    request = session._request(output_names, loop_timeout, **options)
    fence, job = fenced_job(session, arrays, request, list(wait_for))
    future = inline_fenced(session, request, list(wait_for), job)
    if future is None:
        return fence, session._queue.submit(job)
    if plain and future.exception() is None and not session.runner.value_inputs:
        _bind(session, feeds, wait_for)
    return fence, future


def _resolved(session, feeds: Mapping[str, Any], wait_for) -> dict[str, Any] | None:
    """``feeds`` with each ``Fence.output`` of a fence in ``wait_for`` replaced by that output;
    ``None`` where a feed is neither an ndarray nor a device tensor of another session."""
    out = {}
    for name, v in feeds.items():
        if type(v) is FencedOutput:
            if not any(v.fence is f for f in wait_for):
                return None
            v = v.resolve()
        if type(v) is DeviceTensor:
            if v.session is session:  # its run overwrites it: the full path reads it first
                return None
        elif type(v) is not np.ndarray:
            return None
        out[name] = v
    return out


def _signature(values: dict[str, Any]) -> tuple:
    return ("on device", *[(n, v.shape, v.dtype) for n, v in values.items()])


def _bind(session, feeds: Mapping[str, Any], wait_for) -> None:
    """Bind the session's plan for feeds like ``feeds`` (which a full-path run just took)."""
    values = _resolved(session, feeds, wait_for) if isinstance(feeds, Mapping) else None
    if values is not None:
        index = [(n, session._input_index[n]) for n in values]
        BoundRun.of(session, session.runner.plan, _signature(values), index, wanted_outputs(session.graph, None), on_device=True)


def _bound(session, feeds: Mapping[str, Any], wait_for) -> tuple[Fence, Future] | None:
    """The run through the plan's bound run in the caller's thread, or ``None`` (module doc)."""
    plan = session.runner.plan
    if plan is None or not plan.bound or not isinstance(feeds, Mapping) or not session._queue.quiet():
        return None
    for f in wait_for:
        if not f.signalled or f.error is not None:
            return None
    values = _resolved(session, feeds, wait_for)
    bound = None if values is None else plan.bound.get(_signature(values))
    if bound is None:
        return None
    for f in wait_for:
        if f.in_flight and not device_ordered(f, session, bound.queue_keys):
            return None
    fence, future = Fence(f"{session.graph.name or 'session'} run", tuple(bound.shapes)), Future()
    future.set_running_or_notify_cancel()
    try:
        out = bound.execute(values)
    except BaseException as e:  # noqa: BLE001 - delivered by future.result() and the fence
        fence.signal(e)
        future.set_exception(e)
        return fence, future
    if out is None:  # the plan changed meanwhile: the full path
        return None
    completed(fence, session, out)
    fence.signal()
    future.set_result(out)
    return fence, future

"""Bursts: rapid successive runs of one session (NNAPI's ``ANeuralNetworksBurst``).

``with session.burst() as burst: burst.run(feeds)``. What a plain ``run`` checks on every
call is checked once per burst while it stays true: the feeds' names, array types, shapes
and dtypes are compared with the previous run's as one tuple, and when they match the
inputs are not validated again and the plan key is reused (a model whose plan depends on
input contents, ``Session.value_inputs``, is checked every time). The options of a run
(``output_names``, ``measure_timing``...) are checked once per distinct set. The plan,
its arenas, the GPU staging buffers and command buffers stay bound from run to run, as
they do for ``run``. A burst is for one thread at a time; runs of its session from other
threads still take their turns.

A run with no options on a plan of one segment without host steps, whose outputs the
backends compute, goes through ``BoundRun``: the feeds' uploads, the partitions and the
outputs' downloads are looked up once for the plan, so a run is the device turns, the
session lock, the copies in, the partitions and the copies out (``bench/bench_burst.py``).
``Session.run`` with no options does the same for feeds like its last plain run's
(``run_plain``): every check of that run still holds for them.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import InputError
from mnnpy.exit_gate import GATE
from mnnpy.float_errors import loud, quiet
from mnnpy.graph_runner import LOOP_TIMEOUT_S
from mnnpy.run_request import wanted_outputs
from mnnpy.session_runs import execute, out_of_memory, run_devices
from mnnpy.timing import RunOutputs


class Burst:
    """Successive runs of ``session`` with the checks that stay true done once (see the
    module doc). ``run(feeds, output_names=None, **options)`` as ``Session.run``."""

    def __init__(self, session):
        self.session = session
        self._signature: tuple | None = None
        self._arrays_index: list[tuple[str, int]] = []
        self._key: tuple | None = None
        self._requests: dict[tuple, Any] = {}
        self._bound = _DEAD  # weakref of the BoundRun of its last run (kept by the plan)
        self._closed = False

    def run(self, feeds: Mapping[str, Any], output_names: list[str] | None = None, **options: Any):
        """``Session.run(feeds, output_names, **options)`` for the burst; returns its ``RunOutputs``."""
        if self._closed:
            raise InputError("the burst is closed")
        bound = self._bound()
        if bound is not None and output_names is None and not options:
            out = bound.run(feeds)
            if out is not None:
                return out
        s = self.session
        try:
            signature = tuple([(n, a.shape, a.dtype) for n, a in feeds.items() if type(a) is np.ndarray])
        except AttributeError:  # not a mapping: the full check below says so
            signature = None
        if signature is not None and signature == self._signature and len(signature) == len(feeds) and not s.runner.value_inputs:
            arrays = {t: feeds[n] for n, t in self._arrays_index}
            key = self._key
        else:
            arrays = s._check_feeds(feeds)
            key = s.runner.key(arrays)
            self._signature = signature if signature is not None and len(signature) == len(feeds) else None
            self._arrays_index = [(n, s._input_index[n]) for n in feeds]
            self._key = key
            self._bound = _DEAD
        request = self._request(output_names, options)
        out = execute(s, arrays, request, key)
        if output_names is None and not options and self._signature is not None and not s.runner.value_inputs:
            self._bound = _bind(s, self._bound, self._signature, self._arrays_index, request.wanted)
        return out

    def _request(self, output_names, options: dict):
        if options.get("deadline") is not None or options.get("timeout_ms") is not None:
            return self.session._request(output_names, **options)  # a deadline is relative to now: never cached
        cache_key = (None if output_names is None else tuple(output_names), tuple(sorted(options.items(), key=lambda kv: kv[0])))
        try:
            hash(cache_key)
        except TypeError:  # caller-provided output arrays: checked each time
            return self.session._request(output_names, **options)
        if cache_key not in self._requests:
            self._requests[cache_key] = self.session._request(output_names, **options)
        return self._requests[cache_key]

    def close(self) -> None:
        """End the burst; its session stays usable."""
        self._closed = True
        self._requests.clear()
        self._bound = _DEAD

    def __enter__(self) -> Burst:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def plain_options(output_names, loop_timeout, outputs, measure_timing, deadline, timeout_ms, outputs_on_device) -> bool:
    """Whether ``Session.run``'s options are all their defaults (a plain run: ``run_plain``)."""
    plain = all(v is None for v in (output_names, outputs, deadline, timeout_ms))
    return plain and measure_timing is False and outputs_on_device is False and loop_timeout == LOOP_TIMEOUT_S


def run_plain(session, feeds: Mapping[str, Any]) -> RunOutputs:
    """``session.run(feeds)`` with no options: through the ``BoundRun`` of the session's last
    plain run when ``feeds`` are like its feeds (ndarrays of the same names, shapes and
    dtypes, so that every check of that run holds) and its plan is still the session's; else
    the full path, after which the plan is bound for the next one (not for a model whose plan
    depends on input values). On silero's VAD model: 99 µs a run against 125 (here)."""
    bound = session._bound()
    out = None if bound is None else bound.run(feeds)
    if out is not None:
        return out
    out = execute(session, session._check_feeds(feeds), session._request(None))
    if session.runner.value_inputs:
        return out
    signature = tuple([(n, a.shape, a.dtype) for n, a in feeds.items() if type(a) is np.ndarray])
    if len(signature) == len(feeds):
        index = [(n, session._input_index[n]) for n in feeds]
        session._bound = _bind(session, session._bound, signature, index, wanted_outputs(session.graph, None))
    return out


def _bind(session, current, signature: tuple, index: list[tuple[str, int]], wanted: list[int]):
    """A weak reference to the ``BoundRun`` of the session's plan for feeds of ``signature``
    (``index``: name -> input tensor) and outputs ``wanted``: ``current`` where it is that
    one already, else the plan's (``BoundRun.of``; a dead reference where the plan does not
    qualify)."""
    bound, plan = current(), session.runner.plan
    if bound is not None and bound.plan is plan and bound.signature == signature:
        return current
    bound = BoundRun.of(session, plan, signature, index, wanted)
    return _DEAD if bound is None else weakref.ref(bound)


def _DEAD() -> None:  # a dead weak reference
    return None


class BoundRun:
    """A burst's run on one ``plan`` with its lookups done once: per feed name the
    ``(backend, handle)`` pairs to ``upload`` to, the partitions (``(backend, step)``: its
    ``execute_partition``, or the step's ``execute`` where it copies at its border), per output
    ``(name, backend, handle)`` to ``download``; the methods are looked up at each run, as the
    full path does; the output shapes and the device queues to take
    (``of`` says when a plan qualifies). ``run(feeds)`` returns ``RunOutputs``, or ``None``
    when the session's plan changed since (the caller takes the full path)."""

    def __init__(self, session, plan, signature: tuple, writes: list, reads: list, on_device: bool = False):
        self.signature, self.writes, self.on_device = signature, writes, on_device
        self._feeds = list(signature)  # compared as a list: 0.33 µs against 0.49 for a tuple
        self._session = weakref.ref(session)  # no cycle session -> plan -> BoundRun -> session
        self._plan = weakref.ref(plan)  # the plan keeps its BoundRuns (Plan.bound): evicting it frees both
        self.steps = [(None, step) if step.copies else (step.backend, step) for step in plan.steps]
        self.shapes = {name: tuple(plan.sizes.shapes[t]) for name, t, _, _ in reads}
        self.reads = [(name, backend, h) for name, _, backend, h in reads]
        self.kept = [(name, backend, h, plan.sizes.tensor(t)) for name, t, backend, h in reads]  # on_device
        devices = [(units, rt.device_queue()) for units, rt in run_devices(session, plan)]
        self.queues = [(q, min(max(1, units), q.capacity)) for units, q in devices]
        self.gated = any(b.exit_gated for b in plan.backends)
        self.queue_keys = frozenset(b.queue_key() for b in session.backends)  # session_runs.device_ordered

    @property
    def plan(self):
        """The plan it runs (``None`` once evicted)."""
        return self._plan()

    @classmethod
    def of(
        cls, session, plan, signature: tuple, feeds_index: list[tuple[str, int]], wanted: list[int], on_device: bool = False
    ) -> BoundRun | None:
        """The bound run of ``plan`` for feeds of ``signature`` (``(name, shape, dtype)`` per
        feed, all ndarrays; ``feeds_index``: name -> input tensor), outputs ``wanted`` (left on
        the device as ``DeviceTensor`` s where ``on_device``: ``mnnpy.fenced_runs``), or
        ``None`` where a run needs the full path: a plan ending at a barrier or with a host
        step, a feed the plan knows by value, an output that no backend computes."""
        if plan is None or plan.host is not None or plan.sizes.barrier is not None:
            return None
        if signature in plan.bound:  # bound before: its lookups were made then
            return plan.bound[signature]
        writes = []
        for name, t in feeds_index:
            if t in plan.sizes.values:
                return None
            writes.append((name, [(b, h[t]) for b, h in zip(plan.backends, plan.handles) if t in h]))
        reads = []
        for t in wanted:
            b = plan.schedule.home.get(t)
            if b is None or t in plan.sizes.values or t in plan.inputs or t not in plan.sizes.shapes:
                return None
            reads.append((session.graph.tensors[t].name, t, plan.backends[b], plan.handles[b][t]))
        plan.bound[signature] = cls(session, plan, signature, writes, reads, on_device)
        return plan.bound[signature]

    def run(self, feeds: Mapping[str, Any]) -> RunOutputs | None:
        """One run on ``feeds``; ``None`` when they are not ndarrays of the names, shapes and
        dtypes the run was bound for, or the plan is no longer the session's (the caller
        takes the full path, which checks them)."""
        try:
            if [(n, a.shape, a.dtype) for n, a in feeds.items() if type(a) is np.ndarray] != self._feeds:
                return None
        except AttributeError:
            return None
        if len(feeds) != len(self._feeds):
            return None
        return self.execute(feeds)

    def execute(self, feeds: Mapping[str, Any]) -> RunOutputs | None:
        """``run`` on ``feeds`` known to be like those it was bound for (ndarrays, or device
        tensors of other sessions where ``on_device``); ``None`` when the plan is no longer
        the session's."""
        s, gated = self._session(), self.gated
        if s is None:
            return None
        if gated:
            GATE.enter()
        held = []
        try:
            for queue, units in self.queues:
                if not queue.take(units):
                    queue.acquire(s.priority_level, units)
                held.append((queue, units))
            with s._lock:
                if s._closed:
                    raise InputError("the session is closed")
                runner = s.runner
                plan = runner.plan
                if plan is None or plan is not self._plan():
                    return None
                s._run_count += 1  # device tensors of earlier runs go stale (mnnpy.device_tensor)
                runner.segments = [plan]
                runner._running += 1
                try:
                    out = self._compute(plan, feeds, s)
                except MemoryError as e:
                    raise out_of_memory({n: shape for n, shape, _ in self.signature}, e) from None
                finally:
                    runner._running -= 1
                s._output_shapes = self.shapes
                return out
        finally:
            for queue, units in reversed(held):
                queue.release(units)
            if gated:
                GATE.leave()

    def _compute(self, plan, feeds: Mapping[str, Any], session) -> RunOutputs:
        """The copies in, the partitions and the copies out, or the device tensors where
        ``on_device`` (under the session's lock)."""
        defer = self.on_device  # as session_runs._locked: nothing is read on the host at its end
        for b in plan.backends:
            if b.timing or b.defer_wait is not defer:
                b.timing, b.defer_wait = False, defer
        for name, writes in self.writes:
            a = feeds[name]
            for backend, h in writes:
                backend.upload(a, h) if type(a) is np.ndarray else a.write_to(backend, h)
        token = quiet()  # as GraphRunner.run
        try:
            for backend, step in self.steps:
                if backend is None:
                    step.execute()
                else:
                    backend.execute_partition(step)
        finally:
            loud(token)
        out = RunOutputs()
        if defer:
            run = session._run_count
            for name, backend, h, info in self.kept:
                out[name] = DeviceTensor(name, info.shape, info.dtype, backend, h, session, run)
            return out
        for name, backend, h in self.reads:
            out[name] = backend.download(h)
        return out

"""Session: a model prepared on an ordered list of backends; ``resize`` plans, ``run`` computes.

Resize (once per distinct set of input shapes; the last ``RESIZE_CACHE`` per segment kept) is
the ``Planner``'s: SizeComputer -> Schedule -> memory plan per backend (one arena each) -> one
Execution per op, ``on_resize``. Run (one NNAPI execution): write the inputs, execute each
partition (border copies, then its Executions), read the outputs; nothing is allocated for
intermediate tensors. The Session owns the public API and input validation; its ``GraphRunner``
(``mnnpy.graph_runner``) the plan cache, the run loop and the segments of models whose shapes
depend on values or that hold control flow."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.burst import Burst, plain_options, run_plain
from mnnpy.compilation_cache import flush_caches
from mnnpy.device_queue import priority_level
from mnnpy.errors import InputError, ShapeError
from mnnpy.exit_gate import GATE
from mnnpy.fence import Fence
from mnnpy.fenced_runs import run_fenced
from mnnpy.graph_runner import LOOP_TIMEOUT_S, RESIZE_CACHE, GraphRunner
from mnnpy.io_desc import IODesc, check_names, checked_feeds
from mnnpy.ir import Graph, Net
from mnnpy.limits import MemoryBudget, checked_limit
from mnnpy.placement_report import session_placement
from mnnpy.run_queue import RunQueue
from mnnpy.run_request import RunRequest, wanted_outputs
from mnnpy.session_runs import checked_timeout, device_units, execute, lane_context, settle
from mnnpy.timing import RunOutputs

__all__ = ["RESIZE_CACHE", "Session"]


class Session:
    """A model prepared for ``run`` on ``backends`` (preference order, CPU last).

    Created by ``Interpreter.create_session``. ``memory_limit`` (bytes; default
    ``limits.default_memory_limit()``, a fraction of the memory available now): what its plans
    may hold together (``budget``), checked before anything is allocated.

    Executions (NNAPI's: one run call each): ``run`` (synchronous), ``run_async`` (a
    ``concurrent.futures.Future``), ``run_fenced`` (a ``Fence`` and a Future, after other
    runs' fences), ``burst()`` (rapid successive runs); each takes ``measure_timing``,
    caller-provided ``outputs``, a ``deadline``/``timeout_ms`` and ``loop_timeout``.

    Threads: a Session may be shared by threads; ``run`` and ``resize`` hold one lock per
    Session, so its runs happen one at a time (the plan, its arenas and the backends'
    staging are reused by every run); input validation happens before the lock. Runs of
    different sessions on the devices their partitions use take turns on those devices'
    queues, higher ``priority`` first (``mnnpy.device_queue``; the CPU lets as many runs in
    as it has cores for their threads, a GPU one per lane). ``run_async`` keeps up to one
    run per lane in flight, each lane beyond the first on a sibling session
    (``mnnpy.run_queue``). For runs in parallel on the CPU, create one Session per thread.
    ``close()`` (or ``with``) frees its memory at once. At interpreter exit, runs in flight
    on other threads finish first and no new one starts (``mnnpy.exit_gate``).
    """

    def __init__(self, net: Net, backends: list[Backend], memory_limit: int | None = None, priority: str = "medium", placer=None):
        self.net = net
        self.graph: Graph = net.main
        self.backends = backends
        self.budget = MemoryBudget(checked_limit(memory_limit))
        self.runner = GraphRunner(net, self.graph, backends, self.budget, placer)
        self._lock, g = threading.Lock(), self.graph
        self._input_index = {g.tensors[t].name: t for t in g.inputs}
        self._input_desc = {t: self._desc(t) for t in g.inputs}
        self._output_shapes: dict[str, tuple[int, ...]] | None = None
        self.priority, self.priority_level = priority, priority_level(priority)
        self._devices = device_units(backends)
        self._spawn: Any = None  # lane -> a sibling Session (set by Interpreter.create_session; mnnpy.run_queue)
        self._siblings: dict[int, Session] = {}
        lanes = max(rt.lanes for _, rt in self._devices)
        self._queue = RunQueue(f"mnnpy-run-{self.graph.name or 'session'}", lanes, lambda lane: lane_context(self, lane))
        self._closed, self._run_count = False, 0  # runs started: a DeviceTensor of an earlier run is stale
        self._bound: Any = lambda: None  # weakref of the last plain run's BoundRun (mnnpy.burst.run_plain)

    def __reduce_ex__(self, protocol):
        raise TypeError("a Session holds its devices' state and cannot be pickled: give workers a mnnpy.SessionSpec")

    @property
    def resize_count(self) -> int:
        """How many plans this session's main graph has made (segments count one each)."""
        return self.runner.resize_count

    # -- descriptions -------------------------------------------------------------------
    @property
    def inputs(self) -> list[IODesc]:
        """Graph inputs: name, declared shape (dynamic dims as names or None), dtype."""
        return [self._desc(t) for t in self.graph.inputs]

    @property
    def outputs(self) -> list[IODesc]:
        """Graph outputs as declared in the model (shapes after a run: ``output_shapes``)."""
        return [self._desc(t) for t in self.graph.outputs]

    def _desc(self, t: int) -> IODesc:
        d = self.graph.tensors[t]
        return IODesc(d.name, d.shape, d.dtype, d.kind)

    @property
    def output_shapes(self) -> dict[str, tuple[int, ...]]:
        """Output shapes of the last run (data-dependent ones as computed), else of the last
        resize; raises ``InputError`` before either."""
        if self._output_shapes is not None:
            return dict(self._output_shapes)
        plan = self.runner.plan
        if plan is None or plan.sizes.barrier is not None:
            raise InputError("no run yet: output shapes are known after run() (or resize() for static shapes)")
        return {self.graph.tensors[t].name: plan.sizes.shapes[t] for t in self.graph.outputs}

    def op_mflops(self) -> list[tuple[str, str, float]]:
        """``(op name, op type, MFLOPs)`` of every op that runs, in order, for the shapes of the
        last run (every segment) or resize (the schemas' FLOPs rules, ``mnnpy.ops.flops``);
        ops computed at resize are left out. Control-flow bodies that ran follow their op, each
        body op once, named ``<op>/<attribute>/<body op>`` (a Loop's body runs it once per
        iteration: multiply by the iterations for the loop's total). Raises ``InputError``
        before a run or resize."""
        if self.runner.plan is None:
            raise InputError("no run yet: FLOPs are known after run() (or resize() for static shapes)")
        from mnnpy.schedule_view import op_mflops

        return op_mflops(self.runner)

    placement = property(session_placement, doc="Why each op went where it did: ``mnnpy.placement_report.session_placement``.")

    def partitions(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule, printed: a summary line, each partition with its ops, why each op that fell
        back did, the ops run on the host (control flow, bodies once they ran) (``mnnpy info``).

        ``shapes`` (input name -> shape): the schedule for those input shapes, computed
        without planning memory or creating Executions. Without it: the schedule of the last
        run (every segment of a model whose shapes depend on computed values) or resize, or before
        either, that of the declared shapes, dynamic dims as ``mnnpy info --partitions`` fills them."""
        from mnnpy.schedule_view import describe

        return describe(self.runner, self._described(shapes))

    def dot(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule (see ``partitions``) as Graphviz text: ops coloured by backend,
        copies dashed, fallback reasons as tooltips, host ops with their bodies as clusters
        (``mnnpy info --dot``)."""
        from mnnpy.schedule_view import to_dot

        return to_dot(self.runner, self._described(shapes))

    def _described(self, shapes) -> list:
        """The plans (or, for ``shapes``, one schedule-only plan stand-in) ``partitions`` describes:
        of ``shapes`` (sizes and placement only), else of the last run's segments or resize,
        else of the declared shapes (dynamic dims: ``mnnpy.tools.inputs.default_shape``)."""
        runner = self.runner
        if shapes is None and (runner.segments or runner.plan is not None):
            return runner.segments or [runner.plan]
        if shapes is None:  # as mnnpy info --partitions: batch 1, other dynamic dims 64
            from mnnpy.tools.inputs import default_shape

            shapes = {d.name: default_shape(d.shape or ()) for d in self.inputs}
        checked = self._check_shapes(shapes)
        try:
            return [runner.planner.describe(checked)]
        except ShapeError as e:
            raise ShapeError(f"input shapes {runner.named(checked)}: {e}") from None

    # -- resize -------------------------------------------------------------------------
    def resize(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        """Plan for these input shapes (name -> shape). Raises ``InputError``/``ShapeError``.

        A model whose shapes depend on the *contents* of some inputs (``value_inputs``, e.g.
        a Reshape's target shape fed as an input) is only checked here: it is planned at
        ``run``, when those contents are known.
        """
        with GATE.entered(), self._lock:
            checked = self._check_shapes(shapes)
            settle(self, locked=True)
            if not self.runner.value_inputs:
                self.runner.plan = self.runner.plan_for(checked)
                self.runner.segments, self._output_shapes = [], None

    @property
    def value_inputs(self) -> list[str]:
        """Names of the inputs whose contents (not only shapes) shape the plan."""
        return [self.graph.tensors[t].name for t in self.runner.value_inputs]

    def _check_shapes(self, shapes: Mapping[str, Any]) -> dict[int, tuple[int, ...]]:
        if self._closed:  # checked under the lock by resize: a resize racing close plans nothing after it
            raise InputError("the session is closed")
        if not isinstance(shapes, Mapping):
            raise InputError(f"resize() takes a dict of input name -> shape, got {type(shapes).__name__}")
        check_names(self._input_index, self._input_desc, shapes, sequences_given=False)
        return {self._input_index[n]: self._input_desc[self._input_index[n]].check_shape(s) for n, s in shapes.items()}

    # -- run (NNAPI executions: run, run_async, run_fenced, burst) ---------------------------
    def run(
        self,
        feeds: Mapping[str, Any],
        output_names: list[str] | None = None,
        loop_timeout: float = LOOP_TIMEOUT_S,
        *,
        outputs: Mapping[str, np.ndarray] | None = None,
        measure_timing: bool = False,
        deadline: float | None = None,
        timeout_ms: float | None = None,
        outputs_on_device: bool = False,
    ) -> RunOutputs:
        """Compute the outputs for ``feeds`` (input name -> array-like): NNAPI's synchronous
        execution.

        Returns output name -> ndarray (a list for a sequence output) as a ``RunOutputs``
        dict, whose ``timing`` is NNAPI's ``Timing(on_device_us, in_driver_us)`` when
        ``measure_timing`` (``mnnpy.timing``), else ``None``. Resizes first when the input
        shapes differ from the last run's. ``loop_timeout`` (s, default 2, at most 15:
        NNAPI's): how long each Loop may run. ``outputs`` (output name -> ndarray): arrays
        to write those outputs into (``mnnpy.run_request``). ``deadline``
        (``time.monotonic()`` s) or ``timeout_ms``: the run raises ``DeadlineMissedError``
        if it has not completed by then, checked before it starts, while it waits for the
        device, between partitions and between ops on the CPU. ``outputs_on_device``: return
        ``DeviceTensor`` s left where they were computed, valid until the session's next run
        (``mnnpy.device_tensor``); feeds may be device tensors. Raises ``InputError`` (wrong
        name, missing input, wrong rank/dtype/shape, bad options, a closed session),
        ``ShapeError`` (shapes the model cannot take, or memory beyond the session's limit;
        also when the machine runs out of memory during the run: NumPy's ``MemoryError``),
        ``OutputBufferTooSmallError``, ``DeadlineMissedError`` or ``LoopTimeoutError``.
        """
        if plain_options(output_names, loop_timeout, outputs, measure_timing, deadline, timeout_ms, outputs_on_device):
            return run_plain(self, feeds)  # feeds like the last plain run's: its checks hold (mnnpy.burst)
        arrays = self._check_feeds(feeds)
        options = dict(outputs=outputs, measure_timing=measure_timing, deadline=deadline, timeout_ms=timeout_ms)
        return execute(self, arrays, self._request(output_names, loop_timeout, outputs_on_device=outputs_on_device, **options))

    def run_async(
        self,
        feeds: Mapping[str, Any],
        output_names: list[str] | None = None,
        loop_timeout: float = LOOP_TIMEOUT_S,
        **options: Any,
    ) -> Future:
        """``run`` on the session's run threads (NNAPI's asynchronous execution): returns at
        once a ``concurrent.futures.Future`` of the ``RunOutputs``; ``future.result()``
        raises what the run raised. Runs start in the order asked for; on a device with
        several lanes up to that many are in flight at once (``mnnpy.run_queue``). Inputs
        are checked now (``InputError`` raised here); the arrays given are read when the run
        starts, so keep them unchanged until the future is done. ``options``: as ``run``."""
        arrays = self._check_feeds(feeds)
        request = self._request(output_names, loop_timeout, **options)
        return self._queue.submit(lambda context: execute(context, arrays, request, parent=self))

    def run_fenced(
        self,
        feeds: Mapping[str, Any],
        wait_for: list[Fence] | tuple[Fence, ...] = (),
        output_names: list[str] | None = None,
        loop_timeout: float = LOOP_TIMEOUT_S,
        **options: Any,
    ) -> tuple[Fence, Future]:
        """``run_async`` that starts only after every fence in ``wait_for`` (from any session's
        ``run_fenced``) has signalled: NNAPI's ``executeFenced``. Returns ``(fence, future)``; the
        fence signals when this run completes, successfully or not (``fence.error``), with
        ``timing_launched`` and ``timing_fenced`` under ``measure_timing``. A feed may be
        ``fence.output(name)`` of a fence in ``wait_for`` (``mnnpy.fence``). A fence that signalled a
        failed run fails this one (``DependencyFailedError``); ``deadline``/``timeout_ms`` bound the
        wait too (``DeadlineMissedError``). ``options``: as ``run`` (``mnnpy.fenced_runs``)."""
        return run_fenced(self, feeds, wait_for, output_names, loop_timeout, options)

    def burst(self) -> Burst:
        """A ``Burst`` for rapid successive runs (NNAPI's burst): ``with session.burst() as b: b.run(feeds)``."""
        return Burst(self)

    def close(self) -> None:
        """Free the session's plans, arenas and device memory now (a run in progress ends
        first); later calls raise ``InputError``. Queued asynchronous runs fail with it.
        Also ``with interpreter.create_session() as s:``. Closing twice is a no-op."""
        self._closed = True
        self._queue.close()
        for sibling in list(self._siblings.values()):  # list(): one step, while a lane may add one
            sibling is self or sibling.close()
        with self._lock:
            settle(self, locked=True)
            self.runner.clear()
            self._output_shapes = None
        flush_caches(self.backends)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, output_names: list[str] | None, loop_timeout: float = LOOP_TIMEOUT_S, **options: Any) -> RunRequest:
        """The checked options of one execution (``RunRequest.checked``); raises ``InputError``."""
        return RunRequest.checked(self.graph, wanted_outputs(self.graph, output_names), checked_timeout(loop_timeout), **options)

    def _check_feeds(self, feeds: Mapping[str, Any], fences=()) -> dict[int, Any]:
        return checked_feeds(self._input_index, self._input_desc, feeds, self, self.runner.value_inputs, fences)

"""GraphRunner: one graph run on a session's backends, plans cached; the Session's main graph
and every control-flow body (If branches, Loop and Scan bodies) are run by one each.

A run goes through segments: a plan covers the ops up to the first one whose value inputs
are computed (its shapes depend on them) or up to a dynamic op (control flow, sequence ops,
run on the host at the end of the plan); the rest is planned with what the segment
computed. Plans are cached by segment start, input shapes and dtypes and value-input
contents (the last ``RESIZE_CACHE`` per segment start), so a body planned once is reused
by every iteration and every run while its input shapes stay the same.
"""

from __future__ import annotations

import gc
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnnpy import limits
from mnnpy.backend import Backend, OpInfo
from mnnpy.compilation_cache import flush_caches, settle_caches
from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import ShapeError
from mnnpy.float_errors import loud, quiet
from mnnpy.ir import Graph, Net
from mnnpy.log import get_logger, lazy
from mnnpy.ops import get_schema
from mnnpy.planner import Plan, Planner
from mnnpy.size_computer import value_inputs

_log = get_logger("planner")

RESIZE_CACHE = 4  # plans kept per segment start: the last 4 distinct sets of input shapes
MAX_VALUE_INPUT = 1 << 16  # elements of an input whose contents decide shapes
LOOP_TIMEOUT_S = 2.0  # NNAPI's default loop time-out
MAX_LOOP_TIMEOUT_S = 15.0  # NNAPI's maximum


@dataclass
class RunContext:
    """What one run call carries down to its plans and host steps: ``loop_timeout`` (s), the
    limit of each Loop's run (NNAPI's loop time-out), ``started`` (``time.perf_counter()`` at
    the call), ``deadline``: the ``perf_counter`` time by which the innermost running Loop
    must end (its own limit, or an enclosing loop's if sooner; ``None`` outside loops);
    ``run_deadline``: the run's deadline (``time.monotonic()`` s, ``mnnpy.deadline``) or
    ``None``; ``meter``: a ``mnnpy.timing.TimingMeter`` when timing was asked for."""

    loop_timeout: float = LOOP_TIMEOUT_S
    started: float = field(default_factory=time.perf_counter)
    deadline: float | None = None
    run_deadline: float | None = None
    meter: Any = None


class GraphRunner:
    """Plans and runs ``graph`` (a graph of ``net``) on ``backends``; see the module docstring.

    ``evaluate`` computes small ops at resize (``CPUBackend.evaluate``); ``cpu`` runs the
    host kernels of dynamic ops that are not control flow (``CPUBackend.run_host``).
    ``budget``: the session's ``limits.MemoryBudget``, shared with every body's runner
    (default: one of ``limits.default_memory_limit()`` bytes); past its limit it may drop
    cached plans that are not in use (``drop_unused``). ``placer``: AUTO's (``mnnpy.placement``), bodies' too.
    """

    def __init__(self, net: Net, graph: Graph, backends: list[Backend], budget: limits.MemoryBudget | None = None, placer=None):
        self.net, self.graph, self.backends, self.placer = net, graph, backends, placer
        self.budget = budget or limits.MemoryBudget(limits.default_memory_limit())
        self.cpu = next(b for b in backends if b.name == "cpu")
        index = next((i for i, g in enumerate(net.graphs) if g is graph), None)
        self.planner = Planner(graph, backends, self.cpu.evaluate, self._host, self.budget, placer, index)
        self.budget.add_reclaimer(self.drop_unused)
        self._running = 0  # run() calls in progress (their segments are in use)
        self.value_inputs = sorted(value_inputs(graph))
        self._plans: dict[int, OrderedDict[tuple, Plan]] = {}  # segment start -> key -> plan
        self.plan: Plan | None = None  # the first segment of the last run or resize
        self.segments: list[Plan] = []  # the plans the last run went through, in order
        self.resize_count = 0
        self._bodies: dict[tuple[int, str], GraphRunner] = {}
        self._needs: dict[int, set[int]] = {}

    # -- plans ------------------------------------------------------------------------------
    def plan_for(self, shapes: dict[int, tuple], values=None, start: int = 0, dtypes=None) -> Plan:
        """The cached plan for these inputs (tensor -> shape; value inputs' contents; from op
        ``start``; dtypes of inputs, the declared ones where not given), made by the Planner
        on a miss. Raises ``ShapeError``."""
        dtypes = {t: np.dtype((dtypes or {}).get(t, self.graph.tensors[t].dtype)) for t in shapes}
        key = (start, *plan_key(shapes, values, dtypes))
        cache = self._plans.setdefault(start, OrderedDict())
        plan = cache.get(key)
        if plan is not None:
            cache.move_to_end(key)
            _log.debug("plan cache hit: %s from op %d", lazy(self.named, shapes), start)
            return plan
        _log.debug("plan cache miss: %s from op %d (%d plans kept)", lazy(self.named, shapes), start, len(cache))
        try:
            plan = self._settled_plan(key, shapes, values or {}, start, dtypes or {})
        except ShapeError as e:
            raise ShapeError(f"input shapes {self.named(shapes)}: {e}") from None
        except MemoryError as e:
            raise ShapeError(f"input shapes {self.named(shapes)} need more memory than this machine has: {e}") from None
        cache[key] = plan
        flush_caches(self.backends)  # what the plan saved in the compilation cache, if any (a plan made at run too)
        if len(cache) > RESIZE_CACHE:
            while len(cache) > RESIZE_CACHE:
                cache.popitem(last=False)
            # a plan's Executions and kernels refer to each other: only the cycle collector frees
            # its arena, which a run allocating nothing but arrays would not trigger (issue 12 defect 7)
            gc.collect()
            for b in self.backends:
                b.on_plans_evicted()
        self.resize_count += 1
        return plan

    def _settled_plan(self, key, shapes, values, start, dtypes) -> Plan:
        """The Planner's plan, made again where the compilation cache's token was a wrong guess
        (``mnnpy.cache_sources``: the plan, or its failure, may come from another model's
        entries); ``settle_caches`` confirms the guess before the plan is used."""
        try:
            plan = self.planner.plan(key, shapes, values, start, dtypes)
        except Exception:
            if settle_caches(self.backends):
                raise  # the token is the model's: the failure is the plan's own
            return self.planner.plan(key, shapes, values, start, dtypes)
        return plan if settle_caches(self.backends) else self.planner.plan(key, shapes, values, start, dtypes)

    def named(self, shapes: dict[int, Any]) -> dict[str, Any]:
        """``shapes`` keyed by tensor name."""
        return {self.graph.tensors[t].name: s for t, s in shapes.items()}

    def values_of(self, arrays: dict[int, Any]) -> dict[int, Any]:
        """Copies of the value inputs' contents, which key the plan, and every sequence input
        (a list: known by value at resize). Inputs larger than ``MAX_VALUE_INPUT`` elements are
        left out: the ops that need them then start a new segment, planned at run once the
        values are there."""
        out = {t: np.array(arrays[t]) for t in self.value_inputs if np.size(arrays[t]) <= MAX_VALUE_INPUT}
        out.update((t, list(a)) for t, a in arrays.items() if isinstance(a, list))
        return out

    def clear(self) -> None:
        """Forget every plan and body (``Session.close``): their arenas, Executions and
        device memory go now (``Backend.on_close`` first: the CPU's pages may serve the next
        session); the backends give back what only they used."""
        for b in self.backends:
            b.on_close()
        self._plans.clear()
        self._bodies.clear()
        self.plan, self.segments = None, []
        gc.collect()  # plans and their Executions refer to each other (see plan_for)
        for b in self.backends:
            b.on_plans_evicted()

    def drop_unused(self) -> None:
        """Forget every cached plan not in use, so that its memory can go (the budget's
        reclaimer): while this runner runs, all but the segments of the run in progress."""
        keep = {id(p) for p in self.segments} if self._running else set()
        for cache in self._plans.values():
            for key in [k for k, p in cache.items() if id(p) not in keep]:
                del cache[key]
        if self.plan is not None and id(self.plan) not in keep:
            self.plan = None
        if not self._running:
            self.segments = []

    def cached(self) -> bool:
        """Whether any plan is held (the current one or a cached one)."""
        return self.plan is not None or any(self._plans.values())

    # -- run --------------------------------------------------------------------------------
    def key(self, arrays: dict[int, Any]) -> tuple:
        """The plan key of a run on ``arrays`` from op 0 (see ``plan_key``)."""
        shapes = {t: shape_of(a) for t, a in arrays.items()}
        dtypes = {t: dtype_of(a, self.graph.tensors[t].dtype) for t, a in arrays.items()}
        return (0, *plan_key(shapes, self.values_of(arrays), dtypes))

    def run(
        self,
        arrays: dict[int, Any],
        wanted: list[int],
        context: RunContext,
        key: tuple | None = None,
        into: Callable[[Plan, int], np.ndarray | None] | None = None,
        keep: Callable[[Plan, int, dict[int, Any]], Any] | None = None,
    ) -> dict[int, Any]:
        """Tensor -> value of each ``wanted`` tensor after running the graph on ``arrays``
        (graph input tensor -> ndarray, or list for a sequence), segment after segment.
        ``key``: ``self.key(arrays)`` where the caller has it already. ``into(plan, t)``: the
        caller's array to write output ``t`` into (``Plan.read_into``), or ``None`` for a new
        one; it is asked before the first segment runs (``t`` not yet in the plan's shapes:
        a shape known only later) and again when ``t`` is read. ``keep(plan, t, arrays)``: the
        value to return for output ``t`` instead of reading it (device-resident outputs,
        ``mnnpy.device_tensor``)."""
        if self.plan is None or self.plan.key != (self.key(arrays) if key is None else key):
            shapes = {t: shape_of(a) for t, a in arrays.items()}
            dtypes = {t: dtype_of(a, self.graph.tensors[t].dtype) for t, a in arrays.items()}
            self.plan = self.plan_for(shapes, self.values_of(arrays), 0, dtypes)  # no reference to the old one kept here
        plan = self.plan
        self.segments = [plan]
        results: dict[int, Any] = {}
        self._running += 1
        try:
            if into is not None:
                for t in wanted:
                    into(plan, t)  # checks what the first plan knows before anything runs
            while True:
                plan.write(arrays)
                token = quiet()  # NaN/inf propagate silently, as in onnxruntime
                try:
                    plan.execute(arrays, context)
                finally:
                    loud(token)
                for t in wanted:
                    if t not in results and (t in plan.sizes.shapes or t in plan.results):
                        if keep is not None:
                            results[t] = keep(plan, t, arrays)
                            continue
                        out = None if into is None else into(plan, t)
                        if out is None:
                            results[t] = plan.read(t, arrays)
                        else:
                            plan.read_into(t, arrays, out)
                            results[t] = out
                barrier = plan.sizes.barrier
                if barrier is None or barrier >= len(self.graph.ops):
                    return results
                plan, arrays = self._next_segment(plan, arrays)
                self.segments.append(plan)
        finally:
            self._running -= 1

    def _next_segment(self, plan: Plan, arrays: dict[int, Any]) -> tuple[Plan, dict[int, Any]]:
        """After a segment: the rest of the graph, planned with what it computed (what the
        earlier segment exports becomes this segment's inputs)."""
        g = self.graph
        crossing = {t: plan.read(t, arrays) for t in plan.exports}
        needed = self._value_needs(plan.sizes.barrier)
        values = {t: a for t, a in crossing.items() if t in needed or t in plan.sizes.values}
        values.update((t, a) for t, a in crossing.items() if isinstance(a, list))  # sequences: known by value
        shapes = {t: shape_of(a) for t, a in crossing.items()}
        dtypes = {t: dtype_of(a, g.tensors[t].dtype) for t, a in crossing.items()}
        nxt = self.plan_for(shapes, values, plan.sizes.barrier, dtypes)
        if nxt.sizes.barrier == plan.sizes.barrier:  # cannot happen: every value it needs is known now
            op = g.ops[plan.sizes.barrier]
            raise ShapeError(f"{op.type} '{op.name}': its value inputs are still unknown after the ops before it ran")
        return nxt, crossing

    def _value_needs(self, start: int) -> set[int]:
        """Tensors whose values the ops from ``start`` on read as value inputs (cached: a run
        through many segments asks once per segment start)."""
        if start not in self._needs:
            self._needs[start] = {
                op.inputs[k]
                for op in self.graph.ops[start:]
                for k in get_schema(op.type).value_inputs(len(op.inputs))
                if op.inputs[k] >= 0
            }
        return self._needs[start]

    # -- host steps -------------------------------------------------------------------------
    def body(self, op_index: int, attr: str) -> GraphRunner:
        """The runner of the body that op ``op_index``'s graph attribute ``attr`` names (made
        once, kept: its plans are reused by every iteration and run)."""
        key = (op_index, attr)
        if key not in self._bodies:
            ref = self.graph.ops[op_index].resolved[attr]
            self._bodies[key] = GraphRunner(self.net, self.net.graphs[ref.index], self.backends, self.budget, self.placer)
        return self._bodies[key]

    def bodies(self) -> dict[tuple[int, str], GraphRunner]:
        """The body runners made so far: (op index, attribute) -> runner."""
        return dict(self._bodies)

    def _host(self, info: OpInfo):
        """``HostStep.run`` of a dynamic op: control flow (``mnnpy.control_flow``) or a host
        kernel of the CPU backend (sequence ops)."""
        from mnnpy import control_flow

        if info.type in control_flow.RUNNERS:
            run = control_flow.RUNNERS[info.type]
            return lambda inputs, context: run(self, info, inputs, context)
        return lambda inputs, context: self.cpu.run_host(info, inputs)


def plan_key(shapes: dict[int, tuple], values: dict[int, Any] | None, dtypes: dict[int, Any] | None = None) -> tuple:
    """Plans are cached by input shapes (and dtypes, where given: bodies' inputs take theirs
    from the values fed) and the contents of the value inputs."""
    dtypes = dtypes or {}
    typed = tuple((t, s, np.dtype(dtypes[t]).str if t in dtypes else None) for t, s in sorted(shapes.items()))
    contents = tuple((t, _content_key(v)) for t, v in sorted((values or {}).items()))
    return typed, contents


def _content_key(v: Any) -> tuple:
    if isinstance(v, list):  # a sequence: its elements' shapes, dtypes and bytes
        return ("seq", *(_content_key(e) for e in v))
    v = np.asarray(v)
    return v.dtype.str, v.shape, v.tobytes()


def shape_of(value: Any) -> tuple[int, ...]:
    """An ndarray's shape; for a sequence (a list, whose value is known too) its elements'
    shape (the first one's; ``()`` when it is empty), as ONNX types sequences."""
    if isinstance(value, list):
        return tuple(np.shape(value[0])) if value else ()
    if isinstance(value, DeviceTensor):  # never read for its shape
        return value.shape
    return tuple(np.shape(value))


def dtype_of(value: Any, declared: np.dtype) -> np.dtype:
    """An ndarray's dtype; a sequence's elements' (``declared`` when it is empty)."""
    if isinstance(value, list):
        return value[0].dtype if value else np.dtype(declared)
    if isinstance(value, DeviceTensor):
        return value.dtype
    return np.asarray(value).dtype

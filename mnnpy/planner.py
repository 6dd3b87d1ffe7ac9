"""Planner: (graph, input shapes, backends) -> ``Plan``, MNN's resize as explicit steps.

``Planner.plan`` runs, once per distinct set of input shapes (and value-input contents):
1. SizeComputer (``compute_sizes``): every tensor's shape and dtype, values known at resize,
   each op's derived geometry, the ops left to run;
2. Schedule (``build_schedule``): each run-time op on a backend, partitions, border copies;
3. lifetimes (``memory_planner.tensor_lifetimes``) and one arena per backend
   (``plan_memory``), then a handle per tensor (``Backend.acquire``/``acquire_constant``);
4. per partition a ``PartitionStep``: its border copies and one Execution per op, each
   ``on_resize``d, then ``Backend.on_resize_partition`` (a recording backend records it).

Limits before memory (``mnnpy.limits``): a plan is made inside a ``PlanCharge`` of the
session's ``MemoryBudget``. The SizeComputer checks every tensor against the memory limit;
the sum of every backend's arena is charged before the first is allocated; constant copies,
scratch and workspaces are charged by the backends as they make them, each op's under its
name. A plan keeps its bytes in the budget while it lives; past the limit, ``ShapeError``.

With a compilation cache (``create_session(cache_dir=...)``), what steps 1 to 3 compute is
data: the sizes, the schedule and each backend's offsets of a plan for the same graph, inputs
and backends are loaded from it instead (``mnnpy.plan_cache``: verified, checked against this
session's limits), and a plan computed is saved to it. The arenas are charged and allocated,
the handles acquired and step 4 run either way.

A segment that ends with a dynamic op (``OpSchema.dynamic``: control flow, sequence ops)
gets a ``HostStep`` after its partitions: the op runs on the host, on its inputs read back,
and its outputs (ndarrays, or lists for sequences) are known only then.

The plan's run is ``write`` (inputs into every backend holding them), ``execute`` (each
step: copies in, ``Backend.execute_partition``; then the host step) and ``read`` (a tensor
back to the host). The planner knows graphs, not sessions: a control-flow body is planned
the same way (``mnnpy.graph_runner``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnnpy import limits
from mnnpy.backend import Backend, Execution, OpInfo
from mnnpy.deadline import check
from mnnpy.device_tensor import DeviceTensor
from mnnpy.ir import Graph
from mnnpy.log import get_logger, lazy
from mnnpy.memory_planner import Layout, MemoryPlan, layout, plan_memory, tensor_lifetimes
from mnnpy.plan_cache import PlanStore
from mnnpy.schedule import Partition, Schedule, build_schedule
from mnnpy.size_computer import Evaluate, SizeResult, compute_sizes

_log = get_logger("planner")


@dataclass
class PartitionStep:
    """One partition of a plan on ``backend``: graph op indices ``ops``; ``copies`` (source
    backend, source handle, destination handle) made before it runs; ``runs`` (Execution,
    input handles, output handles) per op in order; ``uploads``/``downloads``: the handles
    written before it / read after it (``Backend.on_resize_partition``); ``recording``: what
    a recording backend built for it (Vulkan: the command buffer); ``private``: the tensors
    (indices) it makes that exactly one of its ops reads and nothing else does (no other op
    of the graph, no later segment, not a graph output): a backend may fuse such a tensor's
    producer with its reader and never write it."""

    backend: Backend
    ops: list[int]
    copies: list[tuple[Backend, Any, Any]]
    runs: list[tuple[Execution, list, list]]
    uploads: list
    downloads: list
    recording: Any = None
    private: frozenset = frozenset()

    @property
    def executions(self) -> list[Execution]:
        """The partition's Executions, in order."""
        return [exe for exe, _, _ in self.runs]

    def execute(self) -> None:
        """Border copies in (``Backend.copy``), then the partition (``execute_partition``)."""
        for src_backend, src, dst in self.copies:
            self.backend.copy(src_backend, src, dst)
        self.backend.execute_partition(self)


@dataclass
class HostStep:
    """A dynamic op run on the host at the end of its segment: ``run(inputs, context)`` takes
    its inputs (ndarrays, lists for sequences, ``None`` for absent ones) and the run's
    context (``mnnpy.graph_runner.RunContext``) and returns its outputs."""

    info: OpInfo
    run: Callable[[list, Any], list]


@dataclass
class Described:
    """A segment described without planning it: its ``sizes`` and ``schedule``."""

    sizes: SizeResult
    schedule: Schedule


@dataclass
class Plan:
    """A planned segment: ops from ``start`` up to ``sizes.barrier`` (or the end).

    ``inputs``: the tensors it receives at run (graph inputs, or for a later segment what
    earlier ones computed); ``exports``: what later segments or the outputs read;
    ``handles[b]``: tensor -> backend ``b``'s handle; ``executions``: op index -> Execution.
    """

    key: tuple
    start: int
    inputs: frozenset
    exports: frozenset
    sizes: SizeResult
    schedule: Schedule
    backends: list[Backend]
    memory: list[MemoryPlan]
    handles: list[dict[int, Any]]
    executions: dict[int, Execution]
    steps: list[PartitionStep]
    host: HostStep | None = None
    results: dict[int, Any] = field(default_factory=dict)  # the host step's outputs of the last run
    devices: list | None = None  # (units, runtime) a run of it takes turns on (mnnpy.session_runs.run_devices)
    bound: dict = field(default_factory=dict)  # feed signature -> its BoundRun (mnnpy.burst)
    device_bytes: dict = field(default_factory=dict)  # backend name -> bytes charged for it (PlanCharge.by_backend)

    def write(self, arrays: Mapping[int, Any]) -> None:
        """Upload each input array into every backend that holds its tensor; a
        ``DeviceTensor`` is copied device to device where the backend shares its Runtime
        (``DeviceTensor.write_to``), else through the host."""
        for t, a in arrays.items():
            if t in self.sizes.values:
                continue
            for backend, h in zip(self.backends, self.handles):
                if t in h:
                    if isinstance(a, DeviceTensor):
                        a.write_to(backend, h[t])
                    else:
                        backend.upload(a, h[t])

    def execute(self, arrays: Mapping[int, Any], context: Any = None) -> None:
        """Every partition in order (``PartitionStep.execute``), then the host step, if any,
        on its inputs (``arrays``: the inputs written). With a ``context``
        (``mnnpy.graph_runner.RunContext``): its ``run_deadline`` is checked before each
        partition (``DeadlineMissedError``) and its ``meter`` times each one."""
        deadline = getattr(context, "run_deadline", None)
        meter = getattr(context, "meter", None)
        for step in self.steps:
            if deadline is not None:
                check(deadline, f"before a partition on {step.backend.name}")
            if meter is None:
                step.execute()
            else:
                t0 = time.perf_counter()
                step.execute()
                meter.partition(step, time.perf_counter() - t0)
        if self.host is not None:
            op = self.host.info.op
            ins = [self.read(t, arrays) if t >= 0 else None for t in op.inputs]
            outs = self.host.run(ins, context)
            self.results = {t: v for t, v in zip(op.outputs, outs) if t >= 0}

    def read_into(self, t: int, arrays: Mapping[int, Any], out: np.ndarray) -> None:
        """Tensor ``t``'s contents after ``execute`` written into ``out`` (an ndarray of its
        shape and dtype): one copy, from the backend's handle (``Backend.download_into``)."""
        if t in self.results or t in self.sizes.values or t in arrays:
            np.copyto(out, self.read(t, arrays))
            return
        b = self.schedule.home[t]
        self.backends[b].download_into(self.handles[b][t], out)

    def read(self, t: int, arrays: Mapping[int, Any]) -> Any:
        """Tensor ``t``'s contents after ``execute``: a new host array (a sequence: its list)
        (``arrays``: the inputs written, for a tensor that is one)."""
        if t in self.results:
            return self.results[t]
        if t in self.sizes.values:
            v = self.sizes.values[t]
            return list(v) if isinstance(v, list) else np.array(v)
        if t in arrays:
            v = arrays[t]
            if isinstance(v, DeviceTensor):
                return v.numpy()
            return list(v) if isinstance(v, list) else np.array(v)
        b = self.schedule.home[t]
        return self.backends[b].download(self.handles[b][t])

    def resident(self, t: int, arrays: Mapping[int, Any]) -> tuple[Backend | None, Any]:
        """Where tensor ``t`` lives after ``execute``: ``(backend, handle)`` of the backend
        that computed it, or ``(None, value)`` for one the backends do not hold (a value known
        at resize, a host step's result, an input passed through: its host value, ``read``)."""
        if t in self.results or t in self.sizes.values or t in arrays:
            return None, self.read(t, arrays)
        b = self.schedule.home[t]
        return self.backends[b], self.handles[b][t]


class Planner:
    """Plans ``graph`` on ``backends`` (preference order, CPU last). ``evaluate`` computes a
    small op at resize (``CPUBackend.evaluate``; see ``compute_sizes``); ``host(info)``
    gives the function that runs a dynamic op on the host (``HostStep.run``); ``budget``:
    the session's memory budget (default: one of ``limits.default_memory_limit()`` bytes).
    ``store``: the ``mnnpy.plan_cache.PlanStore`` of the backends' compilation cache, or None
    (no ``cache_dir``); ``index``: the graph's position in its ``Net`` (``None``: unknown)."""

    def __init__(
        self,
        graph: Graph,
        backends: list[Backend],
        evaluate: Evaluate,
        host: Callable[[OpInfo], Callable],
        budget: limits.MemoryBudget | None = None,
        placer=None,
        index: int | None = None,
    ):
        self.graph, self.placer = graph, placer
        self.backends = backends
        self.evaluate = evaluate
        self.host = host
        self.budget = budget or limits.MemoryBudget(limits.default_memory_limit())
        cache = getattr(getattr(backends[0], "config", None), "cache", None) if backends else None
        self.store = PlanStore(cache, graph, backends, placer, index) if cache is not None else None

    def infer(self, shapes: dict[int, tuple[int, ...]], values=None, start: int = 0, dtypes=None) -> SizeResult:
        """SizeComputer for these input shapes (tensor -> shape), within the budget's limit;
        raises ``ShapeError``."""
        current = limits.current()
        charge = (
            current if current is not None and current.budget is self.budget else self.budget.plan(f"graph '{self.graph.name}'")
        )
        with limits.planning(charge):
            return compute_sizes(self.graph, shapes, self.evaluate, values, start, dtypes)

    def schedule(self, sizes: SizeResult, infos: list[OpInfo] | None = None) -> Schedule:
        """The Schedule of ``sizes``' run-time ops (no memory, no Executions); ``placer``: AUTO's."""
        infos = infos if infos is not None else [sizes.op_info(i) for i in sizes.runtime_ops]
        exports, placer = self._exports(sizes), self.placer
        return build_schedule(infos, self.backends, placer and (lambda ops, opts: placer.place(ops, opts, sizes.mflops, exports)))

    def describe(self, shapes: dict[int, tuple[int, ...]]) -> Described:
        """The first segment's sizes and Schedule for inputs ``shapes``, for describing it:
        no memory is planned and no Execution created. Raises ``ShapeError``."""
        sizes = self.infer(shapes)
        return Described(sizes, self.schedule(sizes))

    def plan(self, key: tuple, shapes: dict[int, tuple[int, ...]], values=None, start: int = 0, dtypes=None) -> Plan:
        """The whole plan (module docstring) for inputs ``shapes``, known ``values`` of value
        inputs, from op ``start``; ``dtypes`` of inputs that are not graph inputs. Raises
        ``ShapeError`` (also for memory beyond the budget's limit: nothing is allocated
        then), ``UnsupportedOperatorError`` or a backend's error."""
        charge = self.budget.plan(f"graph '{self.graph.name}'")
        with limits.planning(charge):
            plan = self._plan(key, shapes, values, start, dtypes)
        charge.keep(plan)
        plan.device_bytes = dict(charge.by_backend)
        return plan

    def _plan(self, key: tuple, shapes: dict[int, tuple[int, ...]], values, start: int, dtypes) -> Plan:
        t = [time.perf_counter()]
        inputs, store = frozenset(shapes), self.store
        name = store.name(shapes, values, start, dtypes) if store is not None else None
        cached = store.load(name, shapes, values) if name is not None else None
        if cached is None:
            with limits.current().recording() as charges:
                sizes = self.infer(shapes, values, start, dtypes)
        else:
            sizes, schedule, layouts = cached
        sizes.freeze()
        infos = {i: sizes.op_info(i) for i in sizes.runtime_ops}
        exports = self._exports(sizes)
        t.append(time.perf_counter())
        if cached is None:
            schedule = self.schedule(sizes, list(infos.values()))
        t.append(time.perf_counter())
        for b in self.backends:
            b.on_resize_begin()
        if cached is None:
            layouts = self._layouts(sizes, schedule, inputs, exports)
        memory, handles = self._allocate(sizes, layouts)
        t.append(time.perf_counter())
        transfers = self._transfers(schedule, handles, sizes, inputs, exports)
        readers = self.graph.consumers()
        steps = [
            self._step(part, infos, handles, schedule, *io, self._private(part, readers, exports))
            for part, io in zip(schedule.partitions, transfers)
        ]
        for b in self.backends:
            b.on_resize_end()
        t.append(time.perf_counter())
        _log.info("resized %s", lazy(_resize_line, self, shapes, start, t, memory, schedule, cached is not None))
        if name is not None and cached is None:
            store.save(name, sizes, schedule, layouts, charges, values)
        executions = {i: exe for step in steps for i, exe in zip(step.ops, step.executions)}
        host = None
        if sizes.dynamic is not None:
            info = sizes.op_info(sizes.dynamic)
            host = HostStep(info, self.host(info))
        return Plan(key, start, inputs, exports, sizes, schedule, self.backends, memory, handles, executions, steps, host)

    def _exports(self, sizes: SizeResult) -> frozenset:
        """Tensors read after this segment's partitions: graph outputs, the inputs of ops from
        the barrier on and of its host step (constants aside), and the host step's outputs
        that are graph outputs or read later."""
        g = self.graph
        later = set(g.outputs)
        if sizes.barrier is not None:
            later.update(t for op in g.ops[sizes.barrier :] for t in op.inputs if t >= 0)
        made = set()
        if sizes.dynamic is not None:
            later.update(t for t in g.ops[sizes.dynamic].inputs if t >= 0)
            made = {t for t in g.ops[sizes.dynamic].outputs if t >= 0}
        return frozenset(t for t in later if (t in sizes.shapes or t in made) and g.tensors[t].data is None)

    def _layouts(self, sizes: SizeResult, schedule: Schedule, inputs, exports) -> list[Layout]:
        """Lifetimes per backend -> arena offsets (``plan_memory``) -> each backend's ``Layout``."""
        held = tensor_lifetimes(
            self.graph, schedule, set(sizes.values), inputs, exports, lambda b, op: self.backends[b].can_alias(op)
        )
        return [layout(h, plan_memory(h.lifetimes(lambda t: sizes.tensor(t).nbytes))) for h in held]

    def _allocate(self, sizes: SizeResult, layouts: list[Layout]) -> tuple[list[MemoryPlan], list[dict]]:
        """Every backend's arena and one handle per tensor it holds (``Backend.acquire`` at its
        offset, ``acquire_constant``). The arenas are charged (their sum) before the first is
        allocated."""
        memory = [lay.memory for lay in layouts]
        arenas = [(b.name, m.arena_bytes) for b, m in zip(self.backends, memory) if m.arena_bytes]
        if arenas:
            listed = " + ".join(f"{name} {limits.gib(n)}" for name, n in arenas)
            limits.charge(sum(n for _, n in arenas), f"the arenas of the memory plan ({listed})")
            for name, n in arenas:
                limits.attribute(name, n)
        handles = []
        for backend, lay in zip(self.backends, layouts):
            backend.allocate_arena(lay.memory.arena_bytes)
            handle = {t: backend.acquire(sizes.tensor(t), offset) for t, offset in lay.placed}
            handle.update((t, backend.acquire_constant(sizes.tensor(t))) for t in lay.constants)
            handles.append(handle)
        return memory, handles

    def _transfers(self, schedule: Schedule, handles, sizes: SizeResult, inputs, exports) -> list[tuple[list, list]]:
        """Per partition, ``(uploaded, downloaded)`` tensors, as a run moves them: the plan's
        inputs are uploaded to every backend holding them before the first op (announced with
        that backend's first partition), border tensors into the partition that copies them
        in; a tensor is downloaded after the partition that produces it when another backend
        copies it in or the plan exports it (graph outputs, later segments)."""
        g = self.graph
        copied = {t for p in schedule.partitions for t in p.copies_in}
        seen: set[int] = set()
        out = []
        for part in schedule.partitions:
            h = handles[part.backend]
            ups = []
            if part.backend not in seen:
                seen.add(part.backend)
                ups = [t for t in sorted(inputs) if t in h and t not in sizes.values]
            ups += [t for t in part.copies_in if t not in ups]
            made = [t for i in part.ops for t in g.ops[i].outputs if t >= 0]
            downs = [t for t in dict.fromkeys(made) if t in h and t not in sizes.values and (t in copied or t in exports)]
            out.append((ups, downs))
        return out

    def _private(self, part: Partition, readers: dict[int, list[int]], exports) -> frozenset:
        """``PartitionStep.private`` of ``part``: tensors it makes with one reader, in ``part``."""
        ops = set(part.ops)
        made = (t for i in part.ops for t in self.graph.ops[i].outputs if t >= 0)
        return frozenset(t for t in made if t not in exports and len(readers.get(t, ())) == 1 and readers[t][0] in ops)

    def _step(
        self, part: Partition, infos: dict[int, OpInfo], handles, schedule: Schedule, ups, downs, private=frozenset()
    ) -> PartitionStep:
        """The partition's copies and Executions (each ``on_resize``d), announced to its backend."""
        backend, h = self.backends[part.backend], handles[part.backend]
        copies = [(self.backends[schedule.home[t]], handles[schedule.home[t]][t], h[t]) for t in part.copies_in]
        runs = []
        charge, ops = limits.current(), self.graph.ops
        before = charge.where  # each op names itself in the charge's messages while it is prepared (PlanCharge.where)
        try:
            for i in part.ops:
                op, info = ops[i], infos[i]
                charge.where = functools.partial(_op_where, op, info, backend.name)
                exe = backend.create_execution(info)
                ins = [h[t] if t >= 0 else None for t in op.inputs]
                outs = [h[t] if t >= 0 else None for t in op.outputs]
                exe.on_resize(ins, outs)
                runs.append((exe, ins, outs))
        finally:
            charge.where = before
        step = PartitionStep(backend, list(part.ops), copies, runs, [h[t] for t in ups], [h[t] for t in downs], private=private)
        backend.on_resize_partition(step)
        return step


def _op_where(op, info: OpInfo, backend: str) -> str:
    """An op being prepared, as memory-limit messages name it."""
    shapes = [t.shape if t is not None else None for t in info.inputs]
    return f"{op.type} '{op.name}' with input shapes {shapes} on {backend}"


def _resize_line(
    planner: Planner, shapes: dict, start: int, t: list[float], memory: list[MemoryPlan], schedule: Schedule, cached: bool
) -> str:
    """The resize log line: input shapes, segment start, ms per step (``cached``: sizes, schedule
    and memory layout loaded from the compilation cache, the load counted as sizes),
    partitions, arena bytes."""
    ms = [(b - a) * 1e3 for a, b in zip(t, t[1:])]
    named = {planner.graph.tensors[k].name: s for k, s in shapes.items()}
    arenas = ", ".join(f"{b.name} {m.arena_bytes} bytes" for b, m in zip(planner.backends, memory))
    return (
        f"{named} from op {start} in {sum(ms):.1f} ms (sizes {ms[0]:.1f}, schedule {ms[1]:.1f}, memory {ms[2]:.1f}, "
        f"executions {ms[3]:.1f}{'; plan from the compilation cache' if cached else ''}); "
        f"{len(schedule.partitions)} partitions; arenas: {arenas}"
    )

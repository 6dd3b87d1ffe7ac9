"""Session: a model prepared on an ordered list of backends; ``resize`` plans, ``run`` computes.

Resize (once per distinct set of input shapes; the last ``RESIZE_CACHE`` are kept):
SizeComputer -> Schedule -> memory plan per backend (one arena each) -> one
Execution per op, ``on_resize``. Run: copy inputs in, ``on_execute`` each op, copy
partition borders, copy outputs out. Nothing is allocated for intermediate tensors.
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnnpy.backend import Backend, Execution, TensorInfo
from mnnpy.errors import InputError, ShapeError
from mnnpy.ir import Graph, Net
from mnnpy.memory_planner import Lifetime, MemoryPlan, plan_memory
from mnnpy.ops import get_schema
from mnnpy.schedule import Schedule, build_schedule, merge_schedules
from mnnpy.size_computer import SizeResult, compute_sizes, value_inputs

RESIZE_CACHE = 4
MAX_VALUE_INPUT = 1 << 16  # elements of an input whose contents decide shapes


@dataclass(frozen=True)
class IODesc:
    """A graph input or output: name, shape (ints for fixed dims, str/None for dynamic), dtype."""

    name: str
    shape: tuple[int | str | None, ...] | None
    dtype: np.dtype


@dataclass
class _Plan:
    """One planned segment: ops from ``start`` up to ``sizes.barrier`` (or the end).

    ``inputs`` are the tensors it receives at run (graph inputs, or for a later segment
    what earlier ones computed); ``exports`` what later segments or the outputs need.
    """

    key: tuple
    start: int
    inputs: frozenset
    exports: frozenset
    sizes: SizeResult
    schedule: Schedule
    memory: list[MemoryPlan]
    handles: list[dict[int, Any]]
    executions: dict[int, Execution]
    steps: list[tuple[int, list[tuple[int, Any, Any]], list[tuple[Execution, list, list]]]] = field(default_factory=list)


class Session:
    """A model prepared for ``run`` on ``backends`` (preference order, CPU last).

    Created by ``Interpreter.create_session``. Not thread-safe: one run at a time.
    """

    def __init__(self, net: Net, backends: list[Backend]):
        self.net = net
        self.graph: Graph = net.main
        self.backends = backends
        self._cpu = next(b for b in backends if b.name == "cpu")
        self._attrs = [get_schema(op.type).resolve_attrs(op.attrs, f"op '{op.name}'") for op in self.graph.ops]
        self._plans: OrderedDict[tuple, _Plan] = OrderedDict()
        self._plan: _Plan | None = None
        self._lock = threading.Lock()
        g = self.graph
        self._input_index = {g.tensors[t].name: t for t in g.inputs}
        self._value_inputs = sorted(value_inputs(g))
        self.resize_count = 0
        self._output_shapes: dict[str, tuple[int, ...]] | None = None
        self._segments: list[_Plan] = []  # the plans the last run went through, in order

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
        return IODesc(d.name, d.shape, d.dtype)

    @property
    def output_shapes(self) -> dict[str, tuple[int, ...]]:
        """Output shapes of the last run (data-dependent ones as computed), else of the last
        resize; raises ``InputError`` before either."""
        if self._output_shapes is not None:
            return dict(self._output_shapes)
        if self._plan is None or self._plan.sizes.barrier is not None:
            raise InputError("no run yet: output shapes are known after run() (or resize() for static shapes)")
        return {self.graph.tensors[t].name: self._plan.sizes.shapes[t] for t in self.graph.outputs}

    def partitions(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule, printed: a summary line, each partition with its ops, and why each op
        that fell back did (``mnnpy info --partitions``).

        ``shapes`` (input name -> shape): the schedule for those input shapes, computed
        without planning memory or creating Executions. Without it: the schedule of the last
        run (every segment of a model whose shapes depend on computed values) or resize, or
        before either, that of the declared shapes with every dynamic dim set to 1."""
        return self._schedule(shapes).describe(self.graph) + self._unscheduled_note(shapes)

    def dot(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule (see ``partitions``) as Graphviz text: ops coloured by backend,
        copies dashed, fallback reasons as tooltips (``mnnpy info --dot``)."""
        from mnnpy.schedule import to_dot

        return to_dot(self._schedule(shapes), self.graph)

    def _schedule(self, shapes) -> Schedule:
        if shapes is not None:
            return self._schedule_only(shapes)[0]
        if self._segments:
            return merge_schedules([p.schedule for p in self._segments])
        if self._plan is not None:
            return self._plan.schedule
        return self._schedule_only(self._default_shapes())[0]

    def _unscheduled_note(self, shapes) -> str:
        if shapes is None and (self._segments or self._plan is not None):
            barrier = (self._segments or [self._plan])[-1].sizes.barrier
        else:
            barrier = self._schedule_only(shapes if shapes is not None else self._default_shapes())[1]
        if barrier is None:
            return ""
        op = self.graph.ops[barrier]
        return f"\nops from {op.type} '{op.name}' on are scheduled at run time (their shapes depend on computed values)"

    def _schedule_only(self, shapes: Mapping[str, tuple[int, ...]]) -> tuple[Schedule, int | None]:
        """(Schedule of the first segment for ``shapes``, the op index where shapes become
        data-dependent or None): sizes and placement only, no memory, no Executions."""
        checked = self._check_shapes(shapes)
        g = self.graph
        try:
            sizes = compute_sizes(g, checked, self._attrs, self._evaluate, {}, 0, {})
        except ShapeError as e:
            raise ShapeError(f"input shapes {self._named(checked)}: {e}") from None
        infos = {t: TensorInfo(t, g.tensors[t].name, sizes.shapes[t], sizes.dtypes[t], sizes.values.get(t)) for t in sizes.shapes}
        return build_schedule(g, sizes.runtime_ops, self.backends, infos, self._attrs), sizes.barrier

    def _default_shapes(self) -> dict[str, tuple[int, ...]]:
        """Declared input shapes with every dynamic dim set to 1 (for describing before a resize)."""
        return {d.name: tuple(s if isinstance(s, int) and s >= 0 else 1 for s in (d.shape or ())) for d in self.inputs}

    # -- resize -------------------------------------------------------------------------
    def resize(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        """Plan for these input shapes (name -> shape). Raises ``InputError``/``ShapeError``.

        A model whose shapes depend on the *contents* of some inputs (``value_inputs``, e.g.
        a Reshape's target shape fed as an input) is only checked here: it is planned at
        ``run``, when those contents are known.
        """
        with self._lock:
            checked = self._check_shapes(shapes)
            if not self._value_inputs:
                self._plan = self._get_plan(checked)
                self._segments = []
                self._output_shapes = None

    @property
    def value_inputs(self) -> list[str]:
        """Names of the inputs whose contents (not only shapes) shape the plan."""
        return [self.graph.tensors[t].name for t in self._value_inputs]

    def _check_shapes(self, shapes: Mapping[str, Any]) -> dict[int, tuple[int, ...]]:
        if not isinstance(shapes, Mapping):
            raise InputError(f"resize() takes a dict of input name -> shape, got {type(shapes).__name__}")
        self._check_names(shapes)
        out = {}
        for name, shape in shapes.items():
            t = self._input_index[name]
            declared = self.graph.tensors[t].shape
            if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
                raise InputError(f"input '{name}': shape must be a sequence of ints, got {shape!r}")
            shape = tuple(shape)
            if not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in shape):
                raise InputError(f"input '{name}': shape must be a sequence of ints, got {shape!r}")
            shape = tuple(int(d) for d in shape)
            if declared is not None:
                if len(shape) != len(declared):
                    raise InputError(
                        f"input '{name}': rank {len(shape)} {shape}, expected rank {len(declared)} {tuple(declared)}"
                    )
                for i, (got, want) in enumerate(zip(shape, declared)):
                    if isinstance(want, int) and want >= 0 and got != want:
                        raise InputError(f"input '{name}': dim {i} is {got}, expected {want} (shape {tuple(declared)})")
            if any(d < 0 for d in shape):
                raise InputError(f"input '{name}': negative dim in {shape}")
            out[t] = shape
        return out

    def _get_plan(
        self,
        shapes: dict[int, tuple[int, ...]],
        values: dict[int, np.ndarray] | None = None,
        start: int = 0,
        dtypes: dict[int, np.dtype] | None = None,
    ) -> _Plan:
        key = (start, *self._plan_key(shapes, values))
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        try:
            plan = self._build_plan(shapes, values or {}, start, dtypes or {})
        except ShapeError as e:
            raise ShapeError(f"input shapes {self._named(shapes)}: {e}") from None
        except MemoryError as e:
            raise ShapeError(f"input shapes {self._named(shapes)} need more memory than this machine has: {e}") from None
        self._plans[key] = plan
        while len(self._plans) > RESIZE_CACHE:
            self._plans.popitem(last=False)
        self.resize_count += 1
        return plan

    @staticmethod
    def _plan_key(shapes: dict[int, tuple[int, ...]], values: dict[int, np.ndarray] | None) -> tuple:
        """Plans are cached by input shapes and the contents of the value inputs."""
        contents = tuple((t, v.dtype.str, v.tobytes()) for t, v in sorted((values or {}).items()))
        return tuple(sorted(shapes.items())), contents

    def _named(self, shapes: dict[int, tuple]) -> dict[str, tuple]:
        return {self.graph.tensors[t].name: s for t, s in shapes.items()}

    def _build_plan(self, shapes, values, start: int, dtypes) -> _Plan:
        g = self.graph
        sizes = compute_sizes(g, shapes, self._attrs, self._evaluate, values, start, dtypes)
        infos = {t: TensorInfo(t, g.tensors[t].name, sizes.shapes[t], sizes.dtypes[t], sizes.values.get(t)) for t in sizes.shapes}
        schedule = build_schedule(g, sizes.runtime_ops, self.backends, infos, self._attrs)
        inputs = frozenset(shapes)
        later = set(g.outputs)
        if sizes.barrier is not None:
            later.update(t for op in g.ops[sizes.barrier :] for t in op.inputs if t >= 0)
        exports = frozenset(t for t in later if t in sizes.shapes and g.tensors[t].data is None)
        for b in self.backends:
            b.on_resize_begin()
        memory, handles = self._plan_memory(sizes, schedule, infos, inputs, exports)
        executions: dict[int, Execution] = {}
        steps = []
        transfers = self._transfers(schedule, handles, sizes, inputs, exports)
        for part, (ups, downs) in zip(schedule.partitions, transfers):
            backend = self.backends[part.backend]
            h = handles[part.backend]
            backend.on_resize_partition([h[t] for t in ups], [h[t] for t in downs])
            copies = [(t, handles[self._home(schedule, t)][t], h[t]) for t in part.copies_in]
            runs = []
            for i in part.ops:
                op = g.ops[i]
                ins = [infos[t] if t >= 0 else None for t in op.inputs]
                outs = [infos[t] if t >= 0 else None for t in op.outputs]
                exe = backend.create_execution(op, self._attrs[i], ins, outs)
                in_h = [h[t] if t >= 0 else None for t in op.inputs]
                out_h = [h[t] if t >= 0 else None for t in op.outputs]
                exe.on_resize(in_h, out_h)
                executions[i] = exe
                runs.append((exe, in_h, out_h))
            steps.append((part.backend, copies, runs))
        for b in self.backends:
            b.on_resize_end()
        key = (start, *self._plan_key(shapes, values))
        return _Plan(key, start, inputs, exports, sizes, schedule, memory, handles, executions, steps)

    def _transfers(self, schedule: Schedule, handles, sizes: SizeResult, inputs, exports) -> list[tuple[list[int], list[int]]]:
        """Per partition, ``(uploaded, downloaded)`` tensors, as ``run`` moves them: the plan's
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

    def _home(self, schedule: Schedule, t: int) -> int:
        for i in reversed(range(len(self.graph.ops))):
            if t in self.graph.ops[i].outputs and i in schedule.backend_of:
                return schedule.backend_of[i]
        raise AssertionError(f"tensor {t} has no producer")

    def _plan_memory(self, sizes: SizeResult, schedule: Schedule, infos: dict[int, TensorInfo], inputs, exports):
        """Lifetimes per backend (in step units) -> arena offsets -> tensor handles.

        ``inputs`` are written before the first op; ``exports`` live to the segment's end."""
        g = self.graph
        n_b = len(self.backends)
        first: list[dict[int, int]] = [dict() for _ in range(n_b)]
        last: list[dict[int, int]] = [dict() for _ in range(n_b)]
        alias: list[dict[int, int]] = [dict() for _ in range(n_b)]
        constants: list[set[int]] = [set() for _ in range(n_b)]  # known at resize, read on that backend
        end = len(g.ops) + 1

        def touch(b, t, step):
            first[b].setdefault(t, step)
            last[b][t] = max(last[b].get(t, step), step)

        for part in schedule.partitions:
            b = part.backend
            start = part.ops[0]
            for t in part.copies_in:
                touch(self._home(schedule, t), t, start)
                touch(b, t, start)
            for i in part.ops:
                op = g.ops[i]
                constants[b].update(t for t in op.inputs if t in sizes.values)
                for t in op.inputs:
                    if t >= 0 and t not in sizes.values:
                        if t in inputs:
                            touch(b, t, -1)  # written by run() before the first op
                        touch(b, t, i)
                for t in op.outputs:
                    if t >= 0:
                        touch(b, t, i)
                schema = get_schema(op.type)
                src = op.inputs[schema.alias] if schema.alias is not None else -1
                if src >= 0 and src not in sizes.values and op.outputs[0] >= 0 and self.backends[b].can_alias(op):
                    alias[b][op.outputs[0]] = src
        for t in exports:
            if t not in sizes.values:
                for b in range(n_b):
                    if t in first[b]:
                        touch(b, t, end)
        memory, handles = [], []
        for b, backend in enumerate(self.backends):

            def root(t, b=b):
                while t in alias[b]:
                    t = alias[b][t]
                return t

            spans: dict[int, list[int]] = {}
            for t in first[b]:
                r = root(t)
                s = spans.setdefault(r, [first[b][t], last[b][t], infos[r].nbytes])
                s[0], s[1] = min(s[0], first[b][t]), max(s[1], last[b][t])
            plan = plan_memory([Lifetime(r, s[2], s[0], s[1]) for r, s in spans.items()])
            backend.allocate_arena(plan.arena_bytes)
            h = {t: backend.acquire(infos[t], plan.offsets[root(t)]) for t in first[b]}
            for t in constants[b]:
                h[t] = backend.acquire_constant(infos[t])
            memory.append(plan)
            handles.append(h)
        return memory, handles

    def _evaluate(self, op_index: int, attrs: dict, values: list, specs: list) -> list[np.ndarray]:
        """Compute one small op at resize on the CPU backend (see SizeComputer)."""
        op = self.graph.ops[op_index]
        return self._cpu.evaluate(op, attrs, values, specs)

    # -- run ----------------------------------------------------------------------------
    def run(self, feeds: Mapping[str, Any], output_names: list[str] | None = None) -> dict[str, np.ndarray]:
        """Compute the outputs for ``feeds`` (input name -> array-like).

        Returns output name -> new ndarray. Resizes first when the input shapes differ
        from the last run's. Raises ``InputError`` (wrong name, missing input, wrong
        rank/dtype/shape) or ``ShapeError`` (shapes the model cannot take).
        """
        arrays = self._check_feeds(feeds)
        wanted = self._wanted_outputs(output_names)
        with self._lock:
            shapes = {t: a.shape for t, a in arrays.items()}
            values = self._values_of(arrays)
            plan = self._plan
            if plan is None or plan.key != (0, *self._plan_key(shapes, values)):
                checked = self._check_shapes({self.graph.tensors[t].name: s for t, s in shapes.items()})
                plan = self._plan = self._get_plan(checked, values)
            self._segments = [plan]
            results: dict[int, np.ndarray] = {}
            while True:
                for t, a in arrays.items():
                    for b, h in enumerate(plan.handles):
                        if t in h and t not in plan.sizes.values:
                            self.backends[b].upload(a, h[t])
                with np.errstate(all="ignore"):  # NaN/inf propagate silently, as in onnxruntime
                    self._execute(plan)
                for t in wanted:
                    if t not in results and t in plan.sizes.shapes:
                        results[t] = self._fetch(plan, t, arrays)
                if plan.sizes.barrier is None:
                    break
                plan, arrays = self._next_segment(plan, arrays)
                self._segments.append(plan)
            self._output_shapes = {self.graph.tensors[t].name: results[t].shape for t in wanted}
            return {self.graph.tensors[t].name: results[t] for t in wanted}

    def _next_segment(self, plan: _Plan, arrays: dict[int, np.ndarray]) -> tuple[_Plan, dict[int, np.ndarray]]:
        """After a data-dependent barrier: the rest of the graph, resized with the values just
        computed (what the earlier segment exports becomes this segment's inputs)."""
        g = self.graph
        crossing = {t: self._fetch(plan, t, arrays) for t in plan.exports}
        needed = {
            op.inputs[k]
            for op in g.ops[plan.sizes.barrier :]
            for k in get_schema(op.type).value_inputs(len(op.inputs))
            if op.inputs[k] >= 0
        }
        values = {t: a for t, a in crossing.items() if t in needed or t in plan.sizes.values}
        shapes = {t: a.shape for t, a in crossing.items()}
        dtypes = {t: a.dtype for t, a in crossing.items()}
        nxt = self._get_plan(shapes, values, plan.sizes.barrier, dtypes)
        if nxt.sizes.barrier == plan.sizes.barrier:  # cannot happen: every value it needs is known now
            op = g.ops[plan.sizes.barrier]
            raise ShapeError(f"{op.type} '{op.name}': its value inputs are still unknown after the ops before it ran")
        return nxt, crossing

    def _fetch(self, plan: _Plan, t: int, arrays: dict[int, np.ndarray]) -> np.ndarray:
        """A new array with tensor ``t``'s contents after ``plan`` ran."""
        if t in plan.sizes.values:
            return np.array(plan.sizes.values[t])
        if t in arrays:
            return np.array(arrays[t])
        b = self._home(plan.schedule, t)
        return self.backends[b].download(plan.handles[b][t])

    def _values_of(self, arrays: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Copies of the value inputs' contents, which key the plan. Inputs larger than
        ``MAX_VALUE_INPUT`` elements are left out: the ops that need them then start a new
        segment, resized at run once the values are there."""
        return {t: np.array(arrays[t]) for t in self._value_inputs if arrays[t].size <= MAX_VALUE_INPUT}

    def _execute(self, plan: _Plan) -> None:
        """Every partition in order: border copies in, then each Execution's ``on_execute``."""
        for b, copies, runs in plan.steps:
            backend = self.backends[b]
            backend.on_execute_begin()
            try:
                for t, src, dst in copies:
                    backend.upload(self.backends[self._home(plan.schedule, t)].download(src), dst)
                for exe, ins, outs in runs:
                    exe.on_execute(ins, outs)
            finally:
                backend.on_execute_end()

    def _wanted_outputs(self, output_names) -> list[int]:
        g = self.graph
        if output_names is None:
            return list(g.outputs)
        names = {g.tensors[t].name: t for t in g.outputs}
        bad = [n for n in output_names if n not in names]
        if bad:
            raise InputError(f"unknown output name(s) {bad}; the model's outputs are {list(names)}")
        return [names[n] for n in output_names]

    def _check_feeds(self, feeds: Mapping[str, Any]) -> dict[int, np.ndarray]:
        if not isinstance(feeds, Mapping):
            raise InputError(f"run() takes a dict of input name -> array, got {type(feeds).__name__}")
        self._check_names(feeds)
        out = {}
        for name, value in feeds.items():
            t = self._input_index[name]
            want = self.graph.tensors[t].dtype
            if isinstance(value, np.ndarray):
                if value.dtype != want:
                    raise InputError(f"input '{name}': dtype {value.dtype}, expected {want}")
                out[t] = value
                continue
            # Python scalars and (nested) lists take the input's dtype, as numpy would cast them
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error", RuntimeWarning)
                    a = np.asarray(value, dtype=want)
            except (ValueError, TypeError, OverflowError, RuntimeWarning) as e:
                raise InputError(f"input '{name}': cannot make a {want} array of {type(value).__name__}: {e}") from None
            out[t] = a
        return out

    def _check_names(self, feeds: Mapping[str, Any]) -> None:
        unknown = [n for n in feeds if n not in self._input_index]
        if unknown:
            raise InputError(f"unknown input name(s) {unknown}; the model's inputs are {list(self._input_index)}")
        missing = [n for n in self._input_index if n not in feeds]
        if missing:
            raise InputError(f"missing input(s) {missing}; the model's inputs are {list(self._input_index)}")

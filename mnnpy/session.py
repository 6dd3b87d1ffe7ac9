"""Session: a model prepared on an ordered list of backends; ``resize`` plans, ``run`` computes.

Resize (once per distinct set of input shapes; the last ``RESIZE_CACHE`` plans are kept)
is the ``Planner``'s: SizeComputer -> Schedule -> memory plan per backend (one arena
each) -> one Execution per op, ``on_resize``. Run (one NNAPI execution): write the inputs,
execute each partition (border copies, then its Executions), read the outputs. Nothing is
allocated for intermediate tensors. The Session owns the public API, input validation,
the plan cache, the run loop and the segments of models whose shapes depend on values.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.errors import InputError, ShapeError
from mnnpy.io_desc import IODesc
from mnnpy.ir import Graph, Net
from mnnpy.ops import get_schema
from mnnpy.planner import Plan, Planner
from mnnpy.schedule import Schedule, merge_schedules
from mnnpy.size_computer import value_inputs

RESIZE_CACHE = 4
MAX_VALUE_INPUT = 1 << 16  # elements of an input whose contents decide shapes


class Session:
    """A model prepared for ``run`` on ``backends`` (preference order, CPU last).

    Created by ``Interpreter.create_session``. Threads: a Session may be shared by threads;
    ``run`` and ``resize`` hold one lock per Session, so its runs happen one at a time (the
    plan, its arenas and the backends' staging are reused by every run). Input validation
    happens before the lock. For runs in parallel, create one Session per thread.
    """

    def __init__(self, net: Net, backends: list[Backend]):
        self.net = net
        self.graph: Graph = net.main
        self.backends = backends
        cpu = next(b for b in backends if b.name == "cpu")
        self.planner = Planner(self.graph, backends, cpu.evaluate)
        self._plans: OrderedDict[tuple, Plan] = OrderedDict()
        self._plan: Plan | None = None
        self._lock = threading.Lock()
        g = self.graph
        self._input_index = {g.tensors[t].name: t for t in g.inputs}
        self._input_desc = {t: self._desc(t) for t in g.inputs}
        self._value_inputs = sorted(value_inputs(g))
        self.resize_count = 0
        self._output_shapes: dict[str, tuple[int, ...]] | None = None
        self._segments: list[Plan] = []  # the plans the last run went through, in order

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

    def op_mflops(self) -> list[tuple[str, str, float]]:
        """``(op name, op type, MFLOPs)`` of every op that runs, in order, for the shapes of the
        last run (every segment) or resize (the schemas' FLOPs rules, ``mnnpy.ops.flops``);
        ops computed at resize are left out. Raises ``InputError`` before either."""
        plans = self._segments or ([self._plan] if self._plan is not None else [])
        if not plans:
            raise InputError("no run yet: FLOPs are known after run() (or resize() for static shapes)")
        ops = self.graph.ops
        return [(ops[i].name, ops[i].type, p.sizes.mflops[i]) for p in plans for i in p.sizes.runtime_ops]

    def partitions(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule, printed: a summary line, each partition with its ops, and why each op
        that fell back did (``mnnpy info --partitions``).

        ``shapes`` (input name -> shape): the schedule for those input shapes, computed
        without planning memory or creating Executions. Without it: the schedule of the last
        run (every segment of a model whose shapes depend on computed values) or resize, or
        before either, that of the declared shapes with every dynamic dim set to 1."""
        schedule, barrier = self._described(shapes)
        note = ""
        if barrier is not None:
            op = self.graph.ops[barrier]
            note = f"\nops from {op.type} '{op.name}' on are scheduled at run time (their shapes depend on computed values)"
        return schedule.describe(self.graph) + note

    def dot(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule (see ``partitions``) as Graphviz text: ops coloured by backend,
        copies dashed, fallback reasons as tooltips (``mnnpy info --dot``)."""
        from mnnpy.schedule import to_dot

        return to_dot(self._described(shapes)[0], self.graph)

    def _described(self, shapes) -> tuple[Schedule, int | None]:
        """(Schedule, op index where shapes become data-dependent or None) for ``partitions``:
        of ``shapes`` (sizes and placement only, no memory, no Executions), else of the last
        run's segments or resize, else of the declared shapes (dynamic dims 1)."""
        if shapes is None and (self._segments or self._plan is not None):
            plans = self._segments or [self._plan]
            return merge_schedules([p.schedule for p in plans]), plans[-1].sizes.barrier
        if shapes is None:
            shapes = {d.name: tuple(s if isinstance(s, int) and s >= 0 else 1 for s in (d.shape or ())) for d in self.inputs}
        checked = self._check_shapes(shapes)
        try:
            sizes = self.planner.infer(checked)
        except ShapeError as e:
            raise ShapeError(f"input shapes {self._named(checked)}: {e}") from None
        return self.planner.schedule(sizes), sizes.barrier

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
        return {self._input_index[n]: self._input_desc[self._input_index[n]].check_shape(s) for n, s in shapes.items()}

    def _get_plan(
        self,
        shapes: dict[int, tuple[int, ...]],
        values: dict[int, np.ndarray] | None = None,
        start: int = 0,
        dtypes: dict[int, np.dtype] | None = None,
    ) -> Plan:
        key = (start, *self._plan_key(shapes, values))
        plan = self._plans.get(key)
        if plan is not None:
            self._plans.move_to_end(key)
            return plan
        try:
            plan = self.planner.plan(key, shapes, values or {}, start, dtypes or {})
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
                plan.write(arrays)
                with np.errstate(all="ignore"):  # NaN/inf propagate silently, as in onnxruntime
                    plan.execute()
                for t in wanted:
                    if t not in results and t in plan.sizes.shapes:
                        results[t] = plan.read(t, arrays)
                if plan.sizes.barrier is None:
                    break
                plan, arrays = self._next_segment(plan, arrays)
                self._segments.append(plan)
            self._output_shapes = {self.graph.tensors[t].name: results[t].shape for t in wanted}
            return {self.graph.tensors[t].name: results[t] for t in wanted}

    def _next_segment(self, plan: Plan, arrays: dict[int, np.ndarray]) -> tuple[Plan, dict[int, np.ndarray]]:
        """After a data-dependent barrier: the rest of the graph, resized with the values just
        computed (what the earlier segment exports becomes this segment's inputs)."""
        g = self.graph
        crossing = {t: plan.read(t, arrays) for t in plan.exports}
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

    def _values_of(self, arrays: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
        """Copies of the value inputs' contents, which key the plan. Inputs larger than
        ``MAX_VALUE_INPUT`` elements are left out: the ops that need them then start a new
        segment, resized at run once the values are there."""
        return {t: np.array(arrays[t]) for t in self._value_inputs if arrays[t].size <= MAX_VALUE_INPUT}

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
        return {self._input_index[n]: self._input_desc[self._input_index[n]].array(v) for n, v in feeds.items()}

    def _check_names(self, feeds: Mapping[str, Any]) -> None:
        unknown = [n for n in feeds if n not in self._input_index]
        if unknown:
            raise InputError(f"unknown input name(s) {unknown}; the model's inputs are {list(self._input_index)}")
        missing = [n for n in self._input_index if n not in feeds]
        if missing:
            raise InputError(f"missing input(s) {missing}; the model's inputs are {list(self._input_index)}")

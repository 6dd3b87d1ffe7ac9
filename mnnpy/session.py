"""Session: a model prepared on an ordered list of backends; ``resize`` plans, ``run`` computes.

Resize (once per distinct set of input shapes; the last ``RESIZE_CACHE`` per segment are
kept) is the ``Planner``'s: SizeComputer -> Schedule -> memory plan per backend (one arena
each) -> one Execution per op, ``on_resize``. Run (one NNAPI execution): write the inputs,
execute each partition (border copies, then its Executions), read the outputs. Nothing is
allocated for intermediate tensors. The Session owns the public API and input validation;
its ``GraphRunner`` (``mnnpy.graph_runner``) the plan cache, the run loop and the segments
of models whose shapes depend on values or that hold control flow.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from mnnpy.backend import Backend
from mnnpy.errors import InputError, ShapeError
from mnnpy.exit_gate import GATE
from mnnpy.graph_runner import LOOP_TIMEOUT_S, MAX_LOOP_TIMEOUT_S, RESIZE_CACHE, GraphRunner, RunContext, shape_of
from mnnpy.io_desc import IODesc
from mnnpy.ir import Graph, Net
from mnnpy.limits import MemoryBudget, checked_limit

__all__ = ["RESIZE_CACHE", "Session"]


class Session:
    """A model prepared for ``run`` on ``backends`` (preference order, CPU last).

    Created by ``Interpreter.create_session``. ``memory_limit`` (bytes; default
    ``limits.default_memory_limit()``, a fraction of the memory available now): what its plans
    may hold together (``budget``), checked before anything is allocated. Threads: a Session may be shared by threads;
    ``run`` and ``resize`` hold one lock per Session, so its runs happen one at a time (the
    plan, its arenas and the backends' staging are reused by every run). Input validation
    happens before the lock. For runs in parallel, create one Session per thread. At
    interpreter exit, runs in flight on other threads finish first and no new one starts
    (``mnnpy.exit_gate``).
    """

    def __init__(self, net: Net, backends: list[Backend], memory_limit: int | None = None):
        self.net = net
        self.graph: Graph = net.main
        self.backends = backends
        self.budget = MemoryBudget(checked_limit(memory_limit))
        self.runner = GraphRunner(net, self.graph, backends, self.budget)
        self._lock = threading.Lock()
        g = self.graph
        self._input_index = {g.tensors[t].name: t for t in g.inputs}
        self._input_desc = {t: self._desc(t) for t in g.inputs}
        self._output_shapes: dict[str, tuple[int, ...]] | None = None

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
        return _mflops(self.runner, "")

    def partitions(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule, printed: a summary line, each partition with its ops, why each op
        that fell back did, and the ops run on the host (control flow, with their bodies'
        schedules once they ran) (``mnnpy info --partitions``).

        ``shapes`` (input name -> shape): the schedule for those input shapes, computed
        without planning memory or creating Executions. Without it: the schedule of the last
        run (every segment of a model whose shapes depend on computed values) or resize, or
        before either, that of the declared shapes with every dynamic dim set to 1."""
        from mnnpy.schedule_view import describe

        return describe(self.runner, self._described(shapes))

    def dot(self, shapes: Mapping[str, tuple[int, ...]] | None = None) -> str:
        """The Schedule (see ``partitions``) as Graphviz text: ops coloured by backend,
        copies dashed, fallback reasons as tooltips, host ops with their bodies as clusters
        (``mnnpy info --dot``)."""
        from mnnpy.schedule_view import to_dot

        return to_dot(self.runner, self._described(shapes))

    def _described(self, shapes) -> list:
        """The plans (or, for ``shapes``, one schedule-only plan stand-in) ``partitions``
        describes: of ``shapes`` (sizes and placement only, no memory, no Executions), else
        of the last run's segments or resize, else of the declared shapes (dynamic dims 1)."""
        runner = self.runner
        if shapes is None and (runner.segments or runner.plan is not None):
            return runner.segments or [runner.plan]
        if shapes is None:
            shapes = {d.name: tuple(s if isinstance(s, int) and s >= 0 else 1 for s in (d.shape or ())) for d in self.inputs}
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
            if not self.runner.value_inputs:
                self.runner.plan = self.runner.plan_for(checked)
                self.runner.segments = []
                self._output_shapes = None

    @property
    def value_inputs(self) -> list[str]:
        """Names of the inputs whose contents (not only shapes) shape the plan."""
        return [self.graph.tensors[t].name for t in self.runner.value_inputs]

    def _check_shapes(self, shapes: Mapping[str, Any]) -> dict[int, tuple[int, ...]]:
        if not isinstance(shapes, Mapping):
            raise InputError(f"resize() takes a dict of input name -> shape, got {type(shapes).__name__}")
        self._check_names(shapes, sequences_given=False)
        return {self._input_index[n]: self._input_desc[self._input_index[n]].check_shape(s) for n, s in shapes.items()}

    # -- run ----------------------------------------------------------------------------
    def run(
        self, feeds: Mapping[str, Any], output_names: list[str] | None = None, loop_timeout: float = LOOP_TIMEOUT_S
    ) -> dict[str, np.ndarray]:
        """Compute the outputs for ``feeds`` (input name -> array-like).

        Returns output name -> new ndarray (a list of ndarrays for a sequence output).
        Resizes first when the input shapes differ from the last run's. ``loop_timeout``
        (s, default 2, at most 15: NNAPI's): how long each Loop may run before
        ``LoopTimeoutError``. Raises ``InputError`` (wrong name, missing input, wrong
        rank/dtype/shape, a bad ``loop_timeout``), ``ShapeError`` (shapes the model cannot
        take, or memory beyond the session's limit; also when the machine runs out of memory
        during the run: NumPy's ``MemoryError``) or ``LoopTimeoutError``.
        """
        arrays = self._check_feeds(feeds)
        wanted = self._wanted_outputs(output_names)
        context = RunContext(_checked_timeout(loop_timeout))
        with GATE.entered(), self._lock:  # a run in flight at interpreter exit ends first (mnnpy.exit_gate)
            runner = self.runner
            key = runner.key(arrays)
            if runner.plan is None or runner.plan.key != key:
                self._check_shapes({self.graph.tensors[t].name: a.shape for t, a in arrays.items() if not isinstance(a, list)})
            try:
                results = runner.run(arrays, wanted, context, key)
            except MemoryError as e:
                shapes = {self.graph.tensors[t].name: shape_of(a) for t, a in arrays.items()}
                raise ShapeError(f"input shapes {shapes}: the run ran out of memory: {e or 'MemoryError'}") from None
            self._output_shapes = {self.graph.tensors[t].name: shape_of(results[t]) for t in wanted}
            return {self.graph.tensors[t].name: results[t] for t in wanted}

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

    def _check_names(self, feeds: Mapping[str, Any], sequences_given: bool = True) -> None:
        """Every name is an input, and every input is there (sequence inputs only where
        ``sequences_given``: a shape dict has none). Raises ``InputError``."""
        unknown = [n for n in feeds if n not in self._input_index]
        if unknown:
            raise InputError(f"unknown input name(s) {unknown}; the model's inputs are {list(self._input_index)}")
        desc = self._input_desc
        missing = [n for n, t in self._input_index.items() if n not in feeds and (sequences_given or desc[t].kind != "sequence")]
        if missing:
            raise InputError(f"missing input(s) {missing}; the model's inputs are {list(self._input_index)}")


def _mflops(runner: GraphRunner, prefix: str) -> list[tuple[str, str, float]]:
    """``Session.op_mflops`` of one runner's last plans, bodies nested under their op."""
    plans = runner.segments or ([runner.plan] if runner.plan is not None else [])
    ops, out = runner.graph.ops, []
    for p in plans:
        out += [(prefix + ops[i].name, ops[i].type, p.sizes.mflops[i]) for i in p.sizes.runtime_ops]
        if p.sizes.dynamic is not None:
            i = p.sizes.dynamic
            for (j, attr), body in runner.bodies().items():
                if j == i:
                    out += _mflops(body, f"{prefix}{ops[i].name}/{attr}/")
    return out


def _checked_timeout(seconds: Any) -> float:
    """``loop_timeout`` as a float in (0, ``MAX_LOOP_TIMEOUT_S``]; else ``InputError``."""
    if isinstance(seconds, (bool, np.bool_)) or not isinstance(seconds, numbers.Real) or not math.isfinite(seconds):
        raise InputError(f"loop_timeout must be a number of seconds, got {seconds!r}")
    if not 0 < seconds <= MAX_LOOP_TIMEOUT_S:
        raise InputError(f"loop_timeout must be in (0, {MAX_LOOP_TIMEOUT_S:g}] s (NNAPI's maximum), got {seconds}")
    return float(seconds)

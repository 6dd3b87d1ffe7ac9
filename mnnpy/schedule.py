"""Schedule: each run-time op assigned to a backend, consecutive ops grouped into partitions.

Rule (TFLite's delegate partitioning, onnxruntime's GetCapability): each op goes to
the first backend in the session's preference list that supports it for its dtypes,
attributes and shapes; the CPU backend is always last, as the fallback. For
``backend="auto"`` a chooser (``mnnpy.placement.AutoPlacer``) picks among the backends that
support each op, by the devices' capabilities and the copies at borders. Consecutive
ops on one backend form a partition; a tensor produced on one backend and read on
another is copied once, at the start of the reading partition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mnnpy.backend import Backend, OpInfo
from mnnpy.errors import UnsupportedOperatorError
from mnnpy.ir import Graph
from mnnpy.log import get_logger

_log = get_logger("schedule")
Chooser = Callable[[list[OpInfo], list[list[int]]], tuple[list[int], dict[int, str]]]


@dataclass
class Partition:
    """Ops (graph op indices, in order) that run on ``backend`` back to back.

    ``copies_in``: tensors copied onto this backend from another one before it runs.
    """

    backend: int
    ops: list[int] = field(default_factory=list)
    copies_in: list[int] = field(default_factory=list)


@dataclass
class Schedule:
    """Assignment of run-time ops (``backend_of``: op index -> backend index), partitions, why
    ops fell back, ``placement_reasons``: why AUTO placement put each op where it is (op index
    -> text, ``mnnpy.placement_report``), and ``home``: the backend index that produces each
    tensor an op computes."""

    backend_names: list[str]
    backend_of: dict[int, int] = field(default_factory=dict)
    partitions: list[Partition] = field(default_factory=list)
    fallback_reasons: dict[int, str] = field(default_factory=dict)
    placement_reasons: dict[int, str] = field(default_factory=dict)
    home: dict[int, int] = field(default_factory=dict)

    def describe(self, graph: Graph) -> str:
        """Human-readable listing: each partition, its ops, and reasons for fallbacks."""
        per_backend: dict[str, int] = {}
        for b in self.backend_of.values():
            per_backend[self.backend_names[b]] = per_backend.get(self.backend_names[b], 0) + 1
        copies = sum(len(p.copies_in) for p in self.partitions)
        summary = ", ".join(f"{n} ops on {name}" for name, n in per_backend.items())
        lines = [f"{len(self.partitions)} partitions ({summary}); {copies} tensors copied between backends"]
        for n, p in enumerate(self.partitions):
            lines.append(
                f"partition {n} on {self.backend_names[p.backend]}: {len(p.ops)} ops, {len(p.copies_in)} tensors copied in"
            )
            lines += [
                f"  placed: {why}"
                for why in dict.fromkeys(self.placement_reasons[i] for i in p.ops if i in self.placement_reasons)
            ]
            for i in p.ops:
                op = graph.ops[i]
                why = f"  (fell back: {self.fallback_reasons[i]})" if i in self.fallback_reasons else ""
                lines.append(f"  {op.type} '{op.name}'{why}")
        return "\n".join(lines)


def merge_schedules(schedules: list[Schedule]) -> Schedule:
    """One Schedule of consecutive segments' schedules (same backends): partitions in order."""
    if len(schedules) == 1:
        return schedules[0]
    out = Schedule(list(schedules[0].backend_names))
    for s in schedules:
        out.backend_of.update(s.backend_of)
        out.partitions += s.partitions
        out.fallback_reasons.update(s.fallback_reasons)
        out.placement_reasons.update(s.placement_reasons)
        out.home.update(s.home)
    return out


BACKEND_COLORS = {"cpu": "#d9d9d9", "opencl": "#9ecae1", "vulkan": "#fdae6b"}  # others: OTHER_COLOR
OTHER_COLOR = "#c7e9c0"


def quote_dot(text: str) -> str:
    """``text`` as a quoted Graphviz string (backslashes, quotes and newlines escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(schedule: Schedule, graph: Graph) -> str:
    """Graphviz (dot) text of the scheduled graph: one box per run-time op filled with its
    backend's colour (legend included), an edge per tensor from producer to consumer
    (dashed, labelled "copy", where it crosses backends), fallback reasons as tooltips
    and in the label."""
    producer = {t: i for i in schedule.backend_of for t in graph.ops[i].outputs if t >= 0}
    lines = ["digraph mnnpy {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", fontname="Helvetica"];']
    for n, name in enumerate(schedule.backend_names):
        color = BACKEND_COLORS.get(name, OTHER_COLOR)
        lines.append(f"  legend_{n} [label={quote_dot('backend ' + name)}, fillcolor={quote_dot(color)}, shape=note];")
    for i in schedule.backend_of:
        op = graph.ops[i]
        backend = schedule.backend_names[schedule.backend_of[i]]
        label = f"{op.type}\n{op.name}"
        extra = ""
        if i in schedule.fallback_reasons:
            label += f"\nfell back to {backend}"
            extra = f", tooltip={quote_dot(schedule.fallback_reasons[i])}, penwidth=2, color=red"
        color = BACKEND_COLORS.get(backend, OTHER_COLOR)
        lines.append(f"  op{i} [label={quote_dot(label)}, fillcolor={quote_dot(color)}{extra}];")
    for i in schedule.backend_of:
        for t in graph.ops[i].inputs:
            j = producer.get(t)
            if j is None:
                continue
            cross = schedule.backend_of[j] != schedule.backend_of[i]
            attrs = f" [style=dashed, label={quote_dot('copy')}]" if cross else ""
            lines.append(f"  op{j} -> op{i}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def placeable(backend: Backend, info: OpInfo) -> tuple[bool, str]:
    """Whether the Schedule may put the op of ``info`` on ``backend``: ``Backend.supports``
    (dtypes, attributes, input shapes and values), then ``Backend.supports_outputs`` (its
    outputs' shapes: a device's buffer-size limit); else ``(False, why)``. The one rule both
    ``build_schedule`` and ``Interpreter.supported_ops`` apply."""
    ok, why = backend.supports(info)
    if ok:
        ok, why = backend.supports_outputs(info)
    return ok, why


def _options(info: OpInfo, backends: list[Backend], every: bool) -> tuple[list[int], list[str]]:
    """The backends (indices) that may take an op, and why the ones before the first did not;
    only the first unless ``every``."""
    options, reasons = [], []
    for k, backend in enumerate(backends):
        ok, why = placeable(backend, info)
        if ok:
            options.append(k)
            if not every:
                break
        elif not options:
            reasons.append(f"{backend.name}: {why}")
    return options, reasons


def build_schedule(ops: list[OpInfo], backends: list[Backend], choose: Chooser | None = None) -> Schedule:
    """Assign every op of ``ops`` (the run-time ops, in order) and cut partitions (see module
    docstring); ``choose(ops, options)`` -> ``(backend index per op, reason per op index)``
    picks among each op's supporting backends (default: the first). Raises
    ``UnsupportedOperatorError`` when no backend takes an op."""
    sched = Schedule([b.name for b in backends])
    found = [_options(info, backends, choose is not None) for info in ops]
    for info, (options, reasons) in zip(ops, found):
        if not options:
            op = info.op
            raise UnsupportedOperatorError({op.type: 1}, where=f"op '{op.name}' ({'; '.join(reasons)})")
    if choose is None:
        chosen = [options[0] for options, _ in found]
    else:
        chosen, sched.placement_reasons = choose(ops, [options for options, _ in found])
    home = sched.home  # tensor -> backend that produces it
    mirrored: set[tuple[int, int]] = set()  # (tensor, backend) already copied
    for info, (_, reasons), b_index in zip(ops, found, chosen):
        i, op = info.index, info.op
        if reasons:
            sched.fallback_reasons[i] = "; ".join(reasons)
        _log.debug(
            "%s '%s' on %s%s", op.type, op.name, backends[b_index].name, f" (fell back: {'; '.join(reasons)})" if reasons else ""
        )
        sched.backend_of[i] = b_index
        if not sched.partitions or sched.partitions[-1].backend != b_index:
            sched.partitions.append(Partition(b_index))
        part = sched.partitions[-1]
        part.ops.append(i)
        for t in op.inputs:
            if t >= 0 and t in home and home[t] != b_index and (t, b_index) not in mirrored:
                mirrored.add((t, b_index))
                part.copies_in.append(t)
        for t in op.outputs:
            if t >= 0:
                home[t] = b_index
    return sched

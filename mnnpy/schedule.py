"""Schedule: each run-time op assigned to a backend, consecutive ops grouped into partitions.

Rule (TFLite's delegate partitioning, onnxruntime's GetCapability): each op goes to
the first backend in the session's preference list that supports it for its dtypes,
attributes and shapes; the CPU backend is always last, as the fallback. Consecutive
ops on one backend form a partition; a tensor produced on one backend and read on
another is copied once, at the start of the reading partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mnnpy.backend import Backend, TensorInfo
from mnnpy.errors import UnsupportedOperatorError
from mnnpy.ir import Graph


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
    """Assignment of run-time ops (``backend_of``), partitions, and why ops fell back."""

    backend_names: list[str]
    backend_of: dict[int, int] = field(default_factory=dict)
    partitions: list[Partition] = field(default_factory=list)
    fallback_reasons: dict[int, str] = field(default_factory=dict)

    def describe(self, graph: Graph) -> str:
        """Human-readable listing: each partition, its ops, and reasons for fallbacks."""
        lines = []
        for n, p in enumerate(self.partitions):
            lines.append(
                f"partition {n} on {self.backend_names[p.backend]}: {len(p.ops)} ops, {len(p.copies_in)} tensors copied in"
            )
            for i in p.ops:
                op = graph.ops[i]
                why = f"  (fell back: {self.fallback_reasons[i]})" if i in self.fallback_reasons else ""
                lines.append(f"  {op.type} '{op.name}'{why}")
        return "\n".join(lines)


def build_schedule(
    graph: Graph, runtime_ops: list[int], backends: list[Backend], infos: dict[int, TensorInfo], attrs: list[dict]
) -> Schedule:
    """Assign every op of ``runtime_ops`` and cut partitions (see module docstring)."""
    sched = Schedule([b.name for b in backends])
    home: dict[int, int] = {}  # tensor -> backend that produces it
    mirrored: set[tuple[int, int]] = set()  # (tensor, backend) already copied
    for i in runtime_ops:
        op = graph.ops[i]
        ins = [infos[t] for t in op.inputs if t >= 0]
        reasons = []
        b_index = None
        for k, backend in enumerate(backends):
            ok, why = backend.supports(op, ins, attrs[i])
            if ok:
                b_index = k
                break
            reasons.append(f"{backend.name}: {why}")
        if b_index is None:
            raise UnsupportedOperatorError({op.type: 1}, where=f"op '{op.name}' ({'; '.join(reasons)})")
        if reasons:
            sched.fallback_reasons[i] = "; ".join(reasons)
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

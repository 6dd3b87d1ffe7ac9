"""Memory planner: tensor lifetimes over the schedule -> offsets in one pooled arena.

Algorithm: *greedy by size* for shared objects (Pisarchyk & Lee, "Efficient Memory
Management for Deep Neural Net Inference", 2020; TFLite's ArenaPlanner does the
same): tensors sorted by size, largest first, each placed at the lowest offset that
does not overlap any already-placed tensor whose lifetime intersects its own.
Offsets are multiples of ``ALIGN`` bytes so that every view is SIMD-aligned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

ALIGN = 64


@dataclass(frozen=True)
class Lifetime:
    """A buffer to place: ``key``, ``nbytes``, live from step ``first`` to step ``last`` inclusive."""

    key: int
    nbytes: int
    first: int
    last: int


@dataclass
class MemoryPlan:
    """Result: byte offset of every key, and the arena size in bytes."""

    offsets: dict[int, int]
    arena_bytes: int


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_memory(buffers: list[Lifetime]) -> MemoryPlan:
    """Place ``buffers`` (see module docstring). O(n^2) in the number of buffers."""
    order = sorted(buffers, key=lambda b: (-b.nbytes, b.first, b.key))
    placed: list[tuple[int, int, Lifetime]] = []  # (offset, end, buffer)
    offsets: dict[int, int] = {}
    top = 0
    for b in order:
        size = _align(max(b.nbytes, 1))
        busy = sorted((o, e) for o, e, p in placed if p.first <= b.last and b.first <= p.last)
        best, cursor = None, 0
        for o, e in busy:
            if o - cursor >= size and (best is None or o - cursor < best[1]):
                best = (cursor, o - cursor)
            cursor = max(cursor, e)
        offset = best[0] if best is not None else cursor
        offsets[b.key] = offset
        placed.append((offset, offset + size, b))
        top = max(top, offset + size)
    return MemoryPlan(offsets, top)


@dataclass
class BackendTensors:
    """What one backend holds in a plan: each tensor's first and last step (op index; -1 for
    a tensor written before the first op, ``len(ops) + 1`` for one read after the last),
    which dynamic tensors alias another's storage (``alias``: output -> input), and the
    constants read there (values known at resize: stored apart, not in the arena)."""

    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    alias: dict[int, int] = field(default_factory=dict)
    constants: set[int] = field(default_factory=set)

    def touch(self, t: int, step: int) -> None:
        """Tensor ``t`` is live at ``step``."""
        self.first.setdefault(t, step)
        self.last[t] = max(self.last.get(t, step), step)

    def root(self, t: int) -> int:
        """The tensor whose storage ``t`` shares (itself when it aliases nothing)."""
        while t in self.alias:
            t = self.alias[t]
        return t

    def lifetimes(self, nbytes: Callable[[int], int]) -> list[Lifetime]:
        """One ``Lifetime`` per storage root, spanning every tensor that aliases it;
        ``nbytes(t)``: tensor ``t``'s size in bytes."""
        spans: dict[int, list[int]] = {}
        for t in self.first:
            r = self.root(t)
            if r not in spans:
                spans[r] = [self.first[t], self.last[t], nbytes(r)]
            s = spans[r]
            s[0], s[1] = min(s[0], self.first[t]), max(s[1], self.last[t])
        return [Lifetime(r, s[2], s[0], s[1]) for r, s in spans.items()]


def tensor_lifetimes(graph, schedule, known: set[int], inputs, exports, can_alias) -> list[BackendTensors]:
    """Per backend of ``schedule``: what it holds and when (``BackendTensors``).

    ``known``: tensors whose values are known at resize (constants); ``inputs``: tensors
    written before the first op (graph inputs, or what an earlier segment computed);
    ``exports``: tensors read after the last op (outputs, later segments); ``can_alias(b,
    op)``: whether backend ``b`` lets output 0 of ``op`` share the storage of the input its
    schema names in ``alias``. A border copy makes its tensor live on both backends at the
    partition's first op."""
    from mnnpy.ops import get_schema

    held = [BackendTensors() for _ in schedule.backend_names]
    for part in schedule.partitions:
        h = held[part.backend]
        for t in part.copies_in:
            held[schedule.home[t]].touch(t, part.ops[0])
            h.touch(t, part.ops[0])
        for i in part.ops:
            op = graph.ops[i]
            h.constants.update(t for t in op.inputs if t in known)
            for t in op.inputs:
                if t >= 0 and t not in known:
                    if t in inputs:
                        h.touch(t, -1)  # written by run() before the first op
                    h.touch(t, i)
            for t in op.outputs:
                if t >= 0:
                    h.touch(t, i)
            a = get_schema(op.type).alias
            src = op.inputs[a] if a is not None else -1
            if src >= 0 and src not in known and op.outputs[0] >= 0 and can_alias(part.backend, op):
                h.alias[op.outputs[0]] = src
    for t in exports:
        if t not in known:
            for h in held:
                if t in h.first:
                    h.touch(t, len(graph.ops) + 1)
    return held

"""Memory planner: tensor lifetimes over the schedule -> offsets in one pooled arena.

Two placements, the smaller arena kept (the first on a tie); both give offsets that are
multiples of ``ALIGN`` bytes, so that every view is SIMD-aligned, and never let two buffers
whose lifetimes intersect share a byte:

- *greedy by size* (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
  Inference", 2020, "Greedy by Size for Offset Calculation"; TFLite's ArenaPlanner does the
  same): buffers sorted by size, largest first, each placed in the smallest gap (best fit)
  between the already-placed buffers whose lifetimes intersect its own, else above them.
  Its work is one step per pair of buffers alive at a common step: it runs only when that
  count, computed first in O(n log n), is at most ``MAX_PAIRS``;
- *sweep*: the steps in order, freeing the buffers whose lifetime ended and placing those
  whose lifetime starts (largest first) in the smallest free hole that holds them
  (best fit, neighbouring holes merged), else at the top. O(n log n) (plus moving hole
  entries within two sorted lists), whatever the lifetimes.

So real models (hundreds of tensors, each alive for a few steps) get greedy by size as
before, and a graph of tens of thousands of long-lived tensors (a Split into 100,000
outputs, a 10,000-way fan-out) is planned in a fraction of a second.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

ALIGN = 64
MAX_PAIRS = 1 << 20  # intersecting lifetime pairs up to which greedy by size runs (about 1 s here)


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


@dataclass
class Layout:
    """Where one backend's tensors live in a plan: ``memory`` (its arena, storage root ->
    offset); ``placed``: ``(tensor, byte offset)`` of every dynamic tensor it holds, in the
    order they are acquired (tensors that alias share their root's offset); ``constants``:
    the tensors it holds as constants (values known at resize), in order."""

    memory: MemoryPlan
    placed: list[tuple[int, int]]
    constants: list[int]


def layout(held: BackendTensors, memory: MemoryPlan) -> Layout:
    """The ``Layout`` of ``held`` placed by ``memory`` (``plan_memory`` of its lifetimes)."""
    return Layout(memory, [(t, memory.offsets[held.root(t)]) for t in held.first], list(held.constants))


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan_memory(buffers: list[Lifetime]) -> MemoryPlan:
    """Place ``buffers`` (see module docstring): greedy by size when at most ``MAX_PAIRS``
    pairs of them are alive together, the sweep always; the smaller arena."""
    sweep = _sweep(buffers)
    if intersecting_pairs(buffers) > MAX_PAIRS:
        return sweep
    greedy = _greedy_by_size(buffers)
    return greedy if greedy.arena_bytes <= sweep.arena_bytes else sweep


def intersecting_pairs(buffers: list[Lifetime]) -> int:
    """How many pairs of ``buffers`` are alive at a common step, in O(n log n): all pairs but
    those where one ends before the other starts."""
    lasts = sorted(b.last for b in buffers)
    n = len(buffers)
    return n * (n - 1) // 2 - sum(bisect.bisect_left(lasts, b.first) for b in buffers)


def _greedy_by_size(buffers: list[Lifetime]) -> MemoryPlan:
    """Greedy by size, best fit (module docstring); O(n log n + pairs alive together)."""
    order = sorted(buffers, key=lambda b: (-b.nbytes, b.first, b.key))
    rank = {id(b): r for r, b in enumerate(order)}
    earlier: list[list[int]] = [[] for _ in order]  # per rank: the ranks before it alive at a common step
    by_first = sorted(order, key=lambda b: b.first)
    alive: list[tuple[int, int]] = []  # heap of (last, rank) of buffers started so far
    for b in by_first:
        while alive and alive[0][0] < b.first:
            heapq.heappop(alive)
        r = rank[id(b)]
        for _, a in alive:
            earlier[max(a, r)].append(min(a, r))
        heapq.heappush(alive, (b.last, r))
    offsets: dict[int, int] = {}
    start, end = [0] * len(order), [0] * len(order)
    top = 0
    for r, b in enumerate(order):
        size = _align(max(b.nbytes, 1))
        best, best_gap, cursor = None, 0, 0
        for o, e in sorted((start[a], end[a]) for a in earlier[r]):
            gap = o - cursor
            if gap >= size and (best is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, e)
        offset = best if best is not None else cursor
        start[r], end[r] = offset, offset + size
        offsets[b.key] = offset
        top = max(top, offset + size)
    return MemoryPlan(offsets, top)


def _sweep(buffers: list[Lifetime]) -> MemoryPlan:
    """The sweep over steps with best-fit holes (module docstring)."""
    order = sorted(buffers, key=lambda b: (b.first, -b.nbytes, b.key))
    holes = _Holes()
    ending: list[tuple[int, int, int]] = []  # heap of (last, offset, size) of placed buffers
    offsets: dict[int, int] = {}
    for b in order:
        while ending and ending[0][0] < b.first:
            _, o, z = heapq.heappop(ending)
            holes.free(o, z)
        size = _align(max(b.nbytes, 1))
        offsets[b.key] = o = holes.take(size)
        heapq.heappush(ending, (b.last, o, size))
    return MemoryPlan(offsets, holes.top)


class _Holes:
    """Free byte ranges below ``top`` (the arena size so far), in two sorted lists: by offset
    (to merge neighbours) and by (size, offset) (to find the best fit)."""

    def __init__(self):
        self.top = 0
        self.starts: list[int] = []  # hole offsets, ascending
        self.sizes: dict[int, int] = {}  # hole offset -> size
        self.fits: list[tuple[int, int]] = []  # (size, offset), ascending

    def _add(self, o: int, z: int) -> None:
        bisect.insort(self.starts, o)
        self.sizes[o] = z
        bisect.insort(self.fits, (z, o))

    def _remove(self, o: int) -> int:
        z = self.sizes.pop(o)
        del self.starts[bisect.bisect_left(self.starts, o)]
        del self.fits[bisect.bisect_left(self.fits, (z, o))]
        return z

    def take(self, size: int) -> int:
        """The offset of ``size`` bytes: the smallest hole that holds them, else the hole
        ending at the top grown upwards, else the top."""
        k = bisect.bisect_left(self.fits, (size, -1))
        if k < len(self.fits):
            z, o = self.fits[k]
            self._remove(o)
            if z > size:
                self._add(o + size, z - size)
            return o
        if self.starts and self.starts[-1] + self.sizes[self.starts[-1]] == self.top:
            o = self.starts[-1]
            self._remove(o)
        else:
            o = self.top
        self.top = o + size
        return o

    def free(self, o: int, z: int) -> None:
        """Return ``[o, o + z)``, merged with the holes it touches."""
        k = bisect.bisect_left(self.starts, o)
        if k < len(self.starts) and self.starts[k] == o + z:
            z += self._remove(o + z)
        if k > 0:
            prev = self.starts[k - 1]
            if prev + self.sizes[prev] == o:
                o, z = prev, z + self._remove(prev)
        self._add(o, z)


@dataclass
class BackendTensors:
    """What one backend holds in a plan: each tensor's first and last step (op index; -1 for
    a tensor written before the first op, ``len(ops) + 1`` for one read after the last),
    which dynamic tensors alias another's storage (``alias``: output -> the tensor that owns the
    storage, its input's own root where the input aliases too: one look-up, however long a chain
    of reshapes), and the
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
        return self.alias.get(t, t)

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
                h.alias[op.outputs[0]] = h.root(src)
    for t in exports:
        if t not in known:
            for h in held:
                if t in h.first:
                    h.touch(t, len(graph.ops) + 1)
    return held

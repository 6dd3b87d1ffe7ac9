"""Memory planner: tensor lifetimes over the schedule -> offsets in one pooled arena.

Algorithm: *greedy by size* for shared objects (Pisarchyk & Lee, "Efficient Memory
Management for Deep Neural Net Inference", 2020; TFLite's ArenaPlanner does the
same): tensors sorted by size, largest first, each placed at the lowest offset that
does not overlap any already-placed tensor whose lifetime intersects its own.
Offsets are multiples of ``ALIGN`` bytes so that every view is SIMD-aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

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

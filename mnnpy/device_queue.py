"""Who runs next on a device: NNAPI's execution priority between sessions.

Each Runtime (one per device per process) has a ``DeviceQueue`` of ``capacity`` units: a
GPU is one queue (capacity 1), the CPU has one unit per core and a run takes its session's
thread count. A run that finds the units it needs free takes them at once; otherwise it
waits, and when units come back the waiting runs go in priority order (``high`` before
``medium`` before ``low``, NNAPI's ``ANEURALNETWORKS_PRIORITY_*``), first come first served
within a priority. A run also gives up waiting at its deadline (``DeadlineMissedError``).
"""

from __future__ import annotations

import heapq
import itertools
import threading
from contextlib import contextmanager

from mnnpy.deadline import check, remaining
from mnnpy.errors import InputError

PRIORITIES = {"low": 0, "medium": 1, "high": 2}  # NNAPI's levels; "medium" is the default


def priority_level(priority: str) -> int:
    """The rank of ``priority`` (higher runs first); raises ``InputError`` for another name."""
    if priority not in PRIORITIES:
        raise InputError(f"priority must be one of {sorted(PRIORITIES, key=PRIORITIES.get)}, got {priority!r}")
    return PRIORITIES[priority]


class DeviceQueue:
    """``capacity`` units of one device handed to runs by priority (see the module doc)."""

    def __init__(self, capacity: int):
        self.capacity = max(1, int(capacity))
        self._free = self.capacity
        self._mutex = threading.Lock()  # taken as a plain lock where nothing waits (0.13 µs against the Condition's 0.22)
        self._cond = threading.Condition(self._mutex)
        self._waiting: list[tuple[int, int, int]] = []  # (-level, arrival, units), a heap
        self._arrivals = itertools.count()

    @contextmanager
    def turn(self, level: int, units: int = 1, deadline: float | None = None, where: str = "waiting for the device"):
        """Hold ``units`` for the ``with`` block (``acquire``/``release``)."""
        units = self.acquire(level, units, deadline, where)
        try:
            yield
        finally:
            self.release(units)

    def acquire(self, level: int, units: int = 1, deadline: float | None = None, where: str = "waiting for the device") -> int:
        """Take ``units`` (at most ``capacity``; returned, for ``release``), waiting by
        priority ``level`` and giving up at ``deadline`` (``DeadlineMissedError``)."""
        units = min(max(1, units), self.capacity)
        with self._mutex:
            if self._waiting or self._free < units:
                entry = (-level, next(self._arrivals), units)
                heapq.heappush(self._waiting, entry)
                try:
                    while self._waiting[0] is not entry or self._free < units:
                        if not self._cond.wait(remaining(deadline)):
                            check(deadline, where)
                finally:
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
                    self._cond.notify_all()
            self._free -= units
        return units

    def take(self, units: int) -> bool:
        """``acquire``'s path when no run waits and ``units`` (within 1..``capacity``) are free:
        takes them and returns True (``release`` them after); else False, taking nothing (the
        caller ``acquire`` s, and waits its turn). For bursts: 0.15 µs against 0.3."""
        with self._mutex:
            if self._waiting or self._free < units:
                return False
            self._free -= units
            return True

    def release(self, units: int) -> None:
        """Give back what ``acquire`` returned."""
        with self._mutex:
            self._free += units
            if self._waiting:
                self._cond.notify_all()

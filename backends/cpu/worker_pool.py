"""The CPU backend's worker threads: tasks handed over through shared flags that the
threads poll, not by waking a sleeping thread.

A ``concurrent.futures.ThreadPoolExecutor`` hands a task to a sleeping thread through a
lock and a condition variable: the operating system wakes that thread, and the caller
sleeps until the result comes back. On the 2-core reference VM a round trip of two no-op
tasks took 50-200 µs that way, so two 256x256 float32 products took 440 µs split over the
executor against 380 µs one after the other on one thread. A worker polling a flag
(``kernels/spin.py``, no GIL held) sees its task in about 2 µs, and the caller polls for
its end the same way: the pair takes 186 µs. onnxruntime's and MNN's thread pools spin
the same way while a run lasts.

Spinning stops where the work stops. A worker polls for ``SPIN_US`` after its last task,
then sleeps on a semaphore. The CPU backend calls ``wake()`` when it starts a partition
(from then on a worker polls after each task) and ``park()`` when it ends one: parked
workers sleep at once, so no worker of this pool spins outside a run, beside BLAS or
another engine (DESIGN.md "CPU kernels", threads). Without numba the same protocol runs
on the semaphores alone.

Memory order: the flags a worker polls without the GIL are read with acquire loads; every
other access to the shared state happens under the GIL, whose hand-overs are full
barriers, so the "announce I sleep, then re-check" steps below cannot both miss.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import time

import numpy as np

from mnnpy.backends.cpu.parallel import run_all, split

SPIN_US = 2000  # µs a worker polls for its next task before sleeping
WAIT_SPIN_US = 20000  # µs the caller polls for its workers' tasks before sleeping
ROW = 16  # int64 flags per worker: one 128-byte row each, no two workers on one cache line
POSTED, DONE, PARK, ZERO = 0, 1, 2, 3  # a row: tasks posted, tasks done, park request, always 0


class WorkerPool:
    """``n`` threads in all: the calling thread and ``n - 1`` workers.

    ``run(tasks)`` runs a list of independent callables (each releases the GIL for its
    heavy part: NumPy, BLAS, the compiled kernels), the last share on the calling thread,
    and returns when all are done; an exception raised by a task is raised there after the
    others finished. One caller at a time: a call that finds the pool busy (another
    session's thread, or a task that itself calls ``run``) runs its tasks on its own thread.
    After a ``fork`` the child starts its own workers on its first ``run``.
    """

    def __init__(self, n: int):
        self.n = max(1, int(n))
        self._lock = threading.Lock()
        self._state = threading.Lock()  # guards _active and the semaphores' wake-ups
        self._spin = None
        self._spin_polls = self._wait_polls = 0
        self._start()
        atexit.register(self.park)

    def _start(self) -> None:
        k = self.n - 1
        self._pid = os.getpid()
        self._active = 0
        self.flags = np.zeros(max(1, k) * ROW, np.int64)
        self._tasks: list = [None] * k
        self._errors: list = [None] * k
        self._asleep = [False] * k
        self._waiting = [False] * k
        self._wake = [threading.Semaphore(0) for _ in range(k)]
        self._done = [threading.Semaphore(0) for _ in range(k)]
        for i in range(k):
            self.flags[i * ROW + PARK] = 1  # asleep until the first partition or task
            threading.Thread(target=self._loop, args=(i,), name=f"mnnpy-cpu-{i}", daemon=True).start()

    def use_spin(self, spin) -> None:
        """Poll with the compiled ``spin`` kernel (``kernels/spin.py``) from now on; its speed
        is measured here (about 36 polls per µs on the reference VM). ``None``: semaphores only."""
        if spin is None or self._spin is spin:
            return
        probe = np.zeros(ROW, np.int64)
        polls = 20000
        spin(probe, ZERO, 0, ZERO, 1000)
        t0 = time.perf_counter()
        spin(probe, ZERO, 0, ZERO, polls)
        per_us = polls / max((time.perf_counter() - t0) * 1e6, 1.0)
        self._spin_polls, self._wait_polls = int(per_us * SPIN_US), int(per_us * WAIT_SPIN_US)
        self._spin = spin

    # -- workers ---------------------------------------------------------------------------
    def _loop(self, i: int) -> None:
        np.seterr(all="ignore")  # NaN/inf inputs propagate as in onnxruntime, without warnings
        base, seen = i * ROW, 0
        flags = self.flags
        while True:
            spin = self._spin
            if spin is None or not spin(flags, base + POSTED, seen, base + PARK, self._spin_polls):
                if flags[base + POSTED] == seen:
                    self._asleep[i] = True
                    if flags[base + POSTED] == seen:  # re-checked after announcing the sleep
                        self._wake[i].acquire()
                    self._asleep[i] = False
                    continue
            seen = int(flags[base + POSTED])
            try:
                self._tasks[i]()
            except BaseException as e:  # noqa: BLE001 - raised again on the calling thread
                self._errors[i] = e
            self._tasks[i] = None
            flags[base + DONE] = seen
            if self._waiting[i]:
                self._done[i].release()

    def _wait(self, i: int, target: int) -> None:
        base, flags = i * ROW, self.flags
        if self._spin is not None and flags[base + DONE] != target:
            self._spin(flags, base + DONE, target - 1, base + ZERO, self._wait_polls)
        while flags[base + DONE] != target:
            self._waiting[i] = True
            if flags[base + DONE] != target:  # re-checked after announcing the wait
                self._done[i].acquire()
            self._waiting[i] = False

    # -- callers ---------------------------------------------------------------------------
    def run(self, tasks) -> None:
        """Call every one of ``tasks`` (callables without arguments), spread over the threads."""
        if len(tasks) == 1 or self.n == 1 or not self._lock.acquire(blocking=False):
            for t in tasks:
                t()
            return
        try:
            if os.getpid() != self._pid:
                self._start()
            groups = [tasks[lo:hi] for lo, hi in split(len(tasks), self.n)]
            calls = [g[0] if len(g) == 1 else functools.partial(run_all, g) for g in groups]
            posted = []
            for i, call in enumerate(calls[:-1]):
                base = i * ROW
                self._tasks[i] = call
                self.flags[base + POSTED] += 1
                posted.append((i, int(self.flags[base + POSTED])))
                if self._asleep[i]:
                    self._wake[i].release()
            mine = None
            try:
                calls[-1]()
            except BaseException as e:  # noqa: BLE001 - raised after the workers finished
                mine = e
            for i, target in posted:
                self._wait(i, target)
            errors = [mine] + [self._errors[i] for i, _ in posted]
            for i, _ in posted:
                self._errors[i] = None
            first = next((e for e in errors if e is not None), None)
            if first is not None:
                raise first
        finally:
            self._lock.release()

    def wake(self) -> None:
        """A run starts: from now on a worker polls for its next task after each one, until
        ``park``. A sleeping worker is woken by its first task, not here (waking it costs a
        tiny model more than it gains: PP-OCR cls 0.53 -> 0.60 ms). Nested calls count."""
        with self._state:
            self._active += 1
            self.flags[PARK::ROW] = 0

    def park(self) -> None:
        """A run ends: when no other run is going on, every worker stops polling and sleeps."""
        with self._state:
            self._active = max(0, self._active - 1)
            if self._active == 0:
                self.flags[PARK::ROW] = 1

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

Spinning stops where the work stops. The CPU backend calls ``wake()`` when it starts a
partition (sleeping workers wake while its first ops run, and poll for tasks from then on)
and ``park()`` when it ends one: a parked worker polls ``GRACE_US`` more (in the compiled
``serve`` loop; the next run of a loop of runs finds it awake), then sleeps, so no worker of
this pool spins long outside a run, beside BLAS or another engine (onnxruntime's threads spin
about 40 ms after a run). A worker that sees no task for ``SPIN_US`` sleeps too. Without
numba the same protocol runs on the semaphores alone.

Workers run beside the caller, not on its CPU. A worker woken (or polling) after the
machine was idle is often placed by Linux on the CPU of the thread that woke it, and the
load balancer leaves it there for the whole run: the two threads then share one CPU (the
worker preempted at each hand-over) and the run is slower than on one thread. MobileNetV2,
2 threads, a run after 0.2 s idle, 2-core VM: 8-11 ms with the worker on the caller's CPU
(51 involuntary context switches a run, the caller waiting 4-5 ms for it) against 4-6 ms
apart (none); back-to-back runs 4-6 ms. So ``wake()`` reads the caller's CPU
(``sched_getcpu``) and, when it changed since the last run, lets each worker run on every
CPU the caller may run on but that one (``sched_setaffinity``; nothing is changed where the
caller may run on one CPU only or where the calls do not exist).

Two rules keep Python's GIL from turning the hand-over back into a sleep and a wake-up:

- Every poll loop calls ``sched_yield`` now and then (``kernels/spin.py``). Linux often
  wakes a thread on the CPU of the thread that woke it; if that one then polls, the woken
  thread waited for the end of its time slice: MobileNetV2 runs right after 0.2 s idle took
  17-30 ms instead of 7, with single hand-overs of 2-6 ms. With the yield: 7.7-8 ms.
- A worker that sees its task waits ``SETTLE_US`` before it takes the GIL. The caller
  still holds the GIL for the few µs it takes to call its own share; a worker asking for the
  GIL then sleeps on CPython's condition variable and is woken only when the caller enters
  compiled code. MobileNetV2, 9 hand-overs a run: median time from posting to the worker's
  start 41 -> 14 µs.

Native tasks need no GIL at all. A task whose every step is a compiled kernel bound by
``native.NativeKernel.bind`` (it carries ``native``: the C function's address and its argument
blocks) is posted as a table of calls; the worker's compiled ``serve`` loop
(``kernels/spin.py``) makes the calls itself and marks the task done without returning to
Python, and the caller spins (yielding now and then) until it is done, never sleeping on a
semaphore the worker would have to release from Python.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time

import numpy as np

from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.parallel import sequence, split

SPIN_US = 50000  # µs a worker polls for its next task before sleeping
SETTLE_US = 10  # µs a worker waits after seeing its task before taking the GIL (see the module doc)
WAIT_SPIN_US = 20000  # µs the caller polls for its workers' tasks before sleeping
# µs a parked worker keeps polling (in serve) before it sleeps, so that back-to-back runs find it
# awake: MobileNetV2, blocks of 5 runs 0.2 s apart, 2 threads, one process: 7.99 -> 5.93 ms a run
# (ResNet-18 the same: 13.68 and 13.89); a worker woken from its semaphore at every run kept the
# run at 8 ms and 1.26 cores busy
GRACE_US = 2000
ROW = 16  # int64 flags per worker: one 128-byte row each, no two workers on one cache line
POSTED, DONE, PARK, ZERO, TARGET, CALLS, TABLE, BASE, PROGRESS = range(9)  # a row: tasks posted, tasks
# done, park request, always 0, the count of done tasks the caller waits to see change (its spin's
# value slot), the posted task's native calls (0: a Python callable) and the address of their
# table, a program's first barrier value less 1, the last barrier this thread reached (``Program``);
# rows 0..n-2 are the workers', row n-1 the calling thread's (its BASE and PROGRESS only)
MAX_CALLS = 64  # native calls in one posted task (more: the task runs as Python)
MAX_PROGRAM = 4096  # native calls (barriers included) in one thread's share of a Program


def _sched_getcpu():
    """The C library's ``sched_getcpu`` (the CPU the calling thread runs on, -1 on error), or
    ``None`` where it does not exist (not Linux/glibc-like)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).sched_getcpu
    except (OSError, AttributeError):
        return None
    fn.restype, fn.argtypes = ctypes.c_int, []
    return fn


_GETCPU = _sched_getcpu() if hasattr(os, "sched_setaffinity") else None


def _nothing() -> None:
    pass


class Program:
    """The native calls of several consecutive ops, made by the pool's threads without Python
    (``WorkerPool.program``, ``run_program``): ``tables[i]`` thread ``i``'s calls (int64
    triples, ``native.NativeKernel.bind``) with a barrier entry after each phase but the last
    (the last table the calling thread's), ``calls[i]`` worker ``i``'s count of entries;
    ``mine`` the calling thread's share (``spin.run_table`` bound to its table); ``barriers``
    per run; ``phases`` the tasks (their bound arrays stay alive with them), for ``run_here``."""

    def __init__(self, tables, calls, mine, barriers: int, phases):
        self.tables, self.calls, self.mine, self.barriers, self.phases = tables, calls, mine, barriers, phases

    def run_here(self) -> None:
        """Every phase's tasks in order on this thread (the pool busy, or none)."""
        for tasks in self.phases:
            for t in tasks:
                t()


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
        self._spin = None  # the compiled spin kernel; ``_polls``: bound to each worker's row
        self._serve = None  # the compiled serve kernel (native tasks), where it compiled
        self._table = None  # the compiled run_table kernel (the caller's share of a Program)
        self.dispatches = 0  # calls of ``run`` that handed tasks to workers
        self._spin_polls = self._wait_polls = self._settle_polls = self._grace_polls = 0
        self._start()
        atexit.register(self.park)

    def _start(self) -> None:
        k = self.n - 1
        self._pid = os.getpid()
        self._active = 0
        if getattr(self, "flags", None) is None:
            self.flags = np.zeros((k + 1) * ROW, np.int64)
        else:  # after a fork: the same array (Programs' bound calls point at it), cleared
            self.flags.fill(0)
        self._bind_polls()  # after a fork: the new flags
        self._tasks: list = [None] * k
        self._errors: list = [None] * k
        self._asleep = [False] * k
        self._waiting = [False] * k
        self._wake = [threading.Semaphore(0) for _ in range(k)]
        self._done = [threading.Semaphore(0) for _ in range(k)]
        self._threads = []
        self._caller_cpu = -1  # the caller's CPU the workers were last kept off (``_place``)
        self._epoch = 0  # barriers passed by the programs run so far (``run_program``)
        for i in range(k):
            self.flags[i * ROW + PARK] = 1  # asleep until the first partition or task
            t = threading.Thread(target=self._loop, args=(i,), name=f"mnnpy-cpu-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def use_spin(self, spin, serve=None, table=None) -> None:
        """Poll with the compiled ``spin`` kernel (``kernels/spin.py``) from now on, workers
        waiting in ``serve`` where given (native tasks run without the GIL); the speed is
        measured here (about 36 polls per µs on the reference VM). ``None``: semaphores only."""
        if spin is None or (self._spin is spin and self._serve is serve and self._table is table):
            return
        self._serve, self._table = serve, table
        probe = np.zeros(ROW, np.int64)
        polls = 4000  # each poll yields the CPU now and then: on a loaded machine 20000 took 30 ms
        spin(probe, ZERO, ZERO, ZERO, 500, 0)
        t0 = time.perf_counter()
        spin(probe, ZERO, ZERO, ZERO, polls, 0)
        per_us = polls / max((time.perf_counter() - t0) * 1e6, 1.0)
        self._spin_polls, self._wait_polls = int(per_us * SPIN_US), int(per_us * WAIT_SPIN_US)
        self._settle_polls = int(per_us * SETTLE_US)
        self._grace_polls = int(per_us * GRACE_US)
        self._spin = spin
        self._bind_polls()

    def _bind_polls(self) -> None:
        """Per worker, the spin kernel bound to its row (every argument fixed): ``(worker's wait
        for a task: POSTED against its DONE, caller's wait for its end: DONE against TARGET)``."""
        self._polls = []
        if self._spin is None:
            return
        for i in range(self.n - 1):
            base = i * ROW
            if self._serve is not None:
                slots = (base + POSTED, base + DONE, base + PARK, base + CALLS, base + TABLE)
                polls = (self._spin_polls, self._settle_polls, self._grace_polls)
                task = bind(self._serve, self.flags, *slots, *polls, base + BASE, *self._barrier(i))
            else:
                task = bind(self._spin, self.flags, base + POSTED, base + DONE, base + PARK, self._spin_polls, self._settle_polls)
            done = bind(self._spin, self.flags, base + DONE, base + TARGET, base + ZERO, self._wait_polls, 0)
            self._polls.append((task, done))

    def _barrier(self, i: int) -> tuple[int, int, int, int]:
        """Thread ``i``'s barrier arguments (``spin.py``): its progress slot, then every
        thread's (first, stride, count); the caller is ``i == n - 1``."""
        return i * ROW + PROGRESS, PROGRESS, ROW, self.n

    # -- workers ---------------------------------------------------------------------------
    def _loop(self, i: int) -> None:
        np.seterr(all="ignore")  # NaN/inf inputs propagate as in onnxruntime, without warnings
        base = i * ROW
        flags = self.flags
        while True:
            polls = self._polls
            if not polls or not polls[i][0]():  # flags[POSTED] == flags[DONE]: no task (serve ran native ones)
                if flags[base + POSTED] == flags[base + DONE]:
                    self._asleep[i] = True
                    if flags[base + POSTED] == flags[base + DONE]:  # re-checked after announcing the sleep
                        self._wake[i].acquire()
                    self._asleep[i] = False
                    continue
                if flags[base + CALLS]:
                    continue  # a native task posted after serve gave up: serve runs it
            seen = int(flags[base + POSTED])
            try:
                self._tasks[i]()
            except BaseException as e:  # noqa: BLE001 - raised again on the calling thread
                self._errors[i] = e
            self._tasks[i] = None
            flags[base + DONE] = seen
            if self._waiting[i]:
                self._done[i].release()

    def _wait(self, i: int, target: int, native: bool) -> None:
        base, flags = i * ROW, self.flags
        if self._polls and flags[base + DONE] != target:
            flags[base + TARGET] = target - 1
            self._polls[i][1]()
            while native and flags[base + DONE] != target:  # only the worker's serve loop ends it
                self._polls[i][1]()
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
            self.dispatches += 1
            groups = [tasks[lo:hi] for lo, hi in split(len(tasks), self.n)]
            calls = [g[0] if len(g) == 1 else sequence(g) for g in groups]
            posted = []
            for i, call in enumerate(calls[:-1]):
                base = i * ROW
                self._tasks[i] = call
                n = self._native(i, call) if self._serve is not None else 0
                self.flags[base + CALLS] = n
                self.flags[base + POSTED] += 1
                posted.append((i, int(self.flags[base + POSTED]), n > 0))
                if self._asleep[i]:
                    self._wake[i].release()
            mine = None
            try:
                calls[-1]()
            except BaseException as e:  # noqa: BLE001 - raised after the workers finished
                mine = e
            for i, target, native in posted:
                self._wait(i, target, native)
                self._tasks[i] = None  # a native call the worker did not run (it drops what it runs): it held arena views
            errors = [mine] + [self._errors[i] for i, _, _ in posted]
            for i, _, _ in posted:
                self._errors[i] = None
            first = next((e for e in errors if e is not None), None)
            if first is not None:
                raise first
        finally:
            self._lock.release()

    def run_program(self, program: Program) -> None:
        """Run ``program`` (its phases one after the other, each phase's calls spread over the
        threads as ``run`` spreads tasks), the workers and this thread each making their share
        without Python and meeting at a barrier after each phase (``spin.py``). Where the pool
        is busy (another caller) or has no compiled kernels: the phases' calls on this thread."""
        if not any(program.calls):  # the caller's calls alone (no barrier): no worker, no dispatch
            program.mine()
            return
        if self.n == 1 or self._table is None or not self._lock.acquire(blocking=False):
            program.run_here()
            return
        try:
            if os.getpid() != self._pid:
                self._start()
            self.dispatches += 1
            base = self._epoch
            self._epoch += program.barriers
            posted = []
            for i in range(self.n - 1):
                if not program.calls[i]:  # nothing for this worker (one phase, fewer tasks than threads)
                    continue
                row = i * ROW
                self._tasks[i] = _nothing  # never called: the worker's serve makes the calls
                self.flags[row + BASE] = base
                self.flags[row + CALLS] = program.calls[i]
                self.flags[row + TABLE] = program.tables[i].ctypes.data
                self.flags[row + POSTED] += 1
                posted.append((i, int(self.flags[row + POSTED])))
                if self._asleep[i]:
                    self._wake[i].release()
            self.flags[(self.n - 1) * ROW + BASE] = base
            program.mine()
            for i, target in posted:
                self._wait(i, target, True)
        finally:
            self._lock.release()

    def program(self, phases) -> Program | None:
        """A ``Program`` of ``phases`` (lists of native tasks: each has ``native``) for this pool,
        each phase's tasks grouped over the threads as ``run`` groups them (the last group the
        caller's), a barrier between two phases unless both are the caller's alone (one task:
        it makes them in order, and no worker waits for them before it has work of its own; a
        Program of such phases only is the caller's table, no worker posted); ``None`` where a
        task is not native, a thread's share is over ``MAX_PROGRAM`` entries, or the pool has no
        compiled ``serve`` and ``run_table``."""
        if self._table is None or self._serve is None or self.n == 1:
            return None
        tables: list[list] = [[] for _ in range(self.n)]
        barriers, alone = 0, True  # alone: every call since the last barrier is the caller's
        for tasks in phases:
            groups = split(len(tasks), self.n) if tasks else []
            if len(groups) > 1 or not alone:  # threads meet before a phase they share, or after one they shared
                if any(tables):
                    barriers += 1
                    for tab in tables:
                        tab.append(np.array([0, barriers, 0], np.int64))
            alone = len(groups) <= 1
            for g, (lo, hi) in enumerate(groups):
                thread = self.n - 1 if g == len(groups) - 1 else g
                for t in tasks[lo:hi]:
                    nat = getattr(t, "native", None)
                    if nat is None:
                        return None
                    tables[thread].append(np.asarray(nat, np.int64))
        arrays = [np.concatenate(t) if t else np.zeros(3, np.int64) for t in tables]
        calls = [len(a) // 3 if t else 0 for a, t in zip(arrays, tables)]
        if max(calls) > MAX_PROGRAM:
            return None
        me = self.n - 1
        mine = bind(self._table, self.flags, int(arrays[me].ctypes.data), calls[me], me * ROW + BASE, *self._barrier(me))
        return Program(arrays, calls[:me], mine, barriers, phases)

    def _native(self, i: int, task) -> int:
        """Post ``task``'s native calls (its ``native`` int64 triples, ``native.NativeKernel.bind``,
        ``parallel.sequence``) in worker ``i``'s row: the count of calls, 0 where the task is
        Python (``MAX_CALLS`` calls at most)."""
        calls = getattr(task, "native_calls", None)
        if calls is None:
            nat = getattr(task, "native", None)
            calls = (0, 0) if nat is None or len(nat) > 3 * MAX_CALLS else (len(nat) // 3, int(nat.ctypes.data))
            try:
                task.native_calls = calls  # once per task: bound tasks live as long as their plan
            except AttributeError:  # a callable without attributes: asked again next time
                pass
        if calls[0]:
            self.flags[i * ROW + TABLE] = calls[1]
        return calls[0]

    def wake(self) -> None:
        """A run starts: sleeping workers wake and poll (``park`` ends it); nested calls count."""
        with self._state:
            self._active += 1
            self.flags[PARK::ROW] = 0
            if os.getpid() != self._pid:
                return
            self._place()
            if self._spin is None:
                return
            for i in range(self.n - 1):
                if self._asleep[i]:
                    self._wake[i].release()

    def _place(self) -> None:
        """Keep the workers off the caller's CPU (module doc): where the caller's CPU changed
        since the last call, each worker's allowed CPUs become the caller's own allowed CPUs
        minus that one (left as they are where that leaves none: a caller pinned to one CPU)."""
        cpu = _GETCPU() if _GETCPU is not None and self.n > 1 else -1
        if cpu < 0 or cpu == self._caller_cpu:
            return
        self._caller_cpu = cpu
        try:
            others = os.sched_getaffinity(0) - {cpu}
            if not others:
                return
            for t in self._threads:
                if t.native_id is not None:
                    os.sched_setaffinity(t.native_id, others)
        except OSError:  # a thread that ended, or affinity not ours to set: left as it is
            pass

    def park(self) -> None:
        """A run ends: when no other run is going on, every worker stops polling and sleeps."""
        with self._state:
            self._active = max(0, self._active - 1)
            if self._active == 0:
                self.flags[PARK::ROW] = 1

"""The threads that run a session's asynchronous and fenced executions (NNAPI's ``execute``
with a callback and ``executeFenced``), one per lane.

Jobs start in the order they were asked for. A session on a device with several lanes
(``Runtime.lanes``: Vulkan, the queues of one family) has one thread and one context per
lane: lane 0 runs on the session itself, lane ``k`` on a sibling Session of the same model
and options whose backends submit to the device's queue ``k`` (``BackendConfig.lane``), made
when that lane's thread takes its first job. Its own plans, arenas and command buffers let
two runs be in flight at once: one computes on the device while the other's inputs are
written, or both compute on two queues. Runs on different lanes may finish in any order.

Each job's result or exception goes to its ``concurrent.futures.Future``. The threads are
daemons started with the first jobs and ended by ``close``: a job that waits forever on a
fence that never signals cannot keep the interpreter from exiting (a run in progress at
exit still finishes first, ``mnnpy.exit_gate``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from mnnpy.errors import InputError
from mnnpy.log import get_logger

_log = get_logger("session")


class RunQueue:
    """Jobs on up to ``lanes`` daemon threads, taken in order; the thread of lane ``k`` calls
    each job it takes as ``job(context(k))`` (``context``: lane -> what the job runs on, made
    on that thread). ``submit(job)`` returns its Future."""

    def __init__(self, name: str = "mnnpy-run", lanes: int = 1, context: Callable[[int], Any] | None = None):
        self.name = name
        self.lanes = max(1, int(lanes))
        self._context = context or (lambda lane: None)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pending = 0  # jobs submitted and not yet taken
        self._running = 0  # jobs taken and not yet done

    def submit(self, job: Callable[[Any], object]) -> Future:
        """Queue ``job`` (one argument: the lane's context); its return value or exception goes to the Future."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise InputError("the session is closed: no new runs")
            self._pending += 1
            if len(self._threads) < self.lanes and self._pending > self._idle():  # a lane more only for a run in flight more
                lane = len(self._threads)
                t = threading.Thread(target=self._loop, args=(lane,), name=f"{self.name}-{lane}", daemon=True)
                self._threads.append(t)
                t.start()
            self._jobs.put((job, future))
        return future

    def _idle(self) -> int:
        return sum(1 for t in self._threads if getattr(t, "idle", True))

    def _loop(self, lane: int) -> None:
        me, context = threading.current_thread(), None
        while True:
            me.idle = True
            item = self._jobs.get()
            me.idle = False
            if item is None:
                self._jobs.put(None)  # the other lanes end too
                return
            with self._lock:
                self._pending -= 1
                self._running += 1
            job, future = item
            try:
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    if context is None:
                        context = self._context(lane)
                    result = job(context)
                except BaseException as e:  # noqa: BLE001 - delivered by future.result()
                    future.set_exception(e)
                else:
                    future.set_result(result)
            finally:
                with self._lock:
                    self._running -= 1

    def quiet(self) -> bool:
        """Whether no job is queued or running."""
        with self._lock:
            return self._pending == 0 and self._running == 0

    def close(self) -> None:
        """No new jobs; the ones queued still run (a closed session fails them at once), then
        the threads end. Does not wait: a job may be waiting on a fence that never signals."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._jobs.put(None)

"""The thread that runs a session's asynchronous and fenced executions, in the order they
were asked for (NNAPI's ``execute`` with a callback and ``executeFenced``).

Each job's result or exception goes to its ``concurrent.futures.Future``. The thread is a
daemon started with the first job and ended by ``close``: a job that waits forever on a
fence that never signals cannot keep the interpreter from exiting (a run in progress at
exit still finishes first, ``mnnpy.exit_gate``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future

from mnnpy.errors import InputError


class RunQueue:
    """Jobs run one after the other on one daemon thread; ``submit(job)`` returns its Future."""

    def __init__(self, name: str = "mnnpy-run"):
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, job: Callable[[], object]) -> Future:
        """Queue ``job`` (no arguments); its return value or exception goes to the Future."""
        future: Future = Future()
        with self._lock:
            if self._closed:
                raise InputError("the session is closed: no new runs")
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._jobs.put((job, future))
        return future

    def _loop(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = job()
            except BaseException as e:  # noqa: BLE001 - delivered by future.result()
                future.set_exception(e)
            else:
                future.set_result(result)

    def close(self) -> None:
        """No new jobs; the ones queued still run (a closed session fails them at once), then
        the thread ends. Does not wait: a job may be waiting on a fence that never signals."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._jobs.put(None)

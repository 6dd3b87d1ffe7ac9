"""Interpreter exit while other threads run sessions: let their runs finish first.

When Python exits while a daemon thread is inside a driver call that released the GIL, the
thread is ended (``pthread_exit``) as it takes the GIL back. Inside pyopencl's C++ binding
that unwinds through a ``noexcept`` frame, and the process dies with ``std::terminate``
(SIGABRT, "terminate called without an active exception") instead of exiting with its status
(found by ``mnnpy stress``, test ``exit_mid_run``).

``GATE.entered()`` brackets every session run and resize. At exit (``atexit``, which runs
after non-daemon threads were joined and before daemon threads are stopped) ``GATE.close``
stops new runs from starting (a thread that tries waits, in Python, until the process has
exited) and waits up to ``EXIT_WAIT_S`` for the runs in flight to finish. A run still going
after that is left as before.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_WAIT_S = 5.0  # seconds the exit waits for runs in flight


class ExitGate:
    """Counts the runs in flight; ``close`` (at exit) lets them finish and admits no new one."""

    def __init__(self):
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._busy = 0
        self._closing = False

    @contextmanager
    def entered(self) -> Iterator[None]:
        """One run (or resize) in flight; after ``close`` it never starts (the thread waits)."""
        self.enter()
        try:
            yield
        finally:
            self.leave()

    def enter(self) -> None:
        """``entered`` without a context manager (the run path: about 0.2 µs); pair with ``leave``."""
        with self._mutex:
            while self._closing:
                self._cond.wait()
            self._busy += 1

    def leave(self) -> None:
        """The run that ``enter`` admitted is over."""
        with self._mutex:
            self._busy -= 1
            if self._closing:
                self._cond.notify_all()

    def close(self, timeout: float = EXIT_WAIT_S) -> bool:
        """Admit no new run; wait up to ``timeout`` s for those in flight; True when none is left."""
        with self._cond:
            self._closing = True
            return self._cond.wait_for(lambda: self._busy == 0, timeout)


GATE = ExitGate()
atexit.register(GATE.close)

"""Fences of fenced runs (NNAPI's sync fences and ``executeFenced``).

``Session.run_fenced(feeds, wait_for=[...])`` returns a ``Fence`` that signals when that
run has completed, successfully or not. A run given fences in ``wait_for`` starts only
after all of them signalled; a fence that signalled a failed run makes the runs that wait
for it fail too (``DependencyFailedError``), as NNAPI's fences signalled with an error do.
The timings of a fenced run follow NNAPI's ``IFencedExecutionCallback::getExecutionInfo``:
``timing_launched`` from the ``run_fenced`` call to the fence signalling,
``timing_fenced`` from the moment every fence it waited for had signalled; each with the
run's device time (``mnnpy.timing``); ``None`` until signalled or when timing was not asked
for.
"""

from __future__ import annotations

import threading

from mnnpy.timing import Timing


class Fence:
    """Signals once, when its run completes. ``wait(timeout)`` (s; ``None``: until
    signalled) returns whether it has signalled; ``signalled``; ``error``: the exception of a
    failed run, else ``None``."""

    def __init__(self, name: str = "fence"):
        self.name = name
        self._event = threading.Event()
        self.error: BaseException | None = None
        self.timing_launched: Timing | None = None
        self.timing_fenced: Timing | None = None

    @property
    def signalled(self) -> bool:
        """Whether the run has completed (successfully or not)."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until signalled or ``timeout`` s passed; returns ``signalled``."""
        return self._event.wait(timeout)

    def signal(self, error: BaseException | None = None) -> None:
        """Mark the run completed (``error``: why it failed). Signalling twice is a no-op."""
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def __repr__(self) -> str:
        state = "failed" if self.error is not None else "signalled" if self.signalled else "pending"
        return f"Fence({self.name!r}, {state})"

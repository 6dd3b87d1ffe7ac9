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

A fenced run whose outputs all stay on a Vulkan device may signal when its work has been
submitted rather than finished (``Backend.defer_wait``): a run on the same device queue that
waits for the fence is then ordered after that work by the queue itself, with no host round
trip (``mnnpy.session_runs.fenced_job``); ``wait()`` on the host also waits for the device,
and reading its outputs always does.

Chains: ``fence.output(name)`` stands for output ``name`` of the fence's run before it has
completed; fed to ``run_fenced`` with that fence in ``wait_for``, it becomes that output when
the fence has signalled (a ``DeviceTensor`` with ``outputs_on_device``: a chain of fenced runs
on one device then moves no tensor through the host, ``mnnpy.device_tensor``).
"""

from __future__ import annotations

import threading
from typing import Any

from mnnpy.errors import InputError
from mnnpy.timing import Timing


class Fence:
    """Signals once, when its run completes. ``wait(timeout)`` (s; ``None``: until
    signalled) returns whether it has signalled; ``signalled``; ``error``: the exception of a
    failed run, else ``None``."""

    def __init__(self, name: str = "fence", outputs: list[str] | tuple[str, ...] = ()):
        self.name = name
        self._event = threading.Event()
        self.error: BaseException | None = None
        self.timing_launched: Timing | None = None
        self.timing_fenced: Timing | None = None
        self.names = tuple(outputs)  # the names of the outputs its run returns
        self.outputs: Any = None  # the run's RunOutputs once it succeeded
        self.in_flight: list = []  # backends whose work of its run was submitted and not waited for
        self._complete: Any = None  # waits for that work (set with in_flight)

    def output(self, name: str) -> FencedOutput:
        """Output ``name`` of this fence's run, to feed to ``run_fenced`` waiting for this
        fence (module doc). Raises ``InputError`` for a name the run does not return."""
        if name not in self.names:
            raise InputError(f"{self!r}: its run returns no output {name!r}; it returns {list(self.names)}")
        return FencedOutput(self, name)

    @property
    def signalled(self) -> bool:
        """Whether the run has completed (successfully or not), or had its device work
        submitted where it defers its wait (module doc)."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until signalled or ``timeout`` s passed, and then until the device has
        finished the run's work; returns ``signalled``."""
        if not self._event.wait(timeout):
            return False
        complete, self._complete = self._complete, None
        if complete is not None:
            complete()
        return True

    def wait_queued(self, timeout: float | None = None) -> bool:
        """``wait`` without waiting for work left in flight on the device (``in_flight``)."""
        return self._event.wait(timeout)

    def signal(self, error: BaseException | None = None) -> None:
        """Mark the run completed (``error``: why it failed). Signalling twice is a no-op."""
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def __repr__(self) -> str:
        state = "failed" if self.error is not None else "signalled" if self.signalled else "pending"
        return f"Fence({self.name!r}, {state})"


class FencedOutput:
    """Output ``name`` of ``fence``'s run, known (with its shape and dtype) once the fence
    has signalled (``Fence.output``); ``resolve()`` gives it then."""

    __slots__ = ("fence", "name")

    def __init__(self, fence: Fence, name: str):
        self.fence, self.name = fence, name

    def resolve(self) -> Any:
        """The output (an ndarray or a ``DeviceTensor``) of the signalled fence's run."""
        return self.fence.outputs[self.name]

    def __repr__(self) -> str:
        return f"FencedOutput({self.fence!r}, {self.name!r})"

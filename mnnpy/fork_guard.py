"""Which process first used a GPU driver: drivers (NVIDIA, PoCL, Mesa) do not survive ``fork``.

A child forked after its parent touched a GPU API hangs or fails deep inside the driver when
it uses that API (or a session inherited from the parent). Backends record the process at
their first driver call (``mark``) and refuse in any other process (``forked``), with
``REASON`` naming the fix.
"""

from __future__ import annotations

import os

REASON = (
    "{api} was initialised in the parent process before fork(); a forked child cannot use it "
    "(start workers with multiprocessing's 'spawn' or 'forkserver' method)"
)


class ForkGuard:
    """``mark()`` at the first driver call; ``forked()`` is True in a child forked after it."""

    def __init__(self, api: str):
        self.api = api
        self.pid: int | None = None

    def mark(self) -> None:
        self.pid = self.pid or os.getpid()

    def forked(self) -> bool:
        return self.pid is not None and self.pid != os.getpid()

    @property
    def reason(self) -> str:
        return REASON.format(api=self.api)

"""Work-group size choice for OpenCL launches (default only, for now)."""

from __future__ import annotations

MODES = ("none",)


class Tuner:
    """Picks a launch's local size; ``tune(launch, mode, limit)`` may change ``launch.local``."""

    def __init__(self, runtime):
        self.runtime = runtime

    def tune(self, launch, mode: str, limit: int) -> None:
        return None

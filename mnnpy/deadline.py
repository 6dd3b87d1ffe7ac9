"""Deadlines of runs and of preparation (NNAPI's ``OptionalTimePoint`` deadline and
``OptionalTimeoutDuration``).

A deadline is an absolute ``time.monotonic()`` value, s; ``timeout_ms`` is the same from
now. ``resolve`` turns the two options into one deadline (the earlier, when both are
given); ``check`` raises ``DeadlineMissedError`` once it has passed, saying where and how
late. A run checks before it starts, while it waits for a device or for fences, between
partitions and, on the CPU, between ops.
"""

from __future__ import annotations

import math
import numbers

from mnnpy.errors import DeadlineMissedError, InputError
from mnnpy.timing import clock


def resolve(deadline: float | None, timeout_ms: float | None, what: str = "run") -> float | None:
    """The absolute deadline (``time.monotonic()`` s) of ``deadline`` and ``timeout_ms``, or
    ``None`` without either. Raises ``InputError`` for a value that is not a finite real
    number or a negative ``timeout_ms``."""
    out = None
    if deadline is not None:
        if not isinstance(deadline, numbers.Real) or isinstance(deadline, bool) or not math.isfinite(deadline):
            raise InputError(f"{what}: deadline must be a finite time.monotonic() value in s, got {deadline!r}")
        out = float(deadline)
    if timeout_ms is not None:
        if (
            not isinstance(timeout_ms, numbers.Real)
            or isinstance(timeout_ms, bool)
            or not math.isfinite(timeout_ms)
            or timeout_ms < 0
        ):
            raise InputError(f"{what}: timeout_ms must be a finite number of ms >= 0, got {timeout_ms!r}")
        t = clock() + float(timeout_ms) / 1e3
        out = t if out is None else min(out, t)
    return out


def check(deadline: float | None, where: str) -> None:
    """Raise ``DeadlineMissedError`` if ``deadline`` (``time.monotonic()`` s) has passed."""
    if deadline is not None:
        late = clock() - deadline
        if late > 0:
            raise DeadlineMissedError(f"deadline missed {where}: {late * 1e3:.3f} ms late")


def remaining(deadline: float | None) -> float | None:
    """Seconds left until ``deadline`` (0 when passed), ``None`` without one: a wait's timeout."""
    return None if deadline is None else max(0.0, deadline - clock())

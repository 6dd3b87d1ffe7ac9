"""Limits of this machine that the engine checks sizes against before taking memory."""

from __future__ import annotations

import os


def _physical_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


PHYSICAL_BYTES = _physical_bytes()  # bytes of physical memory (2^62 where the OS does not say)

"""Scratch buffers of CPU Executions, made at resize and touched at once.

``np.empty``/``np.zeros`` only reserve address space; the pages are mapped on first
write, which would make the first run pay for every page of every buffer. Writing the
buffer once here keeps "the first run costs what the hundredth does".
"""

from __future__ import annotations

import math
import os

import numpy as np


def _physical_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


PHYSICAL_BYTES = _physical_bytes()


def scratch(shape, dtype, fill=0) -> np.ndarray:
    """A new ``shape``/``dtype`` array filled with ``fill`` (pages mapped now).

    Raises ``MemoryError`` naming the size when it exceeds the machine's physical memory
    (writing it would get the process killed rather than fail cleanly).
    """
    nbytes = math.prod(int(d) for d in np.atleast_1d(shape)) * np.dtype(dtype).itemsize
    if nbytes > PHYSICAL_BYTES:
        raise MemoryError(f"a buffer of {nbytes / 2**30:.1f} GiB exceeds this machine's {PHYSICAL_BYTES / 2**30:.1f} GiB")
    a = np.empty(shape, dtype)
    a.fill(fill)
    return a


def scratch_like(a: np.ndarray, fill=0) -> np.ndarray:
    """``scratch(a.shape, a.dtype, fill)``."""
    return scratch(a.shape, a.dtype, fill)

"""Scratch buffers of CPU Executions, made at resize and touched at once.

``np.empty``/``np.zeros`` only reserve address space; the pages are mapped on first
write, which would make the first run pay for every page of every buffer. Writing the
buffer once here keeps "the first run costs what the hundredth does".
"""

from __future__ import annotations

import numpy as np


def scratch(shape, dtype, fill=0) -> np.ndarray:
    """A new ``shape``/``dtype`` array filled with ``fill`` (pages mapped now)."""
    a = np.empty(shape, dtype)
    a.fill(fill)
    return a


def scratch_like(a: np.ndarray, fill=0) -> np.ndarray:
    """``scratch(a.shape, a.dtype, fill)``."""
    return scratch(a.shape, a.dtype, fill)

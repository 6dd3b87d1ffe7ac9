"""Scratch buffers of CPU Executions, made at resize and touched at once.

``np.empty``/``np.zeros`` only reserve address space; the pages are mapped on first
write, which would make the first run pay for every page of every buffer. Writing the
buffer once here keeps "the first run costs what the hundredth does".

Every scratch buffer is charged to the plan being made first (``mnnpy.limits.charge``):
past the session's memory limit, ``ShapeError`` naming the op, before anything is taken.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy import limits


def filled(shape, dtype, fill=0) -> np.ndarray:
    """A new ``shape``/``dtype`` array filled with ``fill`` (pages mapped now), not charged:
    for memory the planner charged already (the arena)."""
    a = np.empty(shape, dtype)
    a.fill(fill)
    return a


TAP_BYTES = 1024  # host bytes one kernel tap's views and slices take in a direct kernel (pooling: ~0.9 KB)


def charge_taps(taps: int, what: str) -> None:
    """Charge the bookkeeping of a direct kernel that keeps views per kernel tap (``taps`` of
    them, ``TAP_BYTES`` each) before it is built: a kernel shape from the model can ask for
    millions of taps. Raises ``ShapeError`` past the memory limit."""
    limits.charge(int(taps) * TAP_BYTES, f"{what}: the views of {int(taps)} kernel taps")


def scratch(shape, dtype, fill=0) -> np.ndarray:
    """A new ``shape``/``dtype`` array filled with ``fill`` (pages mapped now), charged to the
    plan being made. Raises ``ShapeError`` naming its bytes when it would pass the memory
    limit (writing it could get the process killed rather than fail cleanly)."""
    dims = tuple(int(d) for d in shape) if isinstance(shape, (tuple, list, np.ndarray)) else (int(shape),)
    limits.charge(
        math.prod(int(d) for d in dims) * np.dtype(dtype).itemsize, f"a CPU scratch buffer {tuple(dims)} {np.dtype(dtype)}"
    )
    return filled(shape, dtype, fill)


ALIGN = 64


class Workspace:
    """The temporaries of one Execution, carved from a buffer its backend shares with every
    other Execution (ops run one at a time, so their temporaries can share memory; MNN's
    backends pool dynamic buffers the same way).

    ``take`` returns views that never overlap each other; their contents are undefined at
    every ``on_execute`` (use it only for buffers an execution writes before reading).
    """

    def __init__(self, shared: SharedBuffer):
        self.shared = shared
        self.cursor = 0

    def take(self, shape, dtype) -> np.ndarray:
        """A ``shape``/``dtype`` view (64-byte aligned) after the ones taken before."""
        dtype = np.dtype(dtype)
        count = math.prod(int(d) for d in np.atleast_1d(shape)) if np.ndim(shape) else int(shape)
        nbytes = (count * dtype.itemsize + ALIGN - 1) // ALIGN * ALIGN
        buf = self.shared.at_least(self.cursor + nbytes)
        view = buf[self.cursor : self.cursor + count * dtype.itemsize].view(dtype).reshape(shape)
        self.cursor += nbytes
        return view

    def like(self, a: np.ndarray) -> np.ndarray:
        """``take(a.shape, a.dtype)``."""
        return self.take(a.shape, a.dtype)


class SharedBuffer:
    """A backend's buffer for Executions' temporaries; grows (doubling) when a request exceeds it.

    Views handed out before a growth keep the old buffer alive, so the memory held is at
    most about twice the largest single Execution's temporaries. ``release`` (after cached
    plans were dropped) lets go of the buffer: the plans kept hold it through their views as
    long as they live, and the next resize starts a buffer of its own size. So after the
    plan cache's first eviction each new plan has a buffer of its own (the memory held is
    at most the sum of the kept plans' temporaries, twice over) instead of all of them
    sharing the largest one ever needed, which a plan kept from a large shape would pin
    for every smaller shape after it.
    """

    def __init__(self):
        self.buf = np.empty(0, np.uint8)

    def release(self) -> None:
        """Forget the buffer (views handed out keep it alive); the next request starts anew."""
        self.buf = np.empty(0, np.uint8)

    def at_least(self, nbytes: int) -> np.ndarray:
        """The buffer (a 64-byte aligned ``uint8`` array), of ``nbytes`` bytes at least."""
        if self.buf.nbytes < nbytes:
            raw = scratch(max(nbytes, 2 * self.buf.nbytes) + ALIGN, np.uint8)
            self.buf = _aligned(raw, raw.nbytes - ALIGN)
        return self.buf


def _aligned(raw: np.ndarray, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes of ``uint8`` array ``raw`` from its first ``ALIGN``-aligned address."""
    skip = (-raw.ctypes.data) % ALIGN
    return raw[skip : skip + nbytes]

"""Scratch buffers of CPU Executions, made at resize and touched at once.

``np.empty``/``np.zeros`` only reserve address space; the pages are mapped on first
write, which would make the first run pay for every page of every buffer. Writing the
buffer once here keeps "the first run costs what the hundredth does".

Every scratch buffer is charged to the plan being made first (``mnnpy.limits.charge``):
past the session's memory limit, ``ShapeError`` naming the op, before anything is taken.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from mnnpy import limits


def filled(shape, dtype, fill=0) -> np.ndarray:
    """A new ``shape``/``dtype`` array filled with ``fill`` (pages mapped now), not charged:
    for memory the planner charged already (the arena). ``fill=None``: left as it is, for a
    buffer the caller writes whole at once (its write maps the pages). From ``HUGE_MIN_BYTES``
    an anonymous mapping of its own with huge pages asked for (``_anonymous``)."""
    dtype = np.dtype(dtype)
    dims = tuple(int(d) for d in shape) if isinstance(shape, (tuple, list, np.ndarray)) else (int(shape),)
    nbytes = math.prod(dims) * dtype.itemsize
    raw = _anonymous(nbytes) if nbytes >= HUGE_MIN_BYTES else None
    a = raw.view(dtype).reshape(dims) if raw is not None else np.empty(dims, dtype)
    if fill is not None and not (fill == 0 and raw is not None and populate(raw, 0, nbytes)):
        a.fill(fill)
    return a


MADV_POPULATE_WRITE = 23  # linux/mman.h (Linux 5.14); Python's mmap module has no name for it


def populate(buf: np.ndarray, start: int, end: int) -> bool:
    """Map the pages under bytes ``[start, end)`` of ``buf`` (a C-contiguous array over an
    anonymous mapping) now, in one system call (``madvise(MADV_POPULATE_WRITE)``; with huge
    pages 40 MiB took 1.8-2.3 ms here against 2.8-3.9 ms for writing zeros, 19-20 ms against
    23-36 ms without), contents left as they are (zero in a new mapping). ``False`` where the
    system cannot (not Linux, a Linux before 5.14): the caller writes the bytes instead."""
    madvise = _madvise()
    if end <= start:
        return True
    if madvise is None:
        return False
    import mmap

    lo = (buf.ctypes.data + start) // mmap.PAGESIZE * mmap.PAGESIZE
    return madvise(lo, buf.ctypes.data + end - lo, MADV_POPULATE_WRITE) == 0


@functools.lru_cache(maxsize=1)
def _madvise():
    """libc's ``madvise`` through ctypes on Linux, else ``None``."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        f = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    f.argtypes, f.restype = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
    return f


TAP_BYTES = 1024  # host bytes one kernel tap's views and slices take in a direct kernel (pooling: ~0.9 KB)


def charge_taps(taps: int, what: str) -> None:
    """Charge the bookkeeping of a direct kernel that keeps views per kernel tap (``taps`` of
    them, ``TAP_BYTES`` each) before it is built: a kernel shape from the model can ask for
    millions of taps. Raises ``ShapeError`` past the memory limit."""
    limits.charge(int(taps) * TAP_BYTES, f"{what}: the views of {int(taps)} kernel taps")


def scratch(shape, dtype, fill=0) -> np.ndarray:
    """A new ``shape``/``dtype`` array filled with ``fill`` (pages mapped now; ``None``: see
    ``filled``), charged to the plan being made. Raises ``ShapeError`` naming its bytes when it would pass the memory
    limit (writing it could get the process killed rather than fail cleanly)."""
    dims = tuple(int(d) for d in shape) if isinstance(shape, (tuple, list, np.ndarray)) else (int(shape),)
    limits.charge(math.prod(dims) * np.dtype(dtype).itemsize, f"a CPU scratch buffer {dims} {np.dtype(dtype)}")
    return filled(dims, dtype, fill)


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
    """A backend's buffer for Executions' temporaries: one reserved range of address space
    (``RESERVE_BYTES``, mapped lazily: ``MAP_NORESERVE``), of which the first ``touched``
    bytes are written (pages mapped) and charged to the plan being made, growing in place
    as Executions ask for more. Views handed out stay valid as it grows, so the memory held
    is the largest single Execution's temporaries, not a sum of copies (a buffer that
    doubled by copying held about twice that, and kept every smaller one alive through the
    views handed out before). Where the address space cannot be reserved (strict overcommit),
    or a request passes the reservation, a new buffer of that size is made and the views of
    the old one keep it alive.

    ``release`` (after cached plans were dropped) lets go of the buffer: the plans kept hold
    it through their views as long as they live, and the next resize starts a buffer of its
    own, so that a plan kept from a large shape does not pin its temporaries for every
    smaller shape after it.
    """

    def __init__(self):
        self.release()

    def release(self) -> None:
        """Forget the buffer (views handed out keep it alive); the next request starts anew."""
        self.buf = np.empty(0, np.uint8)
        self.touched = 0

    def at_least(self, nbytes: int) -> np.ndarray:
        """The buffer (a 64-byte aligned ``uint8`` array), its first ``nbytes`` bytes written.
        Raises ``ShapeError`` (``limits.charge``) when the bytes newly written would pass the
        session's memory limit."""
        if self.buf.nbytes < nbytes:
            self.buf, self.touched = _reserve(nbytes), 0
        if self.touched < nbytes:
            what = f"a CPU scratch buffer for the temporaries Executions share ({nbytes} bytes in all)"
            limits.charge(nbytes - self.touched, what)
            if not populate(self.buf, self.touched, nbytes):  # a new mapping's pages read as zero
                self.buf[self.touched : nbytes].fill(0)
            self.touched = nbytes
        return self.buf


RESERVE_BYTES = 1 << 36  # address space reserved per shared buffer (64 GiB; pages are mapped only when written)


def _reserve(nbytes: int) -> np.ndarray:
    """A ``uint8`` array of at least ``nbytes`` bytes whose pages are not mapped yet: an
    anonymous ``MAP_NORESERVE`` mapping of ``RESERVE_BYTES`` (page-aligned, huge pages asked
    for: ``_huge``), else (a larger request, or a system that refuses to overcommit)
    ``np.empty`` of ``nbytes``."""
    import mmap
    import sys

    noreserve = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else None)  # Python < 3.13
    if nbytes <= RESERVE_BYTES and noreserve is not None:
        try:
            m = mmap.mmap(-1, RESERVE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | noreserve)
            _huge(m)
            return np.frombuffer(m, np.uint8)
        except (OSError, ValueError):
            pass
    raw = np.empty(nbytes + ALIGN, np.uint8)
    return _aligned(raw, nbytes)


HUGE_MIN_BYTES = 4 << 20  # buffers from this size are mapped on their own, in huge pages where the system gives them


def mapped(nbytes: int) -> np.ndarray:
    """``nbytes`` zero bytes (``uint8``, 64-byte aligned, pages mapped now) for a buffer the
    planner charged already (the arena): ``filled``, whose large buffers are mappings of their
    own in huge pages (Linux maps a 40 MiB arena's 2 MiB pages in about 3 ms where writing
    4 KiB pages took 4-15 ms, runs take fewer TLB misses, and the memory goes back to the
    system when the arena is dropped)."""
    return _aligned(filled(nbytes + ALIGN, np.uint8), nbytes)


def _anonymous(nbytes: int) -> np.ndarray | None:
    """An anonymous private mapping of ``nbytes`` as ``uint8`` (page-aligned, huge pages asked
    for: ``_huge``; its pages read as zero and are mapped when written); None where it fails."""
    import mmap

    try:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError, AttributeError):
        return None
    _huge(m)
    return np.frombuffer(m, np.uint8)


def _huge(m) -> None:
    """Ask for transparent huge pages on mapping ``m`` (``madvise(MADV_HUGEPAGE)``: Linux
    with ``transparent_hugepage`` at ``madvise`` or ``always``); nothing where the system has none."""
    import mmap

    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            m.madvise(advice)
        except (OSError, ValueError):
            pass


def _aligned(raw: np.ndarray, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes of ``uint8`` array ``raw`` from its first ``ALIGN``-aligned address."""
    skip = (-raw.ctypes.data) % ALIGN
    return raw[skip : skip + nbytes]

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
import weakref

import numpy as np

from mnnpy import limits
from mnnpy.backends.cpu import page_pool
from mnnpy.backends.cpu.page_pool import RESERVE_BYTES, helper, huge


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


class ResizeHelper:
    """A CPU backend's work beside its resize, on a thread of the process's own
    (``mnnpy.process_threads``), waited for at the resize's end (``wait``): mapping the pages of
    its new zero buffers (``populate``: the arena, the scratch region, the shared temporaries)
    and compiled calls that leave the GIL (``submit``: packing constant weights), while the
    Executions' ``on_resize`` goes on in Python. det at 640x640 maps about 50 MB a resize
    (2-40 ms here) and packs 3.6 MB of pointwise weights (about 2.5 ms); its Executions take
    about 12 ms beside them. A buffer's contents are untouched by the mapping (zero pages read
    as zero whether mapped yet or not), so an Execution may write to one meanwhile; a call
    submitted runs after the mapping submitted before it. Also keeps the leases of the ranges
    it reserved (``reserve``, ``close``: ``page_pool``)."""

    def __init__(self):
        self._pending: list = []
        self._leases: weakref.WeakSet = weakref.WeakSet()  # of the ranges reserved through ``reserve``

    def reserve(self) -> tuple[np.ndarray, page_pool.Lease] | None:
        """``page_pool.reserve()``, its lease kept for ``close``."""
        got = page_pool.reserve()
        if got is not None:
            self._leases.add(got[1])
        return got

    def close(self) -> None:
        """The session is closed: the ranges reserved through ``reserve`` go to the process's
        pool once nothing views them (``page_pool``)."""
        for lease in list(self._leases):
            lease.pooled = True

    def populate(self, buf: np.ndarray, start: int, end: int) -> bool:
        """Map bytes ``[start, end)`` of ``buf`` (a C-contiguous array over a new anonymous
        mapping) on the thread; ``False`` where the system cannot (``populate``'s fallback is
        the caller's, now). A system call that fails on the thread leaves the pages to be
        mapped at their first write."""
        if _madvise() is None:
            return False
        if end > start:
            self._pending.append(helper().submit(populate, buf, start, end))
        return True

    def submit(self, call) -> None:
        """Run ``call`` (no arguments; it should leave the GIL) on the thread, before ``wait`` returns."""
        self._pending.append(helper().submit(call))

    def wait(self) -> None:
        """Return once every range given to ``populate`` is mapped and every call submitted
        has run (raising the first call's exception)."""
        pending, self._pending = self._pending, []
        for f in pending:
            f.result()


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
    limit (writing it could get the process killed rather than fail cleanly). While a CPU
    backend resizes, it is carved from the plan's ``ScratchRegion`` (zero until written)."""
    dims = tuple(int(d) for d in shape) if isinstance(shape, (tuple, list, np.ndarray)) else (int(shape),)
    dtype = np.dtype(dtype)
    nbytes = math.prod(dims) * dtype.itemsize
    limits.charge(nbytes, functools.partial(_scratch_what, dims, dtype))
    plan = limits.current()
    region = plan.regions.get(REGION) if plan is not None else None
    raw = region.take(nbytes) if region is not None else None
    if raw is None:
        return filled(dims, dtype, fill)
    a = raw.view(dtype).reshape(dims)
    if fill is not None and fill != 0:
        a.fill(fill)
    return a


def _scratch_what(dims: tuple, dtype: np.dtype) -> str:
    return f"a CPU scratch buffer {dims} {dtype}"


REGION = "cpu"  # the key of the CPU backend's ScratchRegion in ``PlanCharge.regions``


class ScratchRegion:
    """The memory a plan's CPU scratch buffers (``scratch``: re-laid weights, biases, tables)
    are carved from, one after the other: one reserved range of address space
    (``RESERVE_BYTES``, ``MAP_NORESERVE``, huge pages asked for) whose pages are mapped in
    ``CHUNK``s on the ``ResizeHelper``'s thread as buffers are carved, so that the Executions
    that write them (packing weights) find them mapped, and a buffer asked for zeros is
    zero without being written. det at 640x640 carves about 12 MB in 150 buffers; each was a
    heap allocation of its own, its pages mapped by its first write (fill or packing) in
    4 KiB faults. The region lives as long as a buffer carved from it (their views hold it):
    it goes with the plan, as each buffer did."""

    CHUNK = 2 << 20  # bytes mapped at a time (one huge page)

    def __init__(self, pages: ResizeHelper):
        self.pages = pages
        self.buf: np.ndarray | None = None
        self.lease: page_pool.Lease | None = None
        self.used = self.mapped = 0

    def take(self, nbytes: int) -> np.ndarray | None:
        """The next ``nbytes`` zero bytes (``uint8``, 64-byte aligned), or ``None`` where no
        range can be reserved (strict overcommit) or it is full: the caller allocates alone."""
        if self.buf is None:
            got = self.pages.reserve()
            self.buf, self.lease = got if got is not None else (np.empty(0, np.uint8), None)
            self.mapped = self.lease.mapped if self.lease is not None else 0  # a range from the pool comes mapped
        start = -(-self.used // ALIGN) * ALIGN
        end = start + int(nbytes)
        if end > self.buf.nbytes:
            return None
        self.used = end
        if end > self.mapped:
            upto = min(self.buf.nbytes, -(-end // self.CHUNK) * self.CHUNK)
            self.pages.populate(self.buf, self.mapped, upto)  # else mapped at the first write
            self.mapped = upto
        if self.lease is not None:
            self.lease.use(end, self.mapped)
        return self.buf[start:end]


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

    def __init__(self, pages: ResizeHelper | None = None):
        self.pages = pages  # maps the pages written on its thread (``ResizeHelper``); None: now
        self.release()

    def release(self) -> None:
        """Forget the buffer (views handed out keep it alive); the next request starts anew."""
        self.buf = np.empty(0, np.uint8)
        self.lease: page_pool.Lease | None = None
        self.touched = 0

    def at_least(self, nbytes: int) -> np.ndarray:
        """The buffer (a 64-byte aligned ``uint8`` array), its first ``nbytes`` bytes written.
        Raises ``ShapeError`` (``limits.charge``) when the bytes newly written would pass the
        session's memory limit."""
        if self.buf.nbytes < nbytes:
            got = (self.pages.reserve() if self.pages is not None else page_pool.reserve()) if nbytes <= RESERVE_BYTES else None
            self.buf, self.lease = got if got is not None else (_aligned(np.empty(nbytes + ALIGN, np.uint8), nbytes), None)
            self.touched = 0
        if self.touched < nbytes:
            what = f"a CPU scratch buffer for the temporaries Executions share ({nbytes} bytes in all)"
            limits.charge(nbytes - self.touched, what)
            start = max(self.touched, self.lease.mapped if self.lease is not None else 0)  # a range from the pool comes mapped
            mapper = self.pages.populate if self.pages is not None else populate
            if start < nbytes and not mapper(self.buf, start, nbytes):  # a new mapping's pages read as zero
                self.buf[start:nbytes].fill(0)
            self.touched = nbytes
            if self.lease is not None:
                self.lease.use(nbytes, nbytes)
        return self.buf


HUGE_MIN_BYTES = 4 << 20  # buffers from this size are mapped on their own, in huge pages where the system gives them


def mapped(nbytes: int, pages: ResizeHelper | None = None) -> np.ndarray:
    """``nbytes`` zero bytes (``uint8``, 64-byte aligned, pages mapped now) for a buffer the
    planner charged already (the arena): ``filled``, whose large buffers are mappings of their
    own in huge pages (Linux maps a 40 MiB arena's 2 MiB pages in about 3 ms where writing
    4 KiB pages took 4-15 ms, runs take fewer TLB misses, and the memory goes back to the
    system when the arena is dropped). With ``pages`` (the backend's ``ResizeHelper``), from
    ``HUGE_MIN_BYTES`` on: the start of a reserved range (``page_pool``; from the process's
    pool where it holds one, its pages mapped already), the rest mapped on ``pages``' thread."""
    got = pages.reserve() if pages is not None and HUGE_MIN_BYTES <= nbytes <= RESERVE_BYTES else None
    if got is None:
        return _aligned(filled(nbytes + ALIGN, np.uint8), nbytes)  # no range reserved: mapped now
    root, lease = got
    if lease.mapped < nbytes:
        pages.populate(root, lease.mapped, nbytes)
    lease.use(nbytes, nbytes)
    return root[:nbytes]


def _anonymous(nbytes: int) -> np.ndarray | None:
    """An anonymous private mapping of ``nbytes`` as ``uint8`` (page-aligned, huge pages asked
    for: ``_huge``; its pages read as zero and are mapped when written); None where it fails."""
    import mmap

    try:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError, AttributeError):
        return None
    huge(m)
    return np.frombuffer(m, np.uint8)


def _aligned(raw: np.ndarray, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes of ``uint8`` array ``raw`` from its first ``ALIGN``-aligned address."""
    skip = (-raw.ctypes.data) % ALIGN
    return raw[skip : skip + nbytes]

"""Reserved address ranges for the CPU backend's memory, and the process's pool of the ones a
closed session gave back with their pages still mapped.

Each CPU session's memory (its arenas, its plans' scratch regions, its Executions' shared
temporaries: ``scratch.py``) lives in ranges of address space reserved with ``MAP_NORESERVE``
(``RESERVE_BYTES``, huge pages asked for), whose pages are mapped as they are first needed:
det at 640x640 maps about 50 MB a session, 3 ms in a quiet process and 15-40 ms when this
VM's memory has to be backed anew (the same sessions alternating with onnxruntime's). When
a session is closed (``Session.close``), its ranges go to this pool once nothing views them any
more: zeroed on a thread of their own (``ctypes.memset``, which leaves the GIL) and kept
mapped, up to ``POOL_ENV`` MiB (``DEFAULT_POOL_MB``) in all. The next session's ranges come
from the pool first, their pages already mapped, as the runtime-wide buffer pools of MNN's
backends and the caching allocators of PyTorch do. A range of a session that is not closed
(a plan dropped, a session collected) is unmapped as before: memory follows the plans kept.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import sys
import threading
import warnings
import weakref

import numpy as np

from mnnpy.process_threads import threads

RESERVE_BYTES = 1 << 36  # address space reserved per range (64 GiB; pages are mapped only when written)
POOL_ENV = "MNNPY_CPU_POOL_MB"  # MiB of mapped pages the pool may keep; "0": none
DEFAULT_POOL_MB = 256


class Lease:
    """One reserved range as handed out: its ``mmap`` and address, ``extent`` (bytes from its
    start that were handed out: possibly written) and ``mapped`` (bytes from its start whose
    pages were mapped; its owner keeps both up to date), and whether it goes to the pool when
    the last view of it dies (``pooled``: set when its session is closed)."""

    __slots__ = ("m", "address", "extent", "mapped", "pooled", "__weakref__")

    def __init__(self, m: mmap.mmap, address: int, mapped: int = 0):
        self.m, self.address = m, address
        self.extent, self.mapped = 0, mapped
        self.pooled = False

    def use(self, extent: int, mapped: int | None = None) -> None:
        """Record that bytes ``[0, extent)`` were handed out (and ``[0, mapped)`` mapped)."""
        self.extent = max(self.extent, int(extent))
        if mapped is not None:
            self.mapped = max(self.mapped, int(mapped))


def reserve() -> tuple[np.ndarray, Lease] | None:
    """A ``RESERVE_BYTES`` ``uint8`` array over a reserved range (page-aligned, zero) and its
    ``Lease``: from the pool where it holds one (pages mapped: ``Lease.mapped``), else a new
    ``MAP_NORESERVE`` mapping (no page mapped yet, huge pages asked for: ``huge``). ``None``
    where the system refuses (strict overcommit, no ``MAP_NORESERVE``)."""
    lease = _pool().take()
    if lease is None:
        noreserve = getattr(mmap, "MAP_NORESERVE", 0x4000 if sys.platform.startswith("linux") else None)  # Python < 3.13
        if noreserve is None:
            return None
        try:
            m = mmap.mmap(-1, RESERVE_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | noreserve)
        except (OSError, ValueError):
            return None
        huge(m)
        root = np.frombuffer(m, np.uint8)
        lease = Lease(m, root.ctypes.data)
    else:
        root = np.frombuffer(lease.m, np.uint8)
    weakref.finalize(root, _returned, lease).atexit = False
    return root, lease


def huge(m: mmap.mmap) -> None:
    """Ask for transparent huge pages on mapping ``m`` (``madvise(MADV_HUGEPAGE)``: Linux
    with ``transparent_hugepage`` at ``madvise`` or ``always``); nothing where the system has none."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            m.madvise(advice)
        except (OSError, ValueError):
            pass


def pooled_bytes() -> int:
    """Bytes of mapped pages the pool holds now (ranges given back and zeroed)."""
    return _pool().held


def release() -> None:
    """Unmap every range the pool holds now (``MNNPY_CPU_POOL_MB=0`` keeps none at all)."""
    _pool().clear()


def helper():
    """The process's one thread for work beside a resize (mapping and zeroing pages, packing
    weights: ``scratch.ResizeHelper``), a ``ThreadPoolExecutor`` (``mnnpy.process_threads``)."""
    return threads("cpu-pages", 1)


def settle() -> None:
    """Wait until the helper thread has done what was given to it so far (zeroing the ranges
    of closed sessions among it); a benchmark calls this so that the next thing it times does
    not share the CPU with that work."""
    try:
        helper().submit(int).result()
    except RuntimeError:  # the interpreter is shutting down
        pass


def _returned(lease: Lease) -> None:
    """The last view of ``lease``'s range died: to the pool if its session was closed, else
    the range is unmapped with its ``mmap``."""
    if lease.pooled and limit_bytes() > 0:
        try:
            helper().submit(_pool().give, lease)
        except RuntimeError:  # the interpreter is shutting down: no new work for threads
            pass


MAX_POOL_MB = 1 << 30  # a limit beyond this (1 PiB) is not a number anyone meant


@functools.cache
def _limit_mb(value: str | None) -> int:
    """MiB from ``POOL_ENV``'s ``value``: a whole number from 0 to ``MAX_POOL_MB``; anything
    else is ``DEFAULT_POOL_MB`` with a ``RuntimeWarning`` (once per value)."""
    if value is None:
        return DEFAULT_POOL_MB
    try:
        mb = int(value)
    except ValueError:
        mb = -1
    if not 0 <= mb <= MAX_POOL_MB:
        warnings.warn(
            f"{POOL_ENV}={value!r} is not a whole number of MiB from 0 to {MAX_POOL_MB}; the CPU page pool keeps "
            f"{DEFAULT_POOL_MB} MiB",
            RuntimeWarning,
            stacklevel=2,
        )
        return DEFAULT_POOL_MB
    return mb


def limit_bytes() -> int:
    """The pool's limit in bytes (``POOL_ENV``, else ``DEFAULT_POOL_MB`` MiB)."""
    return _limit_mb(os.environ.get(POOL_ENV)) << 20


class PagePool:
    """Zeroed ranges with mapped pages, most recently given back last."""

    def __init__(self):
        self._lock = threading.Lock()
        self._free: list[Lease] = []
        self.held = 0

    def give(self, lease: Lease) -> None:
        """Zero what ``lease``'s range handed out, then keep it, dropping the oldest ranges
        past the limit (their ``mmap`` unmapped as they go)."""
        dirty = min(max(lease.extent, lease.mapped), RESERVE_BYTES)
        if dirty:
            ctypes.memset(lease.address, 0, dirty)
        # a new lease: the closed session's helper still knows the old one (and may close again)
        lease = Lease(lease.m, lease.address, max(lease.mapped, dirty))
        cap = limit_bytes()
        with self._lock:
            self._free.append(lease)
            self.held += lease.mapped
            while self._free and self.held > cap:
                self.held -= self._free.pop(0).mapped

    def take(self) -> Lease | None:
        """The range with the most mapped pages, or ``None``."""
        with self._lock:
            if not self._free:
                return None
            lease = max(self._free, key=lambda x: x.mapped)
            self._free.remove(lease)
            self.held -= lease.mapped
            return lease

    def clear(self) -> None:
        with self._lock:
            self._free.clear()
            self.held = 0


def _pool() -> PagePool:
    return _pool_of(os.getpid())


@functools.cache
def _pool_of(pid: int) -> PagePool:
    """This process's pool (a forked child starts an empty one; the parent's ranges it
    inherited are copies on write that it never touches)."""
    return PagePool()

"""CPU scratch buffers (backends/cpu/scratch.py): large ones are anonymous mappings of their
own (huge pages asked for), small ones NumPy's; both come filled, writable and aligned."""

import mmap

import numpy as np
import pytest

from mnnpy.backends.cpu import scratch


@pytest.mark.parametrize("nbytes", [4096, scratch.HUGE_MIN_BYTES, 3 * scratch.HUGE_MIN_BYTES + 12])
@pytest.mark.parametrize("fill", [0, 1.5])
def test_filled_large_and_small(nbytes, fill):
    shape = (3, nbytes // 12)
    a = scratch.filled(shape, np.float32, fill)
    assert a.shape == shape and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    assert (a == np.float32(fill)).all()
    a[-1, -1] = 7.0
    assert a[-1, -1] == 7.0
    large = a.nbytes >= scratch.HUGE_MIN_BYTES
    base = a
    while getattr(base, "base", None) is not None or isinstance(base, memoryview):
        base = base.obj if isinstance(base, memoryview) else base.base
    assert isinstance(base, mmap.mmap) == large  # a mapping of its own exactly from HUGE_MIN_BYTES
    if large:
        assert a.ctypes.data % mmap.PAGESIZE == 0


@pytest.mark.parametrize("nbytes", [100, 8 << 20])
def test_mapped_arena_is_zero_and_aligned(nbytes):
    a = scratch.mapped(nbytes)
    assert a.dtype == np.uint8 and a.size == nbytes and a.ctypes.data % scratch.ALIGN == 0
    assert not a.any()


def test_left_unfilled_keeps_the_shape():
    a = scratch.filled((2, 3 << 20), np.uint8, None)
    assert a.shape == (2, 3 << 20)


def _resident_pages(a: np.ndarray) -> int:
    """Pages of ``a`` the process has mapped (``mincore``), Linux only."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    lo = a.ctypes.data // mmap.PAGESIZE * mmap.PAGESIZE
    n = -(-(a.ctypes.data + a.nbytes - lo) // mmap.PAGESIZE)
    vec = (ctypes.c_ubyte * n)()
    libc.mincore.argtypes = (ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)
    assert libc.mincore(lo, n * mmap.PAGESIZE, vec) == 0
    return sum(v & 1 for v in vec)


@pytest.mark.skipif(scratch._madvise() is None, reason="madvise through ctypes needs Linux")
def test_populate_maps_pages_without_writing():
    buf, _ = scratch.page_pool.reserve()
    part = buf[: 2 << 20]
    if not scratch.populate(part, 100, part.nbytes):
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)")
    assert _resident_pages(part) == -(-part.nbytes // mmap.PAGESIZE)  # every page under the range, now
    assert not part.any()  # contents as they were: a new mapping's zeros


@pytest.mark.parametrize("works", [True, False])
def test_shared_buffer_zero_with_or_without_populate(monkeypatch, works):
    """Where populate is refused (another OS, an older Linux) the bytes are written instead."""
    if not works:
        monkeypatch.setattr(scratch, "_madvise", lambda: None)
    shared = scratch.SharedBuffer()
    a = shared.at_least(5 << 20)
    a[: 5 << 20] = 3
    b = shared.at_least(9 << 20)
    assert b.ctypes.data == a.ctypes.data and shared.touched == 9 << 20
    assert (b[: 5 << 20] == 3).all() and not b[5 << 20 : 9 << 20].any()
    assert scratch.filled((6 << 20,), np.uint8).max() == 0


@pytest.mark.skipif(scratch._madvise() is None, reason="madvise through ctypes needs Linux")
def test_page_mapper_maps_on_its_thread_and_keeps_writes():
    """The arena's pages are mapped on the mapper's thread; bytes written meanwhile stay, and
    after ``wait`` every page of the range is resident."""
    pages = scratch.ResizeHelper()
    arena = scratch.mapped(12 << 20, pages)
    arena[:100] = 9  # written while the thread may still be mapping
    pages.wait()
    if not scratch.populate(arena, 0, 1):
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)")
    assert _resident_pages(arena) >= arena.nbytes // mmap.PAGESIZE
    assert (arena[:100] == 9).all() and not arena[100:].any()


def test_scratch_is_carved_from_the_plans_region():
    """While a plan has a CPU region, scratch buffers are consecutive, aligned, zero (or the
    fill asked for) views of it, charged like any other; outside a plan they stand alone."""
    from mnnpy import limits

    pages = scratch.ResizeHelper()
    charge = limits.MemoryBudget(1 << 30).plan("test")
    with limits.planning(charge):
        charge.regions[scratch.REGION] = region = scratch.ScratchRegion(pages)
        a = scratch.scratch((3, 5), np.float32)
        b = scratch.scratch((1000,), np.int64, fill=7)
        c = scratch.scratch((4 << 20,), np.uint8, fill=None)
    pages.wait()
    root = region.buf.ctypes.data
    for x in (a, b, c):
        assert x.ctypes.data % scratch.ALIGN == 0 and root <= x.ctypes.data < root + region.used
        assert x.flags.writeable and x.flags.c_contiguous
    assert a.ctypes.data < b.ctypes.data < c.ctypes.data
    assert not a.any() and (b == 7).all() and not c.any()
    assert charge.used == a.nbytes + b.nbytes + c.nbytes
    assert region.mapped >= region.used and region.mapped % scratch.ScratchRegion.CHUNK == 0
    alone = scratch.scratch((3,), np.float32)
    assert not root <= alone.ctypes.data < root + scratch.RESERVE_BYTES


def test_scratch_region_refused_falls_back(monkeypatch):
    """Where no range can be reserved (strict overcommit), scratch allocates each buffer alone."""
    from mnnpy import limits

    monkeypatch.setattr(scratch.page_pool, "reserve", lambda: None)
    charge = limits.MemoryBudget(1 << 30).plan("test")
    with limits.planning(charge):
        charge.regions[scratch.REGION] = scratch.ScratchRegion(scratch.ResizeHelper())
        a = scratch.scratch((10,), np.float32, fill=2)
    assert (a == 2).all() and a.flags.writeable

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

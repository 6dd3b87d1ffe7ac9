"""Array-view helpers of the CPU conv/pool family (window geometry itself comes from the
shape functions: ``mnnpy.ops.geometry``)."""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels.native import address


def view_as(a: np.ndarray, shape) -> np.ndarray:
    """``a.reshape(shape)`` that must be a view (a copy would silently break the kernels): a
    reshaped view starts at ``a``'s first element, a copy does not (a pointer comparison where
    ``np.shares_memory`` solved an overlap problem)."""
    v = a.reshape(shape)
    assert v.size == 0 or address(v) == address(a), "reshape copied"
    return v


def same_elements(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same elements (one array in place of the other)."""
    return address(a) == address(b) and a.shape == b.shape


def box_complement(shape, box) -> list[tuple[slice, ...]]:
    """Disjoint boxes covering ``shape`` minus ``box`` (one ``slice`` per axis, step 1)."""
    out = []
    for d, (size, s) in enumerate(zip(shape, box)):
        inside, rest = tuple(box[:d]), (slice(None),) * (len(shape) - d - 1)
        if s.start > 0:
            out.append((*inside, slice(0, s.start), *rest))
        if s.stop < size:
            out.append((*inside, slice(s.stop, size), *rest))
    return out

"""Window geometry shared by the CPU conv/pool family: shape context, output sizes, tap slices."""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.ops import ShapeContext, get_schema
from mnnpy.ops.common import window_output


def shape_context(exe: Execution) -> ShapeContext:
    """The shape-function context of ``exe``'s op (shapes, dtypes, known values, attrs)."""
    infos = exe.input_infos
    return ShapeContext(
        exe.op,
        get_schema(exe.op.type),
        [i.shape if i is not None else None for i in infos],
        [i.dtype if i is not None else None for i in infos],
        [i.value if i is not None else None for i in infos],
        exe.attrs,
    )


def window(exe: Execution, in_sizes, kernel, ceil_mode: int = 0):
    """``(out_sizes, strides, dilations, pads)`` of a conv/pool window after auto_pad."""
    a, n = exe.attrs, len(kernel)
    out, pads = window_output(
        shape_context(exe), list(in_sizes), list(kernel), a["strides"], a["dilations"], a["pads"], a["auto_pad"], ceil_mode
    )
    return out, list(a["strides"]) or [1] * n, list(a["dilations"]) or [1] * n, pads


def tap_range(in_size: int, out_size: int, offset: int, stride: int) -> tuple[int, int, int]:
    """Outputs ``o`` in ``[lo, hi)`` read input ``o*stride + offset`` inside ``[0, in_size)``.

    Returns ``(lo, hi, lo*stride + offset)``; ``hi <= lo`` when the tap reads only padding.
    """
    lo = max(0, -(offset // stride))
    hi = min(out_size, (in_size - 1 - offset) // stride + 1)
    return lo, hi, lo * stride + offset


def tap_slices(in_sizes, out_sizes, tap, strides, dilations, pads_begin):
    """``(out_slices, in_slices)`` of kernel tap ``tap`` (a tuple of indices), or None if all padding."""
    outs, ins = [], []
    for i, t in enumerate(tap):
        lo, hi, start = tap_range(in_sizes[i], out_sizes[i], t * dilations[i] - pads_begin[i], strides[i])
        if hi <= lo:
            return None
        outs.append(slice(lo, hi))
        ins.append(slice(start, start + (hi - lo - 1) * strides[i] + 1, strides[i]))
    return tuple(outs), tuple(ins)


def view_as(a: np.ndarray, shape) -> np.ndarray:
    """``a.reshape(shape)`` that must be a view (a copy would silently break the kernels)."""
    v = a.reshape(shape)
    assert v.size == 0 or np.shares_memory(v, a), "reshape copied"
    return v


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

"""Index-space geometry shared by the GPU backends' strided copies and broadcasts.

Shapes are outermost first; strides are in elements. Used by
``backends/opencl/movement.py`` and ``backends/vulkan/movement.py``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ops.slice import onnx_slice


def contiguous_strides(shape) -> list[int]:
    """Element strides of a C-contiguous array of ``shape``."""
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= int(d)
    return st[::-1]


def collapse(dims, xstr, ystr) -> tuple[list[int], list[int], list[int]]:
    """Drop size-1 dims and merge neighbours that are contiguous on both sides.

    ``dims`` outermost first; a dim merges into the previous one when, for both ``x`` and
    ``y``, ``stride[prev] == stride[this] * dims[this]``. Returns at least one dim."""
    out_d: list[int] = []
    out_x: list[int] = []
    out_y: list[int] = []
    for d, sx, sy in zip(dims, xstr, ystr):
        d = int(d)
        if d == 1:
            continue
        if out_d and out_x[-1] == sx * d and out_y[-1] == sy * d:
            out_d[-1] *= d
            out_x[-1], out_y[-1] = int(sx), int(sy)
        else:
            out_d.append(d)
            out_x.append(int(sx))
            out_y.append(int(sy))
    return (out_d, out_x, out_y) if out_d else ([1], [0], [0])


def transpose_geometry(shape, perm) -> tuple[list[int], list[int], list[int]]:
    """Merged ``(dims, x strides, y strides)`` of Y's index space for ``Y = X.transpose(perm)``
    (``X`` C-contiguous of ``shape``, ``Y.shape[i] = shape[perm[i]]``)."""
    xs = contiguous_strides(shape)
    out = [shape[p] for p in perm]
    return collapse(out, [xs[p] for p in perm], contiguous_strides(out))


def slice_ranges(values, shape) -> list[tuple[int, int, int]]:
    """Per-axis ``(start, step, length)`` of ONNX Slice from known ``values`` = (starts, ends,
    axes or None, steps or None); clamping as ONNX's (``mnnpy.ops.slice.onnx_slice``)."""
    starts, ends = (np.asarray(v).reshape(-1).astype(np.int64) for v in values[:2])
    axes = np.arange(len(starts)) if values[2] is None else np.asarray(values[2]).reshape(-1).astype(np.int64)
    steps = np.ones(len(starts), np.int64) if values[3] is None else np.asarray(values[3]).reshape(-1).astype(np.int64)
    out = [(0, 1, int(d)) for d in shape]
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = int(a) % len(shape)
        r = range(*onnx_slice(int(s), int(e), int(st), shape[a]).indices(shape[a]))
        out[a] = (r.start, r.step, len(r))
    return out


def broadcast_strides(out: tuple[int, ...], *shapes: tuple[int, ...]) -> tuple[list[int], list[list[int]]]:
    """Element strides of each input ``shapes[k]`` broadcast to ``out``, with size-1 dims of
    ``out`` dropped and neighbouring dims merged where every input allows it.

    Returns ``(dims, strides)``: ``dims`` outermost first; ``strides[k][j]`` is input k's
    stride (elements) along ``dims[j]``, 0 where it is broadcast. Dims j-1 and j merge when,
    for each input, ``stride[j-1] == stride[j] * dims[j]`` (contiguous, or both 0).
    """
    per_input = []
    for shape in shapes:
        full = (1,) * (len(out) - len(shape)) + tuple(shape)
        st, step = [0] * len(out), 1
        for j in range(len(out) - 1, -1, -1):
            st[j] = step if full[j] != 1 else 0
            step *= full[j]
        per_input.append(st)
    dims: list[int] = []
    strides: list[list[int]] = [[] for _ in shapes]
    for j, d in enumerate(out):
        if d == 1:
            continue
        if dims and all(s[-1] == p[j] * d for s, p in zip(strides, per_input)):
            dims[-1] *= d
            for s, p in zip(strides, per_input):
                s[-1] = p[j]
        else:
            dims.append(d)
            for s, p in zip(strides, per_input):
                s.append(p[j])
    return dims, strides

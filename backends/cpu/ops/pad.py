"""CPU Pad (ONNX operators.md #Pad, opset-18 form), ``data: (*D) -> output: (*D_out)``.

``D_out[a] = D[a] + pads_begin[a] + pads_end[a]``; negative pads crop first (as
onnxruntime and the ONNX reference do), then output index ``j`` along axis ``a`` reads
the cropped input at ``j - max(pads_begin[a], 0)``; outside the cropped extent ``D'``:
``constant`` writes ``constant_value``; ``edge`` clamps; ``reflect`` mirrors without
repeating the edge (period ``2*(D-1)``); ``wrap`` takes it modulo ``D``.

Execution: one copy of the kept interior, then the borders. Constant mode fills each
border slab once; the other modes gather each border slab (one ``np.take`` per side and
axis) from rows already in the output, axis by axis (each later axis reads the earlier axes'
completed borders).
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import ShapeError


def source_index(j: np.ndarray, size: int, mode: str) -> np.ndarray:
    """Input index along one axis for (unpadded) positions ``j`` under ``mode`` (not constant)."""
    if mode == "edge":
        return np.clip(j, 0, size - 1)
    if mode == "wrap":
        return np.mod(j, size)
    if size == 1:
        return np.zeros_like(j)
    period = 2 * (size - 1)
    m = np.mod(j, period)
    return np.where(m < size, m, period - m)


@cpu_execution("Pad")
class Pad(Execution):
    """Pad with modes constant/reflect/edge/wrap, optional ``axes`` and ``constant_value``."""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        widths = self.geometry["pads"]
        self.mode = self.attrs["mode"]
        self.empty = y.size == 0
        if self.empty:
            return
        src, dst, inner = [], [], []  # interior slices of x and y; y's interior range per axis
        for d, (b, e) in zip(x.shape, widths):
            lo, hi = max(0, -b), d - max(0, -e)
            src.append(slice(lo, hi))
            dst.append(slice(max(0, b), max(0, b) + max(0, hi - lo)))
            inner.append((dst[-1].start, dst[-1].stop))
        self.interior = (y[tuple(dst)], x[tuple(src)]) if x.size and all(s.stop > s.start for s in dst) else None
        self.slabs, self.copies = [], []
        if self.mode == "constant":
            for a, (lo, hi) in enumerate(inner):
                head = tuple(slice(*r) for r in inner[:a])
                for piece in (slice(0, lo), slice(hi, y.shape[a])):
                    if piece.stop > piece.start:
                        self.slabs.append(y[head + (piece,)])
            return
        if self.interior is None:
            raise ShapeError(f"Pad mode {self.mode} cannot pad an axis cropped to nothing")
        for a, (lo, hi) in enumerate(inner):
            srcs = source_index(np.arange(y.shape[a]) - lo, hi - lo, self.mode) + lo
            pre, tail = (slice(None),) * a, tuple(slice(*r) for r in inner[a + 1 :])
            rows = y[pre + (slice(None),) + tail]  # the source rows lie inside [lo, hi): no overlap
            for border in (slice(0, lo), slice(hi, y.shape[a])):
                if border.stop > border.start:
                    self.copies.append((rows, np.ascontiguousarray(srcs[border], np.intp), a, rows[pre + (border,)]))

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        if self.interior is not None:
            np.copyto(*self.interior)
        if self.slabs:
            cv = inputs[2] if len(inputs) > 2 and inputs[2] is not None and inputs[2].size else 0
            value = np.asarray(cv).reshape(-1)[0] if np.ndim(cv) else cv
            for s in self.slabs:
                s.fill(value)
        for rows, index, axis, border in self.copies:
            np.take(rows, index, axis=axis, out=border, mode="clip")

"""CPU pooling: MaxPool (with optional Indices), AveragePool, GlobalAveragePool (ONNX operators.md).

``X: (N, C, *S) -> Y: (N, C, *O)``. Window sizes and pads come from
``mnnpy.ops.common.window_output`` (pads, auto_pad, ceil_mode, dilations). A window is
reduced tap by tap: each kernel tap is one strided slice of X against the outputs whose
input position lies inside X (padding is never read), so no padded copy is made.

float32 2-D MaxPool (without ``Indices``) and AveragePool run the compiled kernel of
``mnnpy.backends.cpu.kernels.pool`` instead (one pass per output row), split by output rows
over the backend's pool; the NumPy path remains for other dtypes and ranks, ``Indices``, and
machines where numba cannot compile. GlobalAveragePool on float32 takes the compiled row means
(``np.mean`` otherwise); both global pools are split by rows over the pool when large.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.kernels.pool import kernel as pool_kernel
from mnnpy.backends.cpu.kernels.pool import rows_mean_kernel
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, parallel, split, workers
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import charge_taps, scratch
from mnnpy.ops.geometry import tap_range, tap_slices


def _lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _window_counts(in_size, out_size, k, s, d, pb, pe, include_pad) -> np.ndarray:
    """Per output index: how many taps of the window count in the AveragePool divisor.

    Without ``count_include_pad`` only taps inside X count; with it, taps inside the
    explicitly padded input ``[-pb, in + pe)`` (ceil_mode overhang never counts).
    """
    lo, hi = (-pb, in_size + pe) if include_pad else (0, in_size)
    pos = np.arange(out_size)[:, None] * s + np.arange(k)[None, :] * d - pb
    return ((pos >= lo) & (pos < hi)).sum(axis=1)


def _index_copy(flat: np.ndarray) -> np.ndarray:
    """A contiguous copy of one tap's input indices, charged to the plan (one per tap)."""
    out = scratch(flat.shape, flat.dtype)
    np.copyto(out, flat)
    return out


@cpu_execution("MaxPool", "AveragePool")
class Pool(Execution):
    """MaxPool / AveragePool over ``kernel_shape`` windows, ``X: (N, C, *S) -> Y: (N, C, *O)``.

    MaxPool: ``Y = max`` over the window (pads act as -inf); ``Indices`` (int64) is the
    flat index into X of the first maximum in scan order (``storage_order`` 1: spatial
    dims column-major). AveragePool: ``Y = sum / count`` with ``count`` from
    ``count_include_pad`` (see ``_window_counts``).
    """

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        ind = outputs[1] if len(outputs) > 1 else None
        a, k = self.attrs, list(self.attrs["kernel_shape"])
        out, strides, dil, pads = self.geometry["window"].unpack()
        nd, spatial = len(k), x.shape[2:]
        self.is_max = self.op.type == "MaxPool"
        self.empty = y.size == 0
        if self.empty:
            return
        nc = x.shape[0] * x.shape[1]
        charge_taps(math.prod(k), f"CPU {self.op.type}")
        x3, y3 = view_as(x, (nc, *spatial)), view_as(y, (nc, *out))
        taps = []
        for tap in itertools.product(*[range(t) for t in k]):
            s = tap_slices(spatial, out, tap, strides, dil, pads[:nd])
            if s is not None:
                taps.append(s)
        # A tap that covers every output initialises Y by a copy instead of a fill.
        full = [i for i, (o, _) in enumerate(taps) if all(sl.stop - sl.start == n for sl, n in zip(o, out))]
        if full and ind is None:
            taps.insert(0, taps.pop(full[0]))
        self.first_copy = bool(full) and ind is None
        self.fill = _lowest(x.dtype) if self.is_max else 0
        if ind is not None:
            ind3 = view_as(ind, (nc, *out))
            self.mask = scratch((nc, *out), bool)
            order = spatial if a["storage_order"] == 0 else spatial[::-1]
            flat = np.arange(math.prod(spatial), dtype=np.int64).reshape(order)
            flat = flat if a["storage_order"] == 0 else flat.transpose(*range(nd - 1, -1, -1))
            self.base = (np.arange(nc, dtype=np.int64) * math.prod(spatial)).reshape((nc,) + (1,) * nd)
        self.ranges = []
        for c0, c1 in split(nc, workers(self.backend, y.size * len(taps) // 4)):
            r = (slice(c0, c1),)
            pairs = []
            for o, i in taps:
                extra = ()
                if ind is not None:
                    extra = (ind3[r + o], _index_copy(flat[i]), self.mask[r + o])
                pairs.append((y3[r + o], x3[r + i]) + extra)
            rng = (y3[r], pairs, ind3[r] if ind is not None else None, self.base[c0:c1] if ind is not None else None)
            self.ranges.append(rng)
        if not self.is_max:
            counts = [
                _window_counts(spatial[j], out[j], k[j], strides[j], dil[j], pads[j], pads[nd + j], a["count_include_pad"])
                for j in range(nd)
            ]
            c = counts[0]
            for cj in counts[1:]:
                c = np.multiply.outer(c, cj)
            self.recip = (1.0 / np.maximum(c, 1)).astype(x.dtype)
        self.tasks = [lambda r=r: self._range(*r) for r in self.ranges]
        if ind is None and nd == 2:
            self.tasks = self._compiled(x3, y3, k, strides, dil, pads) or self.tasks

    def _compiled(self, x3, y3, k, strides, dil, pads):
        """The compiled kernel's tasks where it applies (float32, contiguous), else ``None``."""
        if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in (x3, y3)):
            return None
        window = pool_kernel()
        if window is None:
            return None
        (w, wo), avg = (x3.shape[2], y3.shape[2]), not self.is_max
        cols = np.zeros((k[1], 2), np.int64)
        for kx in range(k[1]):
            lo, hi, _ = tap_range(w, wo, kx * dil[1] - pads[1], strides[1])
            cols[kx] = lo, max(lo, hi)
        recip = self.recip if avg else np.ones((1, 1), np.float32)
        args = (recip, cols, *k, *strides, *dil, pads[0], pads[1], int(avg))
        parts = self.backend.num_threads if y3.size * k[0] * k[1] >= PARALLEL_ELEMENTS else 1
        return [bind(window, x3, y3, *args, *r) for r in split(y3.shape[0] * y3.shape[1], parts)]

    def _range(self, y, pairs, ind, base):
        reduce = np.maximum if self.is_max else np.add
        if self.first_copy:
            np.copyto(pairs[0][0], pairs[0][1])
            rest = pairs[1:]
        else:
            y.fill(self.fill)
            rest = pairs
        if ind is not None:
            ind.fill(0)
            for dst, src, idst, isrc, mask in rest:
                np.greater(src, dst, out=mask)
                np.copyto(dst, src, where=mask)
                np.copyto(idst, isrc, where=mask)
            np.add(ind, base, out=ind)
            return
        for dst, src in rest:
            reduce(dst, src, out=dst)
        if not self.is_max:
            np.multiply(y, self.recip, out=y)

    def native_phases(self):
        """``[tasks]`` (``program.py``: native only where the compiled kernel took them)."""
        return [] if self.empty else [self.tasks]

    def on_execute(self, inputs, outputs):
        if not self.empty:
            parallel(self.backend, self.tasks)


GLOBAL_PARALLEL = 1 << 20  # inputs of a global pool split over the pool (measured: not below)


@cpu_execution("GlobalAveragePool", "GlobalMaxPool")
class GlobalPool(Execution):
    """``Y[n, c, 1, ...] = mean (or max) of X[n, c, ...]``, ``X: (N, C, *S) -> Y: (N, C, 1, ...)``."""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        nc = x.shape[0] * x.shape[1]
        self.x2 = view_as(x, (nc, -1)) if x.size else None
        self.y1 = view_as(y, (nc,))
        parts = self.backend.num_threads if x.size >= GLOBAL_PARALLEL else 1
        mean = self.op.type == "GlobalAveragePool"
        rows = rows_mean_kernel() if mean and x.dtype == y.dtype == np.float32 and x.flags.c_contiguous else None
        if rows is not None and self.x2 is not None:  # nothing to bind for an empty X (on_execute skips it)
            self.tasks = [bind(rows, self.x2, self.y1, *r) for r in split(nc, parts)]
            return
        reduce = np.mean if mean else np.max
        self.tasks = [lambda r=r: reduce(self.x2[r[0] : r[1]], axis=1, out=self.y1[r[0] : r[1]]) for r in split(nc, parts)]

    def native_phases(self):
        """``[tasks]`` (``program.py``: native only where the compiled mean took them)."""
        return [self.tasks] if self.x2 is not None and self.y1.size else []

    def on_execute(self, inputs, outputs):
        if self.x2 is not None and self.y1.size:
            parallel(self.backend, self.tasks)

"""CPU Resize (ONNX operators.md #Resize, opset-18 form), any axes, ``X: (*D) -> Y: (*D_out)``.

For each resized axis the output index ``i`` maps to an input coordinate ``x_orig(i)``
by ``coordinate_transformation_mode`` (float32, in the order onnxruntime evaluates it;
computed once by the shape function, ``mnnpy.ops.geometry.source_coords``):

* ``half_pixel``: ``(i + 0.5) / scale - 0.5``; ``pytorch_half_pixel``: the same, 0 when
  ``out == 1``; ``half_pixel_symmetric``: shifted by ``in/2 * (1 - out / (scale*in))``;
* ``align_corners``: ``i * (in - 1) / (out - 1)``; ``asymmetric``: ``i / scale``;
* ``tf_crop_and_resize``: ``start*(in-1) + i*(end-start)*(in-1)/(out-1)`` from ``roi``;
  coordinates outside ``[0, in-1]`` give ``extrapolation_value``.

``nearest`` rounds by ``nearest_mode``; all nearest axes become one ``np.take`` over
precomputed flat indices (integer up-sampling with floor rounding becomes a broadcast
copy). ``linear`` (2 taps) and ``cubic`` (4 taps, ``cubic_coeff_a``, ``exclude_outside``)
are separable: one 1-D pass per axis with precomputed index/weight arrays; input
indices are clamped to the edge.

float32 resizes of the last two axes (no extrapolated positions) run the compiled kernels of
``mnnpy.backends.cpu.kernels.resize`` instead, split by output rows over the backend's pool;
the NumPy paths remain for other dtypes, other axes, ``tf_crop_and_resize`` positions
outside the input, and machines where numba cannot compile.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.kernels.resize import kernels as resize_kernels
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, parallel, split
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch
from mnnpy.ops.geometry import interp_taps, nearest_index


@cpu_execution("Resize")
class Resize(Execution):
    """Resize by ``mode`` (nearest/linear/cubic) on any axes; see the module docstring."""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        a, geo = self.attrs, self.geometry["resize"]
        mode = a["mode"]
        self.extrap = np.asarray(a["extrapolation_value"], x.dtype)
        self.empty = y.size == 0 or x.size == 0
        if self.empty:
            return
        crop = a["coordinate_transformation_mode"] == "tf_crop_and_resize"
        maps = {}  # axis -> (coords, out-of-range mask or None)
        for ax, c in geo.coords.items():
            outside = ((c < 0) | (c > x.shape[ax] - 1)) if crop else None
            maps[ax] = (c, outside if outside is not None and outside.any() else None)
        if not maps:
            self.run = lambda: np.copyto(y, x)
        elif self._compiled(x, y, maps, mode, a):
            pass
        elif mode == "nearest":
            self._setup_nearest(x, y, maps, a["nearest_mode"])
        elif x.dtype.kind == "f":
            self._setup_separable(x, y, maps, mode, a["cubic_coeff_a"], a["exclude_outside"])
        else:
            self._setup_integer(x, y, maps, mode, a)

    def _compiled(self, x, y, maps, mode, a) -> bool:
        """Set up the compiled kernels where they apply (float32, contiguous, only the last two
        axes resized, no extrapolated positions); whether they did."""
        last = {x.ndim - 2, x.ndim - 1}
        if x.dtype != np.float32 or y.dtype != np.float32 or x.ndim < 2 or not set(maps) <= last:
            return False
        if any(m is not None for _, m in maps.values()) or not (x.flags.c_contiguous and y.flags.c_contiguous):
            return False
        ks = resize_kernels()
        if ks is None:
            return False
        h, w, ho, wo = *x.shape[-2:], *y.shape[-2:]
        x3, y3 = view_as(x, (-1, h, w)), view_as(y, (-1, ho, wo))
        ay, ax = x.ndim - 2, x.ndim - 1
        if mode == "nearest":
            iy, ix = (
                nearest_index(maps[k][0], a["nearest_mode"], x.shape[k]) if k in maps else np.arange(x.shape[k]) for k in (ay, ax)
            )
            fx = wo // w if wo % w == 0 and np.array_equal(ix, np.arange(wo) // (wo // w)) else 0
            self.tables = (np.ascontiguousarray(iy, np.int64), np.ascontiguousarray(ix, np.int64), fx)
            kernel = ks[0]
            self.nearest = (ks[2], x3)
        else:
            taps = []
            for k in (ay, ax):
                if k in maps:
                    idx, wt = interp_taps(maps[k][0], mode, x.shape[k], a["cubic_coeff_a"], a["exclude_outside"])
                else:
                    idx, wt = np.arange(x.shape[k])[None, :], np.ones((1, x.shape[k]))
                taps += [np.ascontiguousarray(idx, np.int64), np.ascontiguousarray(wt, np.float32)]
            self.tables = tuple(taps)
            kernel = ks[1]
        parts = self.backend.num_threads if y.size >= PARALLEL_ELEMENTS else 1
        tasks = [bind(kernel, x3, y3, *self.tables, *r) for r in split(y3.shape[0] * ho, parts)]
        self.run = lambda: parallel(self.backend, tasks)
        return True

    def fuse_add(self, z, y) -> bool:
        """Write ``z + Resize(X)`` into ``y`` (``z`` like ``y``, the other input of an ``Add``
        reading only this op's output), in the compiled nearest pass; ``False`` (nothing
        changed) where that pass is not used."""
        if getattr(self, "nearest", None) is None or self.empty:
            return False
        if any(a.dtype != np.float32 or not a.flags.c_contiguous or a.shape != y.shape for a in (z, y)):
            return False
        kernel, x3 = self.nearest
        ho, wo = y.shape[-2:]
        z3, y3 = view_as(z, (-1, ho, wo)), view_as(y, (-1, ho, wo))
        parts = self.backend.num_threads if y.size >= PARALLEL_ELEMENTS else 1
        tasks = [bind(kernel, x3, z3, y3, *self.tables, *r) for r in split(y3.shape[0] * ho, parts)]
        self.run = lambda: parallel(self.backend, tasks)
        return True

    def _setup_integer(self, x, y, maps, mode, a):
        """Integer data, linear/cubic: interpolated in float32 and truncated toward zero into
        ``y`` (onnxruntime's arithmetic and cast; uint8 ``[0, 3]`` at 0.25 gives 0)."""
        ws = self.backend.workspace()
        xf, yf = ws.take(x.shape, np.float32), ws.take(y.shape, np.float32)
        self.extrap = self.extrap.astype(np.float32)
        self._setup_separable(xf, yf, maps, mode, a["cubic_coeff_a"], a["exclude_outside"], ws)
        interpolate = self.run

        def run():
            np.copyto(xf, x)
            interpolate()
            np.copyto(y, yf, casting="unsafe")

        self.run = run

    def _setup_nearest(self, x, y, maps, nearest_mode):
        idx = {ax: nearest_index(c, nearest_mode, x.shape[ax]) for ax, (c, _) in maps.items()}
        masks = [(ax, m) for ax, (_, m) in maps.items() if m is not None]
        repeat = {ax: y.shape[ax] // x.shape[ax] for ax in idx if y.shape[ax] % x.shape[ax] == 0}
        if not masks and all(ax in repeat and np.array_equal(i, np.arange(y.shape[ax]) // repeat[ax]) for ax, i in idx.items()):
            xs, ys = [], []
            for ax in range(x.ndim):
                f = repeat.get(ax, 1)
                xs += [x.shape[ax], 1]
                ys += [x.shape[ax], f]
            yv, xv = view_as(y, ys), view_as(x, xs)
            self.run = lambda: np.copyto(yv, xv)
            return
        a0 = min(idx)
        outer = math.prod(x.shape[:a0])
        x2, y2 = view_as(x, (outer, -1)), view_as(y, (outer, -1))
        flat = scratch(y.shape[a0:], np.int64)
        stride = 1
        for ax in range(x.ndim - 1, a0 - 1, -1):
            i = idx.get(ax, np.arange(x.shape[ax]))
            shape = [1] * (x.ndim - a0)
            shape[ax - a0] = -1
            flat += i.reshape(shape) * stride
            stride *= x.shape[ax]
        self.flat = flat.reshape(-1)
        mask = None
        for ax, m in masks:
            shape = [1] * (x.ndim - a0)
            shape[ax - a0] = -1
            mask = m.reshape(shape) if mask is None else mask | m.reshape(shape)
        mask = None if mask is None else np.broadcast_to(mask, y.shape[a0:]).reshape(1, -1)

        def run():
            np.take(x2, self.flat, axis=1, out=y2, mode="clip")
            if mask is not None:
                np.copyto(y2, self.extrap, where=mask)

        self.run = run

    def _setup_separable(self, x, y, maps, mode, a, exclude_outside, ws=None):
        order = sorted(maps, key=lambda ax: y.shape[ax] / x.shape[ax])  # shrink first
        shape, passes, src = list(x.shape), [], x
        ws = ws or self.backend.workspace()  # intermediate passes and their scratch: rewritten every run
        for k, ax in enumerate(order):
            shape[ax] = y.shape[ax]
            dst = y if k == len(order) - 1 else ws.take(tuple(shape), x.dtype)
            c, outside = maps[ax]
            idx, w = interp_taps(c, mode, src.shape[ax], a, exclude_outside)
            pre, post = math.prod(shape[:ax]), math.prod(shape[ax + 1 :])
            s3, d3 = view_as(src, (pre, src.shape[ax], post)), view_as(dst, (pre, shape[ax], post))
            wt = w.astype(x.dtype).reshape(len(w), 1, -1, 1)
            m = None if outside is None else outside.reshape(1, -1, 1)
            passes.append((s3, d3, idx, wt, m, ws.like(d3)))
            src = dst

        def run():
            for s3, d3, idx, wt, m, tmp in passes:
                np.take(s3, idx[0], axis=1, out=d3, mode="clip")
                np.multiply(d3, wt[0], out=d3)
                for t in range(1, len(idx)):
                    np.take(s3, idx[t], axis=1, out=tmp, mode="clip")
                    np.multiply(tmp, wt[t], out=tmp)
                    np.add(d3, tmp, out=d3)
                if m is not None:
                    np.copyto(d3, self.extrap, where=m)

        self.run = run

    def on_execute(self, inputs, outputs):
        if not self.empty:
            self.run()

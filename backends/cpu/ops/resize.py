"""CPU Resize (ONNX operators.md #Resize, opset-18 form), any axes, ``X: (*D) -> Y: (*D_out)``.

For each resized axis the output index ``i`` maps to an input coordinate ``x_orig(i)``
by ``coordinate_transformation_mode`` (float32, in the order onnxruntime evaluates it):

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
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.ops.windows import shape_context, view_as
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.ops.resize import resize_scales_sizes


def source_coords(mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """``x_orig`` (float32) of each output index along one axis; see the module docstring."""
    i = np.arange(out_len, dtype=np.float32)
    f, s = np.float32, np.float32(scale)
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and out_len > 1):
        return (i + f(0.5)) / s - f(0.5)
    if mode == "pytorch_half_pixel":
        return np.zeros(out_len, np.float32)
    if mode == "half_pixel_symmetric":
        adjustment = f(out_len) / (s * f(in_len))
        offset = f(in_len) / f(2) * (f(1) - adjustment)
        # rounded once, as onnxruntime's compiled expression evaluates it (matters for floor/ceil ties)
        return ((i + f(0.5)).astype(np.float64) / np.float64(s) + np.float64(offset - f(0.5))).astype(np.float32)
    if mode == "align_corners":
        return i * f(in_len - 1) / f(out_len - 1) if out_len > 1 else np.zeros(out_len, np.float32)
    if mode == "asymmetric":  # in float64: x = i * in/out must hit exact ties (8 * 7/16 = 3.5)
        return (np.arange(out_len, dtype=np.float64) / np.float64(scale)).astype(np.float32)
    start, end = f(roi[0]), f(roi[1])
    if out_len > 1:
        return start * f(in_len - 1) + i * (end - start) * f(in_len - 1) / f(out_len - 1)
    return np.full(out_len, f(0.5) * (start + end) * f(in_len - 1), np.float32)


def nearest_index(x: np.ndarray, mode: str, in_len: int) -> np.ndarray:
    """Input index (int64, clamped to ``[0, in_len)``) for coordinates ``x`` by ``nearest_mode``."""
    x = x.astype(np.float64)
    if mode == "floor":
        idx = np.floor(x)
    elif mode == "ceil":
        idx = np.ceil(x)
    else:  # round half away from zero, except exact halves under round_prefer_floor
        idx = np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))
        if mode == "round_prefer_floor":
            idx = np.where(x == np.floor(x) + 0.5, np.floor(x), idx)
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def cubic_coeffs(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic weights ``(4, n)`` of taps at offsets -1, 0, 1, 2 for fractions ``t``."""

    def k(d):
        d = np.abs(d)
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return np.where(d <= 1, near, np.where(d < 2, far, 0.0))

    return np.stack([k(t + 1), k(t), k(1 - t), k(2 - t)])


def interp_taps(x: np.ndarray, mode: str, in_len: int, a: float, exclude_outside: int):
    """``(indices (T, n) int64, weights (T, n) float64)`` of linear (T=2) or cubic (T=4) taps."""
    if mode == "linear":
        xc = np.clip(x.astype(np.float64), 0, in_len - 1)
        lo = np.floor(xc)
        t = xc - lo
        return np.stack([lo, np.minimum(lo + 1, in_len - 1)]).astype(np.int64), np.stack([1 - t, t])
    x64 = x.astype(np.float64)
    lo = np.floor(x64)
    idx = lo[None, :] + np.arange(-1, 3)[:, None]
    w = cubic_coeffs(x64 - lo, a)
    if exclude_outside:
        w = np.where((idx < 0) | (idx > in_len - 1), 0.0, w)
        w = w / w.sum(axis=0, keepdims=True)
    return np.clip(idx, 0, in_len - 1).astype(np.int64), w


@cpu_execution("Resize")
class Resize(Execution):
    """Resize by ``mode`` (nearest/linear/cubic) on any axes; see the module docstring."""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        a = self.attrs
        scales, sizes = resize_scales_sizes(shape_context(self))
        r, mode, ctm = x.ndim, a["mode"], a["coordinate_transformation_mode"]
        axes = [ax % r for ax in a["axes"]] or list(range(r))
        roi = [(0.0, 1.0)] * r
        if ctm == "tf_crop_and_resize":
            vals = [float(v) for v in self.input_infos[1].value.reshape(-1)]
            na = len(vals) // 2
            for j, ax in enumerate(axes if na == len(axes) else range(r)):
                roi[ax] = (vals[j], vals[na + j])
        self.extrap = np.asarray(a["extrapolation_value"], x.dtype)
        self.empty = y.size == 0 or x.size == 0
        if self.empty:
            return
        crop = ctm == "tf_crop_and_resize"
        maps = {}  # axis -> (coords, out-of-range mask or None)
        for ax in range(r):
            if sizes[ax] == x.shape[ax] and scales[ax] == 1 and (not crop or roi[ax] == (0.0, 1.0)):
                continue
            c = source_coords(ctm, sizes[ax], x.shape[ax], scales[ax], roi[ax])
            outside = ((c < 0) | (c > x.shape[ax] - 1)) if crop else None
            maps[ax] = (c, outside if outside is not None and outside.any() else None)
        if not maps:
            self.run = lambda: np.copyto(y, x)
        elif mode == "nearest":
            self._setup_nearest(x, y, maps, a["nearest_mode"])
        else:
            self._setup_separable(x, y, maps, mode, a["cubic_coeff_a"], a["exclude_outside"])

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
        flat = np.zeros(y.shape[a0:], np.int64)
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

    def _setup_separable(self, x, y, maps, mode, a, exclude_outside):
        order = sorted(maps, key=lambda ax: y.shape[ax] / x.shape[ax])  # shrink first
        shape, passes, src = list(x.shape), [], x
        ws = self.backend.workspace()  # intermediate passes and their scratch: rewritten every run
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

"""CPU kernels of the vision ops: MaxUnpool, Col2Im, GridSample, RoiAlign,
NonMaxSuppression, AffineGrid (semantics: ONNX operators.md and its reference
implementation, which follows onnxruntime).

Interpolation is vectorised: per spatial dim a list of (index, weight) taps over the whole
output grid, then one gather per tap combination. Loops run over kernel taps, ROIs and
(batch, class) pairs, never over elements.
"""

from __future__ import annotations

import itertools

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import ShapeError
from mnnpy.ops.vision import affine_base_grid, nms_args, nms_select, unpool_shape

F32 = np.dtype(np.float32)


@cpu_execution("MaxUnpool")
class MaxUnpool(Execution):
    """Zero fill, scatter ``X`` at the flat indices ``I`` of the default-sized output (placed at
    the origin of a larger ``output_shape``)."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0].shape
        a = self.attrs
        inferred = (x[0], x[1], *unpool_shape(x, a["kernel_shape"], a["pads"], a["strides"]))
        y = outputs[0]
        self.size = int(np.prod(inferred))
        self.scratch = None if tuple(y.shape) == inferred else np.empty(inferred, y.dtype)
        self.window = tuple(slice(0, s) for s in inferred)

    def on_execute(self, inputs, outputs):
        x, idx = inputs[0], inputs[1]
        y = outputs[0]
        dst = y if self.scratch is None else self.scratch
        dst.fill(0)
        flat = idx.reshape(-1).astype(np.intp)
        if flat.size and (flat.min() < 0 or flat.max() >= self.size):
            raise ShapeError(f"MaxUnpool '{self.op.name}': index out of range [0, {self.size})")
        dst.reshape(-1)[flat] = x.reshape(-1)
        if self.scratch is not None:
            y.fill(0)
            y[self.window] = self.scratch


@cpu_execution("Col2Im")
class Col2Im(Execution):
    """Sum each block tap's column slab into a strided window of a padded image, then crop."""

    def on_resize(self, inputs, outputs):
        image, block, dil, pads, strides, nb = self.geometry["col2im"]
        n = len(image)
        y = outputs[0]
        self.padded = np.empty((*y.shape[:2], *(image[i] + pads[i] + pads[n + i] for i in range(n))), y.dtype)
        self.crop = (slice(None), slice(None), *(slice(pads[i], pads[i] + image[i]) for i in range(n)))
        self.nb = nb
        self.taps = []
        for k, tap in enumerate(itertools.product(*(range(b) for b in block))):
            win = tuple(slice(t * d, t * d + s * (m - 1) + 1, s) for t, d, s, m in zip(tap, dil, strides, nb))
            self.taps.append((k, win))
        self.k = len(self.taps)

    def on_execute(self, inputs, outputs):
        x = inputs[0]
        n, c = outputs[0].shape[:2]
        cols = x.reshape(n, c, self.k, *self.nb)
        p = self.padded
        p.fill(0)
        for k, win in self.taps:
            p[(slice(None), slice(None), *win)] += cols[:, :, k]
        np.copyto(outputs[0], p[self.crop])


def _reflect(x, lo, hi):
    """Reflect ``x`` by the near border until inside ``[lo, hi]`` (ONNX reference ``_gs_reflect``)."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    k = np.floor(d / rng)
    r = d - k * rng
    even = k % 2 == 0
    low_side = np.where(even, lo + r, hi - r)
    high_side = np.where(even, hi - r, lo + r)
    return np.where(below, low_side, np.where(above, high_side, x))


def _cubic_coeffs(t):
    """Keys cubic convolution weights (A = -0.75) of taps -1, 0, 1, 2 at fraction ``t``."""
    a = -0.75
    x = np.abs(t)
    return [
        ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a,
        ((a + 2) * x - (a + 3)) * x * x + 1,
        ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1,
        ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a,
    ]


@cpu_execution("GridSample")
class GridSample(Execution):
    """Per spatial dim: denormalise, pad-mode the coordinate, make (index, weight) taps;
    ``Y = sum over tap combinations of prod(weights) * X[n, :, idx...]``."""

    def on_resize(self, inputs, outputs):
        self.dims = self.input_infos[0].shape[2:]
        self.work = np.float64 if self.input_infos[0].dtype == np.float64 else F32

    def _taps(self, coord, size):
        a = self.attrs
        align, mode, pad = a["align_corners"], a["mode"], a["padding_mode"]
        x = (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if mode == "nearest":
            x = np.rint(x)
        out = (x < lo) | (x > hi)
        if pad == "border" and mode != "cubic":  # cubic: only the tap indices are clamped (onnxruntime)
            x = np.where(out, np.clip(x, 0, size - 1), x)
        elif pad == "reflection":
            x = np.where(out, _reflect(x, lo, hi), x)
        if mode == "nearest":
            pairs = [(np.trunc(x), np.ones_like(x))]
        else:
            x0 = np.floor(x)
            t = x - x0
            if mode == "linear":
                pairs = [(x0, 1 - t), (x0 + 1, t)]
            else:
                pairs = list(zip((x0 - 1, x0, x0 + 1, x0 + 2), _cubic_coeffs(t)))
        taps = []
        for i, w in pairs:
            if pad == "zeros":
                valid = (i >= 0) & (i < size)
                w = np.where(valid, w, 0)
            elif pad == "reflection":
                i = np.trunc(_reflect(i, lo, hi))
            taps.append((np.clip(i, 0, size - 1).astype(np.intp), w))
        return taps

    def on_execute(self, inputs, outputs):
        x, grid = inputs
        y = outputs[0]
        nd = len(self.dims)
        g = grid.astype(self.work)
        per_dim = [self._taps(g[..., nd - 1 - d], self.dims[d]) for d in range(nd)]
        n = x.shape[0]
        nidx = np.arange(n).reshape((n,) + (1,) * nd)
        acc = np.zeros(y.shape[:1] + y.shape[2:] + y.shape[1:2], self.work)  # (N, *out, C)
        xt = x.transpose(0, *range(2, 2 + nd), 1)  # (N, *spatial, C)
        for combo in itertools.product(*per_dim):
            w = combo[0][1]
            for _, wd in combo[1:]:
                w = w * wd
            vals = xt[(nidx, *(i for i, _ in combo))]
            acc += vals * w[..., None]
        np.copyto(y, np.moveaxis(acc, -1, 1), casting="unsafe")


@cpu_execution("RoiAlign")
class RoiAlign(Execution):
    """Per ROI: separable bilinear sample weights along y and x over the sampling grid of each
    bin; ``avg`` is two small matmuls, ``max`` a max over samples of the weighted corners."""

    def _axis(self, start, size, pooled, grid, limit):
        """``(low, high, w_low, w_high)`` of shape ``(pooled, grid)`` along one axis (weights 0 outside)."""
        bin_size = size / pooled
        p = np.arange(pooled)[:, None]
        i = np.arange(grid)[None, :]
        c = start + p * bin_size + (i + 0.5) * bin_size / grid
        valid = (c >= -1.0) & (c <= limit)
        c = np.maximum(c, 0)
        low = np.floor(c).astype(np.intp)
        top = low >= limit - 1
        low = np.where(top, limit - 1, low)
        high = np.where(top, limit - 1, low + 1)
        c = np.where(top, low, c)
        lw = c - low
        return low, high, np.where(valid, 1 - lw, 0), np.where(valid, lw, 0)

    def on_execute(self, inputs, outputs):
        x, rois, bidx = inputs
        y = outputs[0]
        a = self.attrs
        ph, pw = a["output_height"], a["output_width"]
        h, w = x.shape[2:]
        half = a["coordinate_transformation_mode"] == "half_pixel"
        off = 0.5 if half else 0.0
        scale, ratio = a["spatial_scale"], a["sampling_ratio"]
        if bidx.size and (bidx.min() < 0 or bidx.max() >= x.shape[0]):
            raise ShapeError(f"RoiAlign '{self.op.name}': batch index out of range")
        for r in range(rois.shape[0]):
            x0, y0, x1, y1 = (float(v) * scale - off for v in rois[r])
            rw, rh = x1 - x0, y1 - y0
            if not half:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
            gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
            img = x[int(bidx[r])].astype(np.float64)  # (C, H, W)
            if gh <= 0 or gw <= 0:
                y[r] = 0
                continue
            ylo, yhi, wylo, wyhi = self._axis(y0, rh, ph, gh, h)
            xlo, xhi, wxlo, wxhi = self._axis(x0, rw, pw, gw, w)
            if a["mode"] == "avg":
                my = np.zeros((ph, h))
                for idx, wt in ((ylo, wylo), (yhi, wyhi)):
                    np.add.at(my, (np.repeat(np.arange(ph), gh), idx.reshape(-1)), wt.reshape(-1))
                mx = np.zeros((pw, w))
                for idx, wt in ((xlo, wxlo), (xhi, wxhi)):
                    np.add.at(mx, (np.repeat(np.arange(pw), gw), idx.reshape(-1)), wt.reshape(-1))
                res = np.einsum("ph,chw,qw->cpq", my, img, mx) / max(gh * gw, 1)
            else:
                best = None
                for yi, wy in ((ylo, wylo), (yhi, wyhi)):
                    for xi, wx in ((xlo, wxlo), (xhi, wxhi)):
                        v = img[:, yi[:, :, None, None], xi[None, None, :, :]]  # (C, ph, gh, pw, gw)
                        v = v * (wy[:, :, None, None] * wx[None, None, :, :])
                        best = v if best is None else np.maximum(best, v)
                res = best.max(axis=(2, 4))
            np.copyto(y[r], res, casting="unsafe")


@cpu_execution("NonMaxSuppression")
class NonMaxSuppression(Execution):
    """Greedy per-(batch, class) NMS, the IoU of one kept box against all candidates at once."""

    def on_execute(self, inputs, outputs):
        vals = [None if v is None else np.asarray(v) for v in inputs]
        y = nms_select(*nms_args(vals), self.attrs["center_point_box"])
        if y.shape != outputs[0].shape:
            raise ShapeError(f"NonMaxSuppression '{self.op.name}': {y.shape[0]} boxes selected, planned {outputs[0].shape[0]}")
        np.copyto(outputs[0], y)


@cpu_execution("AffineGrid")
class AffineGrid(Execution):
    """``grid[n] = base @ theta[n]^T`` with the homogeneous base grid made at resize."""

    def on_resize(self, inputs, outputs):
        y = outputs[0]
        sizes = y.shape[1:-1]
        self.base = affine_base_grid(sizes, self.attrs["align_corners"]).reshape(-1, len(sizes) + 1)

    def on_execute(self, inputs, outputs):
        theta = inputs[0].astype(np.float64)
        y = outputs[0]
        g = np.einsum("pk,njk->npj", self.base, theta)
        np.copyto(y, g.reshape(y.shape), casting="unsafe")

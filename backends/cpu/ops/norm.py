"""CPU normalisation extras, LogSoftmax/Hardmax, GlobalMaxPool, LpPool and linear
(de)quantisation (ONNX operators.md; shapes from ``mnnpy.ops.norm``).

Row normalisations (LayerNormalization, InstanceNormalization, GroupNormalization)
view X as ``(rows, cols)`` and normalise each row in the stash dtype
(``_RowNorm``); scratch is made at resize. float32 LayerNormalization with a scale (and
bias) of one value per normalised element runs the compiled rows of
``mnnpy.backends.cpu.kernels.layer_norm`` instead (split over the pool when large).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.kernels.layer_norm import kernel as layer_norm_kernel
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, parallel, split
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import charge_taps, scratch
from mnnpy.ops.geometry import tap_slices


class AlongAxis(Execution):
    """An op along ``axis`` (opset-13 form: one axis, any rank) of ``X``; ``reduced_scratch``
    makes its scratch of X's shape with that axis kept as 1."""

    def reduced_scratch(self, *dtypes) -> list[np.ndarray]:
        """Sets ``self.axis``; one scratch array of the reduced shape per dtype in ``dtypes``
        (None: the output's dtype)."""
        shape = self.input_infos[0].shape
        self.axis = self.attrs["axis"] % len(shape)
        red = list(shape)
        red[self.axis] = 1
        return [scratch(red, self.output_infos[0].dtype if d is None else d) for d in dtypes]

    def exp_shifted(self, x, y, m) -> None:
        """``y = exp(x - max(x))`` along the axis, the max kept in ``m`` (no overflow)."""
        np.max(x, axis=self.axis, keepdims=True, out=m)
        np.subtract(x, m, out=y)
        np.exp(y, out=y)


@cpu_execution("LogSoftmax")
class LogSoftmax(AlongAxis):
    """``y = x - (max + log(sum(exp(x - max))))`` along ``axis`` (opset-13 semantics)."""

    def on_resize(self, inputs, outputs):
        self.m, self.s = self.reduced_scratch(None, None)

    def on_execute(self, inputs, outputs):
        x, y, m, s = inputs[0], outputs[0], self.m, self.s
        if y.size == 0:
            return
        self.exp_shifted(x, y, m)
        np.sum(y, axis=self.axis, keepdims=True, out=s)
        np.log(s, out=s)
        np.subtract(x, m, out=y)
        np.subtract(y, s, out=y)


@cpu_execution("Hardmax")
class Hardmax(AlongAxis):
    """``y = 1`` at the first maximum along ``axis``, 0 elsewhere (opset-13 semantics)."""

    def on_resize(self, inputs, outputs):
        (self.idx,) = self.reduced_scratch(np.int64)

    def on_execute(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0:
            return
        np.argmax(x, axis=self.axis, keepdims=True, out=self.idx)
        y.fill(0)
        np.put_along_axis(y, self.idx, 1, axis=self.axis)


class _RowNorm:
    """Normalise each row of ``x2 (rows, cols)``: ``d = x - mean``, ``inv = 1/sqrt(var + eps)``,
    ``d *= inv``; all in ``dtype`` (the stash type)."""

    def __init__(self, rows, cols, dtype, eps):
        self.d = scratch((rows, cols), dtype)
        self.mean = scratch((rows, 1), dtype)
        self.inv = scratch((rows, 1), dtype)
        self.cols = max(cols, 1)
        self.eps = eps

    def __call__(self, x2):
        d, mean, inv = self.d, self.mean, self.inv
        np.copyto(d, x2, casting="unsafe")
        np.sum(d, axis=1, keepdims=True, out=mean)
        np.divide(mean, self.cols, out=mean)
        np.subtract(d, mean, out=d)
        np.multiply(d, d, out=d)
        np.sum(d, axis=1, keepdims=True, out=inv)
        np.divide(inv, self.cols, out=inv)
        np.add(inv, self.eps, out=inv)
        np.sqrt(inv, out=inv)
        np.reciprocal(inv, out=inv)
        np.copyto(d, x2, casting="unsafe")
        np.subtract(d, mean, out=d)
        np.multiply(d, inv, out=d)
        return d


def _stash(attrs, dtype):
    return np.dtype(np.float32) if attrs.get("stash_type", 1) == 1 and dtype != np.float64 else np.dtype(dtype)


@cpu_execution("LayerNormalization")
class LayerNormalization(Execution):
    """``Y = (X - mean) * InvStdDev * Scale + B`` with statistics over dims ``axis..``;
    optional outputs ``Mean`` and ``InvStdDev`` (stash dtype, ``X.shape[:axis] + 1s``)."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.axis = self.attrs["axis"] % len(x.shape)
        rows = math.prod(x.shape[: self.axis])
        cols = math.prod(x.shape[self.axis :])
        self.norm = _RowNorm(rows, cols, _stash(self.attrs, x.dtype), self.attrs["epsilon"])
        self.shape = x.shape
        self.empty = rows * cols == 0
        self.tasks = None if self.empty else self._compiled(inputs, outputs, rows, cols)

    def _compiled(self, inputs, outputs, rows, cols):
        """The compiled rows' tasks where they apply (float32 throughout, contiguous, scale and
        bias of ``cols`` values), else ``None``."""
        arrays = [a for a in (*inputs[:3], *outputs) if a is not None]
        if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays) or self.norm.d.dtype != np.float32:
            return None
        if any(a is not None and a.size != cols for a in inputs[1:3]):
            return None
        rows_kernel = layer_norm_kernel()
        if rows_kernel is None:
            return None
        params = []  # scale, bias (zeros if absent): constants copied (the kernel takes writable arrays)
        for k in (1, 2):
            a = inputs[k] if len(inputs) > k else None
            if a is None or not a.flags.writeable:
                copy = scratch((cols,), np.float32)
                if a is not None:
                    np.copyto(copy, a.reshape(-1))
                a = copy
            params.append(view_as(a, (cols,)))
        args = (
            view_as(inputs[0], (rows, cols)),
            *params,
            float(self.attrs["epsilon"]),
            view_as(outputs[0], (rows, cols)),
            view_as(self.norm.mean, (rows,)),
            view_as(self.norm.inv, (rows,)),
        )
        parts = self.backend.num_threads if rows * cols >= PARALLEL_ELEMENTS else 1
        return [bind(rows_kernel, *args, *r) for r in split(rows, parts)]

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        if self.tasks is not None:
            parallel(self.backend, self.tasks)
            self._stats(outputs)
            return
        y = outputs[0]
        d = self.norm(inputs[0].reshape(self.norm.d.shape))
        np.copyto(y, d.reshape(self.shape), casting="unsafe")
        np.multiply(y, inputs[1], out=y)
        if len(inputs) > 2 and inputs[2] is not None:
            np.add(y, inputs[2], out=y)
        self._stats(outputs)

    def _stats(self, outputs):
        """The optional outputs ``Mean`` and ``InvStdDev`` from the row statistics."""
        for k, stat in ((1, self.norm.mean), (2, self.norm.inv)):
            if len(outputs) > k and outputs[k] is not None:
                np.copyto(outputs[k], stat.reshape(outputs[k].shape), casting="unsafe")


class _ChannelNorm(Execution):
    """Shared by Instance/GroupNormalization: rows = (N * groups), then per-channel affine."""

    groups = None

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        n, c = x.shape[0], x.shape[1]
        g = self.groups or c
        s = math.prod(x.shape[2:])
        self.empty = n * c * s == 0
        self.norm = _RowNorm(n * g, (c // g) * s, _stash(self.attrs, x.dtype), self.attrs["epsilon"])
        self.shape3 = (n, c, s)
        self.y3 = outputs[0].reshape(self.shape3)
        self.rep = None
        if self.input_infos[1].shape[0] != c:  # GroupNormalization-18: one value per group
            self.rep = np.repeat(np.arange(g), c // g)
            self.sc = scratch((c, 1), x.dtype)
            self.bc = scratch((c, 1), x.dtype)

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        d = self.norm(inputs[0].reshape(self.norm.d.shape))
        y = self.y3
        np.copyto(y, d.reshape(self.shape3), casting="unsafe")
        if self.rep is None:
            scale, bias = inputs[1].reshape(-1, 1), inputs[2].reshape(-1, 1)
        else:
            scale, bias = self.sc, self.bc
            np.take(inputs[1], self.rep, out=scale[:, 0])
            np.take(inputs[2], self.rep, out=bias[:, 0])
        np.multiply(y, scale, out=y)
        np.add(y, bias, out=y)


@cpu_execution("InstanceNormalization")
class InstanceNormalization(_ChannelNorm):
    """``y = scale[c] * (x - mean) / sqrt(var + eps) + B[c]``, statistics per (n, c) over spatial dims."""


@cpu_execution("GroupNormalization")
class GroupNormalization(_ChannelNorm):
    """``y = scale[c] * (x - mean) / sqrt(var + eps) + bias[c]``, statistics per (n, group)."""

    def on_resize(self, inputs, outputs):
        self.groups = self.attrs["num_groups"]
        super().on_resize(inputs, outputs)


@cpu_execution("LpNormalization")
class LpNormalization(AlongAxis):
    """``y = x / ||x||_p`` along ``axis`` (p 1 or 2); 0 where the norm is 0."""

    def on_resize(self, inputs, outputs):
        self.n, self.zero = self.reduced_scratch(None, bool)

    def on_execute(self, inputs, outputs):
        x, y, n = inputs[0], outputs[0], self.n
        if y.size == 0:
            return
        if self.attrs["p"] == 1:
            np.abs(x, out=y)
            np.sum(y, axis=self.axis, keepdims=True, out=n)
        else:
            np.multiply(x, x, out=y)
            np.sum(y, axis=self.axis, keepdims=True, out=n)
            np.sqrt(n, out=n)
        np.equal(n, 0, out=self.zero)
        np.divide(x, n, out=y)
        np.copyto(y, 0, where=self.zero)


@cpu_execution("LRN")
class LRN(Execution):
    """``y = x / (bias + alpha/size * sum_{c' in window(c)} x[c']^2) ** beta`` across channels,
    window ``[c - floor((size-1)/2), c + ceil((size-1)/2)]`` clipped to the channels."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        c, size = x.shape[1], self.attrs["size"]
        self.sq = scratch(x.shape, x.dtype)
        self.ss = scratch(x.shape, x.dtype)
        lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
        lo, hi = min(lo, c), min(hi, c)  # offsets past the channels add nothing (size may be 2**40)
        self.pairs = []
        for off in range(-lo, hi + 1):
            a, b = max(0, -off), min(c, c - off)
            if a < b:
                self.pairs.append((slice(a, b), slice(a + off, b + off)))

    def on_execute(self, inputs, outputs):
        x, y, sq, ss = inputs[0], outputs[0], self.sq, self.ss
        a = self.attrs
        np.multiply(x, x, out=sq)
        ss.fill(0)
        for dst, src in self.pairs:
            np.add(ss[:, dst], sq[:, src], out=ss[:, dst])
        np.multiply(ss, a["alpha"] / a["size"], out=ss)
        np.add(ss, a["bias"], out=ss)
        np.power(ss, a["beta"], out=ss)
        np.divide(x, ss, out=y)


@cpu_execution("MeanVarianceNormalization")
class MeanVarianceNormalization(Execution):
    """``y = (x - mean) / (sqrt(max(E[x^2] - mean^2, 0)) + 1e-9)`` over ``axes``."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        rank = len(x.shape)
        self.axes = tuple(sorted(a % rank for a in self.attrs["axes"]))
        red = [1 if i in self.axes else d for i, d in enumerate(x.shape)]
        self.m = scratch(red, x.dtype)
        self.v = scratch(red, x.dtype)

    def on_execute(self, inputs, outputs):
        x, y, m, v = inputs[0], outputs[0], self.m, self.v
        if y.size == 0:
            return
        np.mean(x, axis=self.axes, keepdims=True, out=m)
        np.multiply(x, x, out=y)
        np.mean(y, axis=self.axes, keepdims=True, out=v)
        np.subtract(v, m * m, out=v)
        np.maximum(v, 0, out=v)
        np.sqrt(v, out=v)
        np.add(v, 1e-9, out=v)
        np.subtract(x, m, out=y)
        np.divide(y, v, out=y)


@cpu_execution("LpPool")
class LpPool(Execution):
    """``Y = (sum over the window of |X|^p) ** (1/p)``; padding adds 0. Taps of the window
    are strided slices of ``|X|^p`` (see ``backends/cpu/ops/pool.py``)."""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        k = list(self.attrs["kernel_shape"])
        out, strides, dil, pads = self.geometry["window"].unpack()
        nd, spatial = len(k), x.shape[2:]
        self.empty = y.size == 0
        if self.empty:
            return
        nc = x.shape[0] * x.shape[1]
        charge_taps(math.prod(k), "CPU LpPool")
        self.xp = scratch((nc, *spatial), x.dtype)
        self.x3 = view_as(x, (nc, *spatial))
        self.y3 = view_as(y, (nc, *out))
        self.taps = []
        for tap in itertools.product(*[range(t) for t in k]):
            s = tap_slices(spatial, out, tap, strides, dil, pads[:nd])
            if s is not None:
                o, i = s
                self.taps.append((self.y3[(slice(None),) + o], self.xp[(slice(None),) + i]))
        self.p = self.attrs["p"]

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        xp, p = self.xp, self.p
        np.abs(self.x3, out=xp)
        if p != 1:
            np.power(xp, p, out=xp)
        self.y3.fill(0)
        for dst, src in self.taps:
            np.add(dst, src, out=dst)
        if p != 1:
            np.power(self.y3, 1.0 / p, out=self.y3)


class _Linear(Execution):
    """Shared by Quantize/DequantizeLinear: scale and zero point expanded to X's shape once
    (per tensor: scalars; per axis: reshaped to broadcast; blocked: repeated along ``axis``,
    cropped to X) into scratch when they are not constants, at resize when they are."""

    def on_resize(self, inputs, outputs):
        kind, axis = self.geometry["quant"]
        x = self.input_infos[0]
        self.kind, self.axis, self.xshape = kind, axis, x.shape
        self.block = self.attrs["block_size"]
        self.has_zp = len(inputs) > 2 and inputs[2] is not None
        self.const = all(i.value is not None for i in self.input_infos[1:] if i is not None)
        if self.const:
            self.scale, self.zp = self._params(inputs)

    def _expand(self, v):
        if self.kind == "tensor":
            return v.reshape(())
        if self.kind == "axis":
            shape = [1] * len(self.xshape)
            shape[self.axis] = self.xshape[self.axis]
            return v.reshape(shape)
        r = np.repeat(v, self.block, axis=self.axis)
        return r[tuple(slice(0, d) for d in self.xshape)]

    def _params(self, inputs):
        scale = self._expand(np.asarray(inputs[1]))
        zp = self._expand(np.asarray(inputs[2])) if self.has_zp else None
        return scale, zp


@cpu_execution("QuantizeLinear")
class QuantizeLinear(_Linear):
    """``y = saturate(round_half_even(x / scale) + zero_point)`` in the scale's precision
    (float32 for an int32 x), then clipped to the output type's range."""

    def on_resize(self, inputs, outputs):
        super().on_resize(inputs, outputs)
        y = self.output_infos[0]
        sdt = self.input_infos[1].dtype
        self.wdt = np.dtype(np.float64) if sdt == np.float64 else np.dtype(np.float32)
        if sdt == np.float16 and self.attrs["precision"] == 0:
            self.wdt = np.dtype(np.float32)
        self.tmp = scratch(y.shape, self.wdt)
        info = np.iinfo(y.dtype)
        self.lo, self.hi = info.min, info.max

    def on_execute(self, inputs, outputs):
        scale, zp = (self.scale, self.zp) if self.const else self._params(inputs)
        t = self.tmp
        np.copyto(t, inputs[0], casting="unsafe")
        np.divide(t, scale, out=t, casting="unsafe")
        np.rint(t, out=t)
        if zp is not None:
            np.add(t, zp, out=t, casting="unsafe")
        np.clip(t, self.lo, self.hi, out=t)
        np.copyto(outputs[0], t, casting="unsafe")


@cpu_execution("DequantizeLinear")
class DequantizeLinear(_Linear):
    """``y = (x - zero_point) * scale`` (the difference exact in float64 for 32-bit ints)."""

    def on_resize(self, inputs, outputs):
        super().on_resize(inputs, outputs)
        y = self.output_infos[0]
        wide = self.input_infos[0].dtype.itemsize >= 4
        self.tmp = scratch(y.shape, np.float64 if wide else np.float32)

    def on_execute(self, inputs, outputs):
        scale, zp = (self.scale, self.zp) if self.const else self._params(inputs)
        t = self.tmp
        np.copyto(t, inputs[0], casting="unsafe")
        if zp is not None:
            np.subtract(t, zp, out=t, casting="unsafe")
        np.multiply(t, scale, out=t, casting="unsafe")
        np.copyto(outputs[0], t, casting="unsafe")

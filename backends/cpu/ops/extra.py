"""CPU kernels of further ONNX ops: bitwise ops, Shrink, ReverseSequence, Compress,
Unique, Det, RMSNormalization, CenterCropPad (formulas: ONNX operators.md).

Each kernel writes into its planned output (``out=``/``np.copyto``); index grids and
slices are made in ``on_resize``. Float16 composites are computed in float32 and rounded
once, as onnxruntime does.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import ShapeError
from mnnpy.ops.extra import center_crop_pad_slices, unique_parts

F32 = np.dtype(np.float32)

_BITWISE = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor}


@cpu_execution(*_BITWISE)
class Bitwise(Execution):
    """``C = A op B`` (broadcast) on integers."""

    def on_resize(self, inputs, outputs):
        self.f = _BITWISE[self.op.type]

    def on_execute(self, inputs, outputs):
        self.f(inputs[0], inputs[1], out=outputs[0])


@cpu_execution("Shrink")
class Shrink(Execution):
    """``Y = x + bias (x < -lambd); x - bias (x > lambd); 0`` (computed in float64 for integers)."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.work = np.float64 if x.dtype.kind in "iu" else x.dtype
        self.lo = np.empty(x.shape, bool)
        self.hi = np.empty(x.shape, bool)

    def on_execute(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        lambd, bias = self.attrs["lambd"], self.attrs["bias"]
        np.less(x, -lambd, out=self.lo)
        np.greater(x, lambd, out=self.hi)
        xw = x.astype(self.work, copy=False)
        y.fill(0)
        np.copyto(y, xw + bias, where=self.lo, casting="unsafe")
        np.copyto(y, xw - bias, where=self.hi, casting="unsafe")


@cpu_execution("ReverseSequence")
class ReverseSequence(Execution):
    """``Y[b, t] = X[b, len[b]-1-t]`` for ``t < len[b]`` else ``X[b, t]`` (one gather along time)."""

    def on_resize(self, inputs, outputs):
        shape = self.input_infos[0].shape
        self.b, self.t = self.attrs["batch_axis"], self.attrs["time_axis"]
        self.steps = np.arange(shape[self.t])
        self.idx_shape = [1] * len(shape)
        self.idx_shape[self.b], self.idx_shape[self.t] = shape[self.b], shape[self.t]

    def on_execute(self, inputs, outputs):
        x, lens = inputs
        n = x.shape[self.t]
        if lens.size and (lens.min() < 0 or lens.max() > n):
            raise ShapeError(f"ReverseSequence '{self.op.name}': sequence_lens must be in [0, {n}]")
        lens = lens.astype(np.intp)[:, None]
        t = self.steps[None, :]
        idx = np.where(t < lens, lens - 1 - t, t)  # (batch, time)
        if self.b > self.t:
            idx = idx.T
        np.copyto(outputs[0], np.take_along_axis(x, idx.reshape(self.idx_shape), axis=self.t))


@cpu_execution("Compress")
class Compress(Execution):
    """``Y = compress(condition, X, axis)`` (flattened when no axis)."""

    def on_execute(self, inputs, outputs):
        cond = inputs[1].reshape(-1).astype(bool)
        np.compress(cond, inputs[0], axis=self.attrs["axis"], out=outputs[0])


@cpu_execution("Unique")
class Unique(Execution):
    """``Y, indices, inverse_indices, counts`` (numpy ``unique``; first-occurrence order when unsorted)."""

    def on_execute(self, inputs, outputs):
        parts = unique_parts(inputs[0], self.attrs["axis"], self.attrs["sorted"])
        for k, p in enumerate(parts):
            if k < len(outputs) and outputs[k] is not None:
                np.copyto(outputs[k], p.reshape(outputs[k].shape))


@cpu_execution("Det")
class Det(Execution):
    """``Y = det(X)`` per trailing matrix (LU, float64 for float16)."""

    def on_execute(self, inputs, outputs):
        x = inputs[0]
        if x.dtype == np.float16:
            x = x.astype(F32)
        y = np.linalg.det(x) if x.size else np.ones(x.shape[:-2], x.dtype)
        np.copyto(outputs[0], y, casting="unsafe")


@cpu_execution("RMSNormalization")
class RMSNormalization(Execution):
    """``Y = X / sqrt(mean(X^2, axes >= axis) + eps) * scale`` (float32 statistics)."""

    def on_resize(self, inputs, outputs):
        shape = self.input_infos[0].shape
        axis = self.attrs["axis"] % len(shape)
        self.axes = tuple(range(axis, len(shape)))
        self.work = F32 if self.input_infos[0].dtype == np.float16 else self.input_infos[0].dtype
        self.xw = np.empty(shape, self.work)
        self.sq = np.empty(shape, self.work)
        self.ms = np.empty(shape[:axis] + (1,) * len(self.axes), self.work)

    def on_execute(self, inputs, outputs):
        xw, sq, ms = self.xw, self.sq, self.ms
        np.copyto(xw, inputs[0], casting="unsafe")
        np.multiply(xw, xw, out=sq)
        np.mean(sq, axis=self.axes, keepdims=True, out=ms)
        np.add(ms, self.attrs["epsilon"], out=ms)
        np.sqrt(ms, out=ms)
        np.divide(xw, ms, out=xw)
        np.multiply(xw, inputs[1], out=xw, casting="unsafe")
        np.copyto(outputs[0], xw, casting="unsafe")


@cpu_execution("CenterCropPad")
class CenterCropPad(Execution):
    """Zero the output, then copy the centred crop of the input into the centred window."""

    def on_resize(self, inputs, outputs):
        shape = self.input_infos[0].shape
        axes = [a % len(shape) for a in self.attrs["axes"]] or list(range(len(shape)))
        target = tuple(outputs[0].shape[a] for a in axes)
        _, self.crop, self.pad = center_crop_pad_slices(shape, target, axes)
        self.full = outputs[0][self.pad].shape == outputs[0].shape

    def on_execute(self, inputs, outputs):
        if not self.full:
            outputs[0].fill(0)
        np.copyto(outputs[0][self.pad], inputs[0][self.crop])

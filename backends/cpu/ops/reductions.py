"""CPU reductions (ReduceSum, ReduceMax, ...), ArgMax/ArgMin and TopK (ONNX operators.md).

Reductions run numpy's reductions with ``out=`` into the output viewed with the reduced
axes kept (a view: the output is contiguous). An empty ``axes`` tuple (with
``noop_with_empty_axes``) applies only the elementwise part (``ReduceL1`` -> ``|x|``),
as the ONNX reference does. Reductions over an empty set give the spec's identities
(0, 1, -inf/+inf or the integer extremes for Max/Min, -inf for the log reductions).
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch
from mnnpy.ops.reductions import REDUCTIONS


def lowest(dtype: np.dtype):
    """The identity of max over ``dtype`` (-inf, the integer minimum, False)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(-np.inf)
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def highest(dtype: np.dtype):
    """The identity of min over ``dtype`` (+inf, the integer maximum, True)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(np.inf)
    if dtype.kind == "b":
        return True
    return np.iinfo(dtype).max


@cpu_execution(*REDUCTIONS)
class Reduce(Execution):
    """``reduced = f(data, axes, keepdims)`` for the nine reductions (see the module docs).

    data: any shape and numeric dtype (bool for Max/Min). ``ReduceL2`` on integers takes
    the root in float64 and truncates. Full-size scratch only where an elementwise step
    precedes the sum (L1, L2, SumSquare, LogSumExp).
    """

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.axes = self.geometry["axes"]
        kshape = tuple(1 if i in self.axes else d for i, d in enumerate(x.shape))
        self.yk = outputs[0].reshape(kshape)
        t = self.op.type
        self.tmp = None
        if t in ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"):
            self.tmp = scratch(x.shape, x.dtype)
        self.mx = scratch(kshape, x.dtype) if t == "ReduceLogSumExp" else None
        self.root = scratch(kshape, np.float64) if t == "ReduceL2" and x.dtype.kind != "f" else None
        if t in ("ReduceLogSum", "ReduceLogSumExp") and x.dtype.kind != "f":
            # integers: computed in float64, truncated into the output (as onnxruntime does)
            self.f64 = scratch(kshape, np.float64)
            self.tmp = scratch(x.shape, np.float64) if t == "ReduceLogSumExp" else None
            self.mx = scratch(kshape, np.float64) if t == "ReduceLogSumExp" else None
        else:
            self.f64 = None
        self.run = getattr(self, "_" + t[len("Reduce") :].lower())

    def on_execute(self, inputs, outputs):
        self.run(inputs[0], self.yk)

    def _sum(self, x, y):
        np.sum(x, axis=self.axes, keepdims=True, out=y)

    def _max(self, x, y):
        np.max(x, axis=self.axes, keepdims=True, out=y, initial=lowest(x.dtype))

    def _min(self, x, y):
        np.min(x, axis=self.axes, keepdims=True, out=y, initial=highest(x.dtype))

    def _prod(self, x, y):
        np.prod(x, axis=self.axes, keepdims=True, out=y)

    def _l1(self, x, y):
        np.abs(x, out=self.tmp)
        np.sum(self.tmp, axis=self.axes, keepdims=True, out=y)

    def _sumsquare(self, x, y):
        np.multiply(x, x, out=self.tmp)
        np.sum(self.tmp, axis=self.axes, keepdims=True, out=y)

    def _l2(self, x, y):
        self._sumsquare(x, y)
        if self.root is None:
            np.sqrt(y, out=y)
        else:
            np.sqrt(y, out=self.root)
            np.copyto(y, self.root, casting="unsafe")

    def _logsum(self, x, y):
        acc = y if self.f64 is None else self.f64
        np.sum(x, axis=self.axes, keepdims=True, out=acc)
        np.log(acc, out=acc)
        if acc is not y:
            np.copyto(y, acc, casting="unsafe")

    def _logsumexp(self, x, y):
        acc, mx = (y if self.f64 is None else self.f64), self.mx
        np.max(x, axis=self.axes, keepdims=True, out=mx, initial=lowest(mx.dtype))
        np.copyto(mx, 0, where=~np.isfinite(mx))
        np.subtract(x, mx, out=self.tmp)
        np.exp(self.tmp, out=self.tmp)
        np.sum(self.tmp, axis=self.axes, keepdims=True, out=acc)
        np.log(acc, out=acc)
        np.add(acc, mx, out=acc)
        if acc is not y:
            np.copyto(y, acc, casting="unsafe")


@cpu_execution("ArgMax", "ArgMin")
class ArgExtreme(Execution):
    """``reduced = argmax/argmin(data, axis)`` (int64), the first extreme or with
    ``select_last_index`` the last (the arg of the axis reversed, mapped back)."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.axis = self.attrs["axis"] % len(x.shape)
        self.n = x.shape[self.axis]
        self.last = bool(self.attrs["select_last_index"])
        self.y = outputs[0].reshape(tuple(d for i, d in enumerate(x.shape) if i != self.axis))
        self.fn = np.argmax if self.op.type == "ArgMax" else np.argmin
        rev = [slice(None)] * len(x.shape)
        rev[self.axis] = slice(None, None, -1)
        self.rev = tuple(rev)

    def on_execute(self, inputs, outputs):
        x, y = inputs[0], self.y
        if x.size == 0:
            return
        if self.last:
            self.fn(x[self.rev], axis=self.axis, out=y)
            np.subtract(self.n - 1, y, out=y)
        else:
            self.fn(x, axis=self.axis, out=y)


@cpu_execution("TopK")
class TopK(Execution):
    """``Values, Indices`` of the K largest (``largest``) or smallest elements along ``axis``,
    sorted, ties by lower index (a stable argsort; for largest, of the reversed axis)."""

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.axis = self.attrs["axis"] % len(x.shape)
        self.n = x.shape[self.axis]
        self.k = outputs[0].shape[self.axis]
        self.largest = bool(self.attrs["largest"])
        rev = [slice(None)] * len(x.shape)
        rev[self.axis] = slice(None, None, -1)
        self.rev = tuple(rev)
        head = [slice(None)] * len(x.shape)
        head[self.axis] = slice(0, self.k)
        self.head = tuple(head)
        self.empty = math.prod(outputs[0].shape) == 0

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        x, vals, idx = inputs[0], outputs[0], outputs[1]
        if self.largest:
            order = np.argsort(x[self.rev], axis=self.axis, kind="stable")[self.rev][self.head]
            np.subtract(self.n - 1, order, out=idx)
        else:
            np.copyto(idx, np.argsort(x, axis=self.axis, kind="stable")[self.head])
        np.copyto(vals, np.take_along_axis(x, idx, axis=self.axis))

"""CPU shape and data-movement ops: Expand, Tile, Range, GatherElements, GatherND, ScatterND,
ScatterElements, OneHot, DepthToSpace, SpaceToDepth, Trilu, CumSum, NonZero, EyeLike, Size,
Einsum (ONNX operators.md, the newest opset's form of each).

Views, index grids and masks are made in ``on_resize``; ``on_execute`` copies or indexes
into the preallocated output. Indices out of range raise ``ShapeError`` (onnxruntime
fails the run likewise). Results of data movement are bit-exact copies.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import ShapeError
from mnnpy.ops.movement import nonzero_indices

REDUCE_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def as_shape(a: np.ndarray, shape) -> np.ndarray:
    """A view of ``a`` with ``shape`` (never a copy: writes through it reach ``a``)."""
    v = a.view()
    v.shape = tuple(shape)
    return v


def normalise(exe: Execution, idx: np.ndarray, dims, what: str = "index") -> np.ndarray:
    """``idx`` as intp with negatives counted from the end of ``dims`` (broadcast against
    ``idx``); raises ``ShapeError`` for an index outside ``[-d, d)``."""
    idx = idx.astype(np.intp)
    dims = np.asarray(dims, np.intp)
    if idx.size:
        bad = (idx < -dims) | (idx >= dims)
        if bad.any():
            raise ShapeError(f"{exe.op.type} '{exe.op.name}': {what} {idx[bad][0]} out of range")
        idx = np.where(idx < 0, idx + dims, idx)
    return idx


def scalar(exe: Execution, inputs, i: int, default=None):
    """The one element of input ``i`` (its value at resize when constant)."""
    if i >= len(inputs) or exe.input_infos[i] is None:
        return default
    v = exe.input_infos[i].value
    return np.asarray(inputs[i] if v is None else v).reshape(-1)[0]


@cpu_execution("Expand")
class Expand(Execution):
    """``Y = broadcast_to(X, Y.shape)``: one broadcasting copy."""

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], inputs[0])


@cpu_execution("Tile")
class Tile(Execution):
    """``Y = tile(X, repeats)``: Y viewed as ``(r0, d0, r1, d1, ...)`` takes X broadcast
    as ``(1, d0, 1, d1, ...)`` in one copy (repeats follow from the shapes)."""

    def on_resize(self, inputs, outputs):
        x, y = self.input_infos[0].shape, outputs[0].shape
        self.empty = outputs[0].size == 0
        if not self.empty:
            reps = [o // d for o, d in zip(y, x)]
            self.dst = as_shape(outputs[0], [v for r, d in zip(reps, x) for v in (r, d)])
            self.src_shape = [v for d in x for v in (1, d)]

    def on_execute(self, inputs, outputs):
        if not self.empty:
            np.copyto(self.dst, inputs[0].reshape(self.src_shape))


@cpu_execution("Range")
class Range(Execution):
    """``Y[i] = start + i * delta``, computed in float64 (floats; float16 through
    ``stash_type``'s float32/float64) or int64 (integers), then cast to Y's dtype."""

    def on_resize(self, inputs, outputs):
        y = outputs[0]
        self.wide = np.int64 if y.dtype.kind in "iu" else np.float64
        if y.dtype == np.float16:
            self.wide = np.float32 if self.attrs["stash_type"] == 1 else np.float64
        self.steps = np.arange(y.size, dtype=self.wide)
        self.known = all(i.value is not None for i in self.input_infos)
        self.result = self._compute(inputs) if self.known else None

    def _compute(self, inputs):
        start = np.asarray(scalar(self, inputs, 0)).astype(self.wide)
        delta = np.asarray(scalar(self, inputs, 2)).astype(self.wide)
        return (self.steps * delta + start).astype(self.output_infos[0].dtype)

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], self.result if self.known else self._compute(inputs))


def element_keys(shape, axis: int) -> list:
    """Open index grids over ``shape`` (``np.ogrid``), the one on ``axis`` to be replaced."""
    return list(np.ogrid[tuple(slice(0, d) for d in shape)]) if len(shape) else []


def element_setup(exe) -> tuple[int, int, list]:
    """``(axis, data's size on it, open grids over indices)`` of Gather/ScatterElements."""
    x, idx = exe.input_infos[0].shape, exe.input_infos[1].shape
    axis = exe.attrs["axis"] % len(x)
    return axis, x[axis], element_keys(idx, axis)


@cpu_execution("GatherElements")
class GatherElements(Execution):
    """``Y[i..] = X[i.. with axis -> indices[i..]]``: fancy indexing with open grids."""

    def on_resize(self, inputs, outputs):
        self.axis, self.dim, self.keys = element_setup(self)
        self.const = self.input_infos[1].value is not None
        if self.const:
            self.keys[self.axis] = normalise(self, self.input_infos[1].value, self.dim)

    def on_execute(self, inputs, outputs):
        if not self.const:
            self.keys[self.axis] = normalise(self, inputs[1], self.dim)
        np.copyto(outputs[0], inputs[0][tuple(self.keys)])


@cpu_execution("GatherND")
class GatherND(Execution):
    """``Y[b.., m..] = X[b.., indices[b.., m.., :]]`` over ``batch_dims`` leading dims."""

    def on_resize(self, inputs, outputs):
        x, idx = self.input_infos[0].shape, self.input_infos[1].shape
        b = self.attrs["batch_dims"]
        self.last = idx[-1]
        self.nb = int(np.prod(x[:b], dtype=np.int64))
        self.x_shape = (self.nb,) + tuple(x[b:])
        self.dims = np.array(x[b : b + self.last], np.intp)
        self.idx_shape = (self.nb, -1, self.last)
        m = int(np.prod(idx[b:-1], dtype=np.int64))
        self.dst = as_shape(outputs[0], (self.nb, m) + tuple(x[b + self.last :]))
        self.batch = np.arange(self.nb)[:, None]

    def on_execute(self, inputs, outputs):
        if outputs[0].size == 0:
            return
        idx = normalise(self, inputs[1].reshape(self.idx_shape), self.dims)
        x = inputs[0].reshape(self.x_shape)
        keys = (self.batch,) + tuple(idx[..., j] for j in range(self.last))
        np.copyto(self.dst, x[keys])


class _Scatter(Execution):
    """``Y = X``, then ``Y[keys] = updates`` (reduction ``none``: the last write wins) or
    ``ufunc.at(Y, keys, updates)``; ``keys(indices)``: the subclass's index tuple."""

    def on_execute(self, inputs, outputs):
        y = outputs[0]
        np.copyto(y, inputs[0])
        if inputs[2].size == 0:
            return
        keys = self.keys(inputs[1])
        if self.ufunc is None:
            y[keys] = inputs[2]
        else:
            self.ufunc.at(y, keys, inputs[2])


@cpu_execution("ScatterND")
class ScatterND(_Scatter):
    """``Y = X``, then ``Y[indices[i.., :]] (reduction)= updates[i..]`` (``ufunc.at`` for
    add/mul/max/min, so repeated indices accumulate; with ``none`` the last write wins)."""

    def on_resize(self, inputs, outputs):
        x, idx = self.input_infos[0].shape, self.input_infos[1].shape
        self.last = idx[-1]
        self.dims = np.array(x[: self.last], np.intp)
        self.ufunc = REDUCE_AT.get(self.attrs["reduction"])

    def keys(self, indices) -> tuple:
        """The index tuple of ``indices (..., last)``: one index array per leading axis of Y."""
        idx = normalise(self, indices, self.dims)
        return tuple(idx[..., j] for j in range(self.last))


@cpu_execution("ScatterElements")
class ScatterElements(_Scatter):
    """``Y = X``, then ``Y[i.. with axis -> indices[i..]] (reduction)= updates[i..]``."""

    def on_resize(self, inputs, outputs):
        self.axis, self.dim, self.grid = element_setup(self)
        self.ufunc = REDUCE_AT.get(self.attrs["reduction"])

    def keys(self, indices) -> tuple:
        """The index tuple: the resize-time index grid with ``axis`` replaced by ``indices``."""
        self.grid[self.axis] = normalise(self, indices, self.dim)
        return tuple(self.grid)


@cpu_execution("OneHot")
class OneHot(Execution):
    """``Y = on`` where ``indices`` (truncated to int, negatives + depth) equals the
    position along ``axis``, else ``off``; out-of-range indices give an all-``off`` row."""

    def on_resize(self, inputs, outputs):
        y = outputs[0]
        self.axis = self.attrs["axis"] % y.ndim
        self.depth = y.shape[self.axis]
        shape = [1] * y.ndim
        shape[self.axis] = self.depth
        self.positions = np.arange(self.depth, dtype=np.int64).reshape(shape)

    def on_execute(self, inputs, outputs):
        y, values = outputs[0], inputs[2]
        idx = np.expand_dims(inputs[0].astype(np.int64), self.axis)
        idx = np.where(idx < 0, idx + self.depth, idx)
        y.fill(values[0])
        np.copyto(y, values[1], where=idx == self.positions)


@cpu_execution("DepthToSpace", "SpaceToDepth")
class BlockRearrange(Execution):
    """DepthToSpace / SpaceToDepth as one transposed copy between 6-D views.

    DepthToSpace DCR: ``X(N, b, b, C', H, W) -> Y(N, C', H, b, W, b)`` (CRD: ``X(N, C', b, b, H, W)``);
    SpaceToDepth is the inverse permutation (DCR: ``Y(N, b, b, C, H', W')``, CRD: ``Y(N, C, b, b, H', W')``).
    """

    def on_resize(self, inputs, outputs):
        b, crd = self.attrs["blocksize"], self.attrs["mode"] == "CRD"
        if self.op.type == "DepthToSpace":
            n, c, h, w = self.input_infos[0].shape
            c2 = c // (b * b)
            self.src_shape = (n, c2, b, b, h, w) if crd else (n, b, b, c2, h, w)
            self.perm = (0, 1, 4, 2, 5, 3) if crd else (0, 3, 4, 1, 5, 2)
            self.dst = as_shape(outputs[0], (n, c2, h, b, w, b))
        else:
            n, c, h, w = self.input_infos[0].shape
            self.src_shape = (n, c, h // b, b, w // b, b)
            self.perm = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
            self.dst = as_shape(outputs[0], [self.src_shape[p] for p in self.perm])

    def on_execute(self, inputs, outputs):
        np.copyto(self.dst, inputs[0].reshape(self.src_shape).transpose(self.perm))


@cpu_execution("Trilu")
class Trilu(Execution):
    """``Y = X`` with the elements outside the triangle zeroed: upper keeps ``j - i >= k``,
    lower keeps ``j - i <= k`` over the last two dims (``k`` 0 when absent)."""

    def on_resize(self, inputs, outputs):
        h, w = self.input_infos[0].shape[-2:]
        self.diff = np.arange(w, dtype=np.int64)[None, :] - np.arange(h, dtype=np.int64)[:, None]
        self.const = len(inputs) < 2 or self.input_infos[1] is None or self.input_infos[1].value is not None
        self.drop = self._mask(inputs) if self.const else None
        self.zero = np.zeros((), outputs[0].dtype)

    def _mask(self, inputs):
        k = int(scalar(self, inputs, 1, 0))
        return self.diff < k if self.attrs["upper"] else self.diff > k

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], inputs[0])
        np.copyto(outputs[0], self.zero, where=self.drop if self.const else self._mask(inputs))


@cpu_execution("CumSum")
class CumSum(Execution):
    """``Y = cumsum(X, axis)`` in X's dtype; ``exclusive`` shifts by one (first element 0),
    ``reverse`` sums from the end (flipped views, no copies)."""

    def on_resize(self, inputs, outputs):
        self.rank = len(self.input_infos[0].shape)
        self.const = self.input_infos[1].value is not None
        self.axis = self._axis(inputs) if self.const else None

    def _axis(self, inputs) -> int:
        a = int(scalar(self, inputs, 1))
        if not -self.rank <= a < self.rank:
            raise ShapeError(f"CumSum '{self.op.name}': axis {a} out of range for rank {self.rank}")
        return a % self.rank

    def on_execute(self, inputs, outputs):
        axis = self.axis if self.const else self._axis(inputs)
        x, y = inputs[0], outputs[0]
        if self.attrs["reverse"]:
            flip = (slice(None),) * axis + (slice(None, None, -1),)
            x, y = x[flip], y[flip]
        if not self.attrs["exclusive"]:
            np.cumsum(x, axis=axis, dtype=y.dtype, out=y)
            return
        pre = (slice(None),) * axis
        y[pre + (slice(0, 1),)] = 0
        np.cumsum(x[pre + (slice(0, -1),)], axis=axis, dtype=y.dtype, out=y[pre + (slice(1, None),)])


@cpu_execution("NonZero")
class NonZero(Execution):
    """``Y = int64(nonzero(X))`` of shape ``(rank, count)`` (a scalar counts as rank 1)."""

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], nonzero_indices(inputs[0]))


@cpu_execution("EyeLike")
class EyeLike(Execution):
    """``Y = eye(rows, cols, k)``: zero fill, then ones through a strided view of diagonal ``k``."""

    def on_resize(self, inputs, outputs):
        n, m = outputs[0].shape
        k = self.attrs["k"]
        start, count = (k, min(n, m - k)) if k >= 0 else (-k * m, min(n + k, m))
        self.diag = as_shape(outputs[0], (-1,))[start :: m + 1][:count] if count > 0 else None

    def on_execute(self, inputs, outputs):
        outputs[0].fill(0)
        if self.diag is not None:
            self.diag.fill(1)


@cpu_execution("Size")
class Size(Execution):
    """``Y = int64(X.size)`` (a scalar)."""

    def on_execute(self, inputs, outputs):
        outputs[0][...] = inputs[0].size


@cpu_execution("Einsum")
class Einsum(Execution):
    """``Y = einsum(equation, *inputs)`` (numpy), the contraction order planned at resize."""

    def on_resize(self, inputs, outputs):
        self.eq = self.geometry["einsum"]
        self.path = False
        if len(inputs) > 2:
            self.path = np.einsum_path(self.eq, *inputs, optimize="greedy")[0]

    def on_execute(self, inputs, outputs):
        np.einsum(self.eq, *inputs, out=outputs[0], optimize=self.path)

"""CPU data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Slice,
Shape, Gather, Cast, ConstantOfShape (ONNX operators.md, the canonical opset-13+ forms).

Views, slices and permutations are made in ``on_resize``; ``on_execute`` is one
``np.copyto`` (or ``np.take``) per output. Results are bit-exact copies.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.kernels.native import address
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import ShapeError
from mnnpy.float_errors import loud, quiet


def same_buffer(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same bytes (an aliased reshape-like output)."""
    if a.size == 0 or b.size == 0:
        return True
    return address(a) == address(b) and a.nbytes == b.nbytes and a.flags.c_contiguous and b.flags.c_contiguous


@cpu_execution("Reshape", "Flatten", "Squeeze", "Unsqueeze")
class Reshape(Execution):
    """Metadata-only ops: ``Y`` is ``X`` with another shape (same element order).

    A no-op when the memory planner made Y share X's buffer, else one copy.
    """

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        self.shared = same_buffer(x, y)
        self.src = x.reshape(y.shape) if x.flags.c_contiguous else None

    def native_phases(self):
        """``[]`` where Y shares X's buffer (nothing to do, ``program.py``), else ``None``."""
        return [] if self.shared else None

    def on_execute(self, inputs, outputs):
        if self.shared:
            return
        src = self.src if self.src is not None else inputs[0].reshape(outputs[0].shape)
        np.copyto(outputs[0], src)


@cpu_execution("Transpose")
class Transpose(Execution):
    """``Y = X.transpose(perm)`` (reversed axes when ``perm`` is empty)."""

    def on_resize(self, inputs, outputs):
        perm = list(self.attrs["perm"]) or None
        self.view = inputs[0].transpose(perm)

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], self.view)


class SlabCopies(Execution):
    """Copies between a whole array and its consecutive slabs along ``axis``, views fixed at
    resize (``slabs``); a run copies each pair."""

    def slabs(self, whole: np.ndarray, parts, sizes, to_whole: bool) -> None:
        """``pairs`` of (destination, source): each non-empty array of ``parts`` (None: absent)
        and the slab of ``whole`` of its size (``sizes``) along ``axis``, part -> slab
        (``to_whole``, Concat) or slab -> part (Split)."""
        axis = self.attrs["axis"] % whole.ndim
        self.pairs, start = [], 0
        for t, n in zip(parts, sizes):
            if t is not None and t.size:
                slab = whole[(slice(None),) * axis + (slice(start, start + n),)]
                self.pairs.append((slab, t) if to_whole else (t, slab))
            start += n

    def on_execute(self, inputs, outputs):
        for dst, src in self.pairs:
            np.copyto(dst, src)


@cpu_execution("Concat")
class Concat(SlabCopies):
    """``Y = concatenate(inputs, axis)``: each input copied into its precomputed output slice."""

    def on_resize(self, inputs, outputs):
        axis = self.attrs["axis"] % outputs[0].ndim
        self.slabs(outputs[0], inputs, [x.shape[axis] for x in inputs], to_whole=True)


@cpu_execution("Slice")
class Slice(Execution):
    """``Y = X[starts:ends:steps]`` on ``axes`` (ONNX clamping; negative steps walk backwards)."""

    def on_resize(self, inputs, outputs):
        self.view = inputs[0][tuple(self.geometry["slices"])]

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], self.view)


@cpu_execution("Shape")
class Shape(Execution):
    """``Y = int64(X.shape)[start:end]`` (start/end clamped like Python slicing)."""

    def on_resize(self, inputs, outputs):
        self.dims = np.array(self.input_infos[0].shape, np.int64)[self.attrs["start"] : self.attrs["end"]]

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], self.dims)


@cpu_execution("Gather")
class Gather(Execution):
    """``Y = take(X, indices, axis)``; negative indices count from the end.

    X: (d0..dn), indices: int32/int64 of any shape -> Y: X.shape[:axis] + indices.shape
    + X.shape[axis+1:]. An index outside ``[-d, d)`` raises ``ShapeError`` (as
    onnxruntime fails the run). Constant indices are checked and normalised once.
    """

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.axis = self.attrs["axis"] % len(x.shape)
        self.dim = x.shape[self.axis]
        idx = self.input_infos[1].value
        self.const = idx is not None
        self.idx = np.empty(self.input_infos[1].shape, np.intp)
        if self.const:
            self._normalise(idx)

    def _normalise(self, idx: np.ndarray) -> None:
        np.copyto(self.idx, idx, casting="unsafe")
        if self.idx.size:
            lo, hi = self.idx.min(), self.idx.max()
            if lo < -self.dim or hi >= self.dim:
                bad = lo if lo < -self.dim else hi
                raise ShapeError(
                    f"Gather '{self.op.name}': index {bad} out of range [-{self.dim}, {self.dim}) on axis {self.axis}"
                )
            if lo < 0:
                np.add(self.idx, self.dim, out=self.idx, where=self.idx < 0)

    def on_execute(self, inputs, outputs):
        if not self.const:
            self._normalise(inputs[1])
        np.take(inputs[0], self.idx, axis=self.axis, out=outputs[0], mode="clip")


@cpu_execution("Cast")
class Cast(Execution):
    """``Y = X`` converted to ``to`` (ONNX Cast): float -> int truncates toward zero (like
    onnxruntime's static_cast), anything -> bool is ``X != 0``, float -> float16 rounds to
    nearest even. Out-of-range float -> int results are undefined in the spec."""

    def on_execute(self, inputs, outputs):
        token = quiet()  # np.errstate costs 0.8 µs a call
        try:
            np.copyto(outputs[0], inputs[0], casting="unsafe")
        finally:
            loud(token)


@cpu_execution("ConstantOfShape")
class ConstantOfShape(Execution):
    """``Y = full(shape, value)``; ``value`` is a one-element tensor (default float32 0)."""

    def on_resize(self, inputs, outputs):
        v = self.attrs["value"]
        self.fill = v.reshape(-1)[0] if v is not None and v.size else 0

    def on_execute(self, inputs, outputs):
        outputs[0].fill(self.fill)

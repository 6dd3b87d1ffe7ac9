"""CPU host kernels of the sequence ops (ONNX operators.md, opset 11; ``mnnpy/ops/sequence.py``).

A sequence is a Python list of ndarrays of one dtype. Kernels never change their inputs:
each returns a new list, and the arrays a sequence holds belong to it (a tensor entering a
sequence is copied, one leaving it is a new array), so a sequence stays valid however the
engine reuses the buffers of the tensors it was built from. An index or size that breaks an
op's rule raises ``ShapeError`` naming the op and the rule.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.registry import host_kernel
from mnnpy.errors import ShapeError


def _own(x: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``x`` that nothing else refers to."""
    return np.array(x, copy=True, order="C")


def _index(op: str, position: np.ndarray, n: int, upper: int) -> int:
    """``position`` (an int32/int64 scalar) as an index in ``0..upper``; allowed: ``[-n, upper]``."""
    p = np.asarray(position)
    if p.dtype.kind not in "iu" or p.size != 1:
        raise ShapeError(f"{op}: position must be an int32/int64 scalar, got {p.dtype} of shape {p.shape}")
    k = int(p.reshape(()))
    if not -n <= k <= upper:
        raise ShapeError(f"{op}: position {k} out of range [{-n}, {upper}] for a sequence of {n} tensors")
    return k + n if k < 0 else k


def _sequence(op: str, seq) -> list[np.ndarray]:
    if not isinstance(seq, list):
        raise ShapeError(f"{op}: input 'input_sequence' must be a sequence, got {type(seq).__name__}")
    return seq


def _same_dtype(op: str, seq: list[np.ndarray], x: np.ndarray) -> None:
    if seq and seq[0].dtype != x.dtype:
        raise ShapeError(f"{op}: a tensor of {x.dtype} cannot join a sequence of {seq[0].dtype}")


@host_kernel("SequenceEmpty")
def sequence_empty(attrs, inputs):
    """``[]`` (the element dtype is the schema's)."""
    return [[]]


@host_kernel("SequenceConstruct")
def sequence_construct(attrs, inputs):
    """``[inputs...]``: every input copied; one dtype."""
    if not inputs:
        raise ShapeError("SequenceConstruct: needs at least one input")
    for x in inputs[1:]:
        _same_dtype("SequenceConstruct", inputs[:1], x)
    return [[_own(x) for x in inputs]]


@host_kernel("SequenceInsert")
def sequence_insert(attrs, inputs):
    """A new sequence: ``tensor`` (copied) before index ``position`` in ``[-n, n]`` (default: at the end)."""
    seq = _sequence("SequenceInsert", inputs[0])
    x = inputs[1]
    _same_dtype("SequenceInsert", seq, x)
    position = inputs[2] if len(inputs) > 2 else None
    k = len(seq) if position is None else _index("SequenceInsert", position, len(seq), len(seq))
    return [[*seq[:k], _own(x), *seq[k:]]]


@host_kernel("SequenceAt")
def sequence_at(attrs, inputs):
    """A copy of the tensor at ``position`` in ``[-n, n-1]``."""
    seq = _sequence("SequenceAt", inputs[0])
    return [_own(seq[_index("SequenceAt", inputs[1], len(seq), len(seq) - 1)])]


@host_kernel("SequenceLength")
def sequence_length(attrs, inputs):
    """``len(input_sequence)`` as an int64 scalar."""
    return [np.array(len(_sequence("SequenceLength", inputs[0])), np.int64)]


@host_kernel("SequenceErase")
def sequence_erase(attrs, inputs):
    """A new sequence without the tensor at ``position`` in ``[-n, n-1]`` (default: the last)."""
    seq = _sequence("SequenceErase", inputs[0])
    position = inputs[1] if len(inputs) > 1 else None
    if position is None:
        if not seq:
            raise ShapeError("SequenceErase: cannot erase from an empty sequence")
        k = len(seq) - 1
    else:
        k = _index("SequenceErase", position, len(seq), len(seq) - 1)
    return [seq[:k] + seq[k + 1 :]]


@host_kernel("ConcatFromSequence")
def concat_from_sequence(attrs, inputs):
    """The tensors joined along ``axis`` (``new_axis=0``) or stacked on a new ``axis`` (``new_axis=1``)."""
    seq = _sequence("ConcatFromSequence", inputs[0])
    if not seq:
        raise ShapeError("ConcatFromSequence: the sequence is empty")
    axis, new = attrs["axis"], attrs["new_axis"]
    r = seq[0].ndim + new
    if not -r <= axis < r:
        raise ShapeError(f"ConcatFromSequence: axis {axis} out of range [{-r}, {r - 1}] for tensors of rank {seq[0].ndim}")
    if r == 0:
        raise ShapeError("ConcatFromSequence: scalars cannot be concatenated (new_axis=0)")
    shapes = {x.shape[: axis % r] + x.shape[axis % r + 1 :] if not new else x.shape for x in seq}
    if len(shapes) > 1 or any(x.ndim != seq[0].ndim for x in seq):
        rule = "the same shape" if new else f"the same shape except along axis {axis}"
        raise ShapeError(f"ConcatFromSequence: tensors must have {rule}, got {[x.shape for x in seq]}")
    return [np.stack(seq, axis) if new else np.concatenate(seq, axis)]


def _split_lengths(split, dim: int) -> list[int]:
    """The lengths of the pieces of an axis of ``dim`` elements (``split``: None, scalar or 1-D)."""
    if split is None:
        return [1] * dim
    s = np.asarray(split)
    if s.dtype.kind not in "iu" or s.ndim > 1:
        raise ShapeError(f"SplitToSequence: split must be an int32/int64 scalar or 1-D tensor, got {s.dtype} {s.shape}")
    if s.ndim == 0:
        step = int(s)
        if step <= 0:
            raise ShapeError(f"SplitToSequence: a scalar split must be positive, got {step}")
        return [step] * (dim // step) + ([dim % step] if dim % step else [])
    lengths = [int(v) for v in s]
    if any(v < 0 for v in lengths) or sum(lengths) != dim:
        raise ShapeError(f"SplitToSequence: split {lengths} must be lengths >= 0 summing to the axis' {dim}")
    return lengths


@host_kernel("SplitToSequence")
def split_to_sequence(attrs, inputs):
    """``input`` cut along ``axis`` into pieces (see the schema); each piece a new array."""
    x = inputs[0]
    split = inputs[1] if len(inputs) > 1 else None
    axis = attrs["axis"]
    if not -x.ndim <= axis < x.ndim:
        raise ShapeError(f"SplitToSequence: axis {axis} out of range for an input of shape {x.shape}")
    axis %= x.ndim
    bounds = np.cumsum([0, *_split_lengths(split, x.shape[axis])])
    lead = (slice(None),) * axis
    pieces = [_own(x[(*lead, slice(a, b))]) for a, b in zip(bounds[:-1], bounds[1:])]
    if split is None and not attrs["keepdims"]:
        pieces = [p.reshape(p.shape[:axis] + p.shape[axis + 1 :]) for p in pieces]
    return [pieces]

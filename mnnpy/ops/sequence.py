"""Sequence ops (ONNX operators.md #SequenceEmpty ... #SplitToSequence, opset 11; SplitToSequence
24 only widened its types): a sequence is an ordered list of tensors of one dtype, held on the
host (``TensorDesc.kind == "sequence"``; ``dtype`` is the elements' dtype).

Every op here is ``dynamic``: what it gives (a sequence's length and elements, or a tensor
taken from one) is known only after it ran. The shape functions check dtypes and scalar
positions where the inputs' dtypes and shapes are known and return ``(None, dtype)``, dtype
being the element dtype for a sequence output. The CPU runs them as host kernels
(``mnnpy/backends/cpu/ops/sequence.py``); index rules (position ranges, split sizes, axes)
are checked there, at run time, with ``ShapeError``.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy import dtypes as mdtypes
from mnnpy.errors import ModelFormatError
from mnnpy.ops.flops import MOVES
from mnnpy.ops.registry import Attr, In, op_schema

I64 = np.dtype(np.int64)
POSITION = (np.dtype(np.int32), I64)


def _position(ctx, i: int, name: str, ranks: tuple[int, ...] = (0,)) -> None:
    """Input ``i`` (when present and known) is int32/int64 of one of ``ranks`` (a scalar by
    default; a one-element tensor passes for a scalar, as onnxruntime and ONNX's own node
    tests take it)."""
    if not ctx.has(i):
        return
    if ctx.dtypes[i] is not None and ctx.dtypes[i] not in POSITION:
        ctx.fail(f"'{name}' must be int32 or int64, got {ctx.dtypes[i]}")
    one_element = ranks == (0,) and ctx.shapes[i] is not None and math.prod(ctx.shapes[i]) == 1
    if ctx.shapes[i] is not None and len(ctx.shapes[i]) not in ranks and not one_element:
        ctx.fail(f"'{name}' must have rank {' or '.join(map(str, ranks))}, got shape {ctx.shapes[i]}")


def _same_dtype(ctx, indices, what: str) -> None:
    known = {str(ctx.dtypes[i]) for i in indices if ctx.dtypes[i] is not None}
    if len(known) > 1:
        ctx.fail(f"{what} must have one dtype, got {sorted(known)}")


@op_schema("SequenceEmpty", [], ["output"], attrs={"dtype": Attr("int", 1)}, flops=MOVES, dynamic=True)
def sequence_empty(ctx):
    """SequenceEmpty: ``output = []``, a sequence of ``dtype`` (an ONNX element type; default float)."""
    try:
        dt = mdtypes.from_onnx(ctx.attrs["dtype"], f"SequenceEmpty '{ctx.op.name}' dtype")
    except ModelFormatError as e:
        ctx.fail(str(e))
    return [(None, dt)]


@op_schema("SequenceConstruct", [In("inputs", variadic=True)], ["output_sequence"], flops=MOVES, dynamic=True)
def sequence_construct(ctx):
    """SequenceConstruct: ``output_sequence = [inputs[0], ..., inputs[n-1]]`` (n >= 1, one dtype)."""
    if not ctx.op.inputs:
        ctx.fail("needs at least one input")
    _same_dtype(ctx, range(len(ctx.op.inputs)), "the inputs")
    return [(None, ctx.dtypes[0])]


@op_schema(
    "SequenceInsert",
    ["input_sequence", "tensor", In("position", optional=True)],
    ["output_sequence"],
    flops=MOVES,
    dynamic=True,
)
def sequence_insert(ctx):
    """SequenceInsert: ``output_sequence = input_sequence`` with ``tensor`` inserted before index
    ``position`` (in ``[-n, n]``, negative from the back; default: appended at the end)."""
    _same_dtype(ctx, (0, 1), "the sequence and the tensor")
    _position(ctx, 2, "position")
    return [(None, ctx.dtypes[0] if ctx.dtypes[0] is not None else ctx.dtypes[1])]


@op_schema("SequenceAt", ["input_sequence", "position"], ["tensor"], flops=MOVES, dynamic=True)
def sequence_at(ctx):
    """SequenceAt: ``tensor = input_sequence[position]``, ``position`` in ``[-n, n-1]``."""
    _position(ctx, 1, "position")
    return [(None, ctx.dtypes[0])]


@op_schema("SequenceLength", ["input_sequence"], ["length"], flops=MOVES, dynamic=True)
def sequence_length(ctx):
    """SequenceLength: ``length = n``, the number of tensors of ``input_sequence`` (an int64 scalar)."""
    return [(None, I64)]


@op_schema(
    "SequenceErase",
    ["input_sequence", In("position", optional=True)],
    ["output_sequence"],
    flops=MOVES,
    dynamic=True,
)
def sequence_erase(ctx):
    """SequenceErase: ``output_sequence = input_sequence`` without the tensor at ``position``
    (in ``[-n, n-1]``; default: the last)."""
    _position(ctx, 1, "position")
    return [(None, ctx.dtypes[0])]


@op_schema(
    "ConcatFromSequence",
    ["input_sequence"],
    ["concat_result"],
    attrs={"axis": Attr("int"), "new_axis": Attr("int", 0, (0, 1))},
    flops=MOVES,
    dynamic=True,
)
def concat_from_sequence(ctx):
    """ConcatFromSequence: the tensors of ``input_sequence`` (n >= 1) joined along ``axis``
    (``new_axis=0``: ``numpy.concatenate``, axis in ``[-r, r-1]``) or stacked on a new ``axis``
    (``new_axis=1``: ``numpy.stack``, axis in ``[-r-1, r]``)."""
    shape = ctx.shapes[0]
    if shape is not None:
        r = len(shape) + ctx.attrs["new_axis"]
        if not -r <= ctx.attrs["axis"] < r:
            ctx.fail(f"axis {ctx.attrs['axis']} out of range for elements of rank {len(shape)}")
    return [(None, ctx.dtypes[0])]


@op_schema(
    "SplitToSequence",
    ["input", In("split", optional=True)],
    ["output_sequence"],
    attrs={"axis": Attr("int", 0), "keepdims": Attr("int", 1, (0, 1))},
    flops=MOVES,
    dynamic=True,
)
def split_to_sequence(ctx):
    """SplitToSequence: ``input`` cut along ``axis`` into a sequence: without ``split``, slices of
    length 1 (the axis dropped when ``keepdims=0``); a scalar ``split``: pieces of that length (the
    last may be shorter); a 1-D ``split``: pieces of those lengths (summing to the axis' length)."""
    shape = ctx.shapes[0]
    if shape is not None and not -len(shape) <= ctx.attrs["axis"] < len(shape):
        ctx.fail(f"axis {ctx.attrs['axis']} out of range for rank {len(shape)}")
    _position(ctx, 1, "split", (0, 1))
    return [(None, ctx.dtypes[0])]

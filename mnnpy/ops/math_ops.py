"""Elementwise math, logic and comparison ops (ONNX operators.md, latest-opset forms).

Logical and bitwise ops, comparisons (bool output), ``Mod``, the variadic broadcasting ``Max``/``Min``/
``Mean``/``Sum``, ``PRelu`` (slope broadcast unidirectionally to ``X``), ``Where``,
``IsNaN``/``IsInf`` (bool output) and ``CastLike`` (``input`` converted to the dtype of
``target_type``). Every opset from 7 on has these forms (older attributes such as
``consumed_inputs`` are dropped by the converter). The unary math ops and activations
(``Y = f(X)``) are declared in ``mnnpy.ops.activation``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ops.common import broadcast
from mnnpy.ops.flops import MOVES, numel, per_element
from mnnpy.ops.registry import Attr, In, op_schema

BOOL = np.dtype(np.bool_)


def _float_unary(ctx):
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"input must be a float tensor, got {ctx.dtypes[0]}")
    return [(ctx.shapes[0], ctx.dtypes[0])]


@op_schema("Not", ["X"], elementwise=True)
def _not(ctx):
    """Not: logical negation of a bool tensor."""
    if ctx.dtypes[0] != BOOL:
        ctx.fail(f"input must be bool, got {ctx.dtypes[0]}")
    return [(ctx.shapes[0], BOOL)]


@op_schema("IsNaN", ["X"], elementwise=True)
def _isnan(ctx):
    """IsNaN: bool mask of NaN elements."""
    _float_unary(ctx)
    return [(ctx.shapes[0], BOOL)]


@op_schema("IsInf", ["X"], attrs={"detect_negative": Attr("int", 1), "detect_positive": Attr("int", 1)}, elementwise=True)
def _isinf(ctx):
    """IsInf: bool mask of +inf (``detect_positive``) and -inf (``detect_negative``) elements."""
    _float_unary(ctx)
    return [(ctx.shapes[0], BOOL)]


def _same_dtypes(ctx, n: int):
    if any(d != ctx.dtypes[0] for d in ctx.dtypes[:n]):
        ctx.fail(f"input dtypes differ: {[str(d) for d in ctx.dtypes[:n]]}")


def _logical(ctx):
    _same_dtypes(ctx, 2)
    if ctx.dtypes[0] != BOOL:
        ctx.fail(f"inputs must be bool, got {ctx.dtypes[0]}")
    return [(broadcast(ctx, ctx.shapes[:2]), BOOL)]


def _compare(ctx):
    _same_dtypes(ctx, 2)
    return [(broadcast(ctx, ctx.shapes[:2]), BOOL)]


for _name, _rule in (("And", "A and B"), ("Or", "A or B"), ("Xor", "A xor B")):
    op_schema(_name, ["A", "B"], ["C"], elementwise=True, doc=f"{_name}: ``C = {_rule}``, bool, broadcast.")(_logical)

for _name, _rule in (
    ("Equal", "A == B"),
    ("Greater", "A > B"),
    ("GreaterOrEqual", "A >= B"),
    ("Less", "A < B"),
    ("LessOrEqual", "A <= B"),
):
    op_schema(_name, ["A", "B"], ["C"], elementwise=True, doc=f"{_name}: ``C = {_rule}`` (bool), broadcast.")(_compare)


@op_schema("BitShift", ["X", "Y"], ["Z"], attrs={"direction": Attr("string", choices=("LEFT", "RIGHT"))}, elementwise=True)
def _bitshift(ctx):
    """BitShift: ``X << Y`` or ``X >> Y`` (arithmetic for signed), broadcast; integers only."""
    _same_dtypes(ctx, 2)
    if ctx.dtypes[0].kind not in "iu":
        ctx.fail(f"inputs must be integers, got {ctx.dtypes[0]}")
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]


@op_schema("Mod", ["A", "B"], ["C"], attrs={"fmod": Attr("int", 0, (0, 1))}, elementwise=True, flops=per_element(3))
def _mod(ctx):
    """Mod: ``A - floor(A/B)*B`` (``fmod=0``, sign of B) or ``A - trunc(A/B)*B`` (``fmod=1``)."""
    _same_dtypes(ctx, 2)
    if ctx.dtypes[0].kind not in "fiu":
        ctx.fail(f"inputs must be numeric, got {ctx.dtypes[0]}")
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]


@op_schema("PRelu", ["X", "slope"], elementwise=True, flops=per_element(2))
def _prelu(ctx):
    """PRelu: ``slope * X`` where ``X < 0`` else ``X``; ``slope`` broadcasts to ``X`` (unidirectional)."""
    _same_dtypes(ctx, 2)
    if broadcast(ctx, ctx.shapes[:2]) != tuple(ctx.shapes[0]):
        ctx.fail("slope must broadcast to the shape of X (unidirectional broadcasting)")
    return [(ctx.shapes[0], ctx.dtypes[0])]


def _variadic(ctx):
    if not ctx.shapes:
        ctx.fail("needs at least one input")
    _same_dtypes(ctx, len(ctx.dtypes))
    return [(broadcast(ctx, ctx.shapes), ctx.dtypes[0])]


def _variadic_flops(ctx, outs) -> float:
    """(inputs - 1) per output element (Mean: inputs)"""
    return (len(ctx.shapes) - (ctx.op.type != "Mean")) * numel(outs[0])


for _name, _out in (("Max", "max"), ("Min", "min"), ("Mean", "mean"), ("Sum", "sum")):
    _doc = f"{_name}: elementwise {_out} of one or more inputs, broadcast together (NaN propagates)."
    op_schema(_name, [In("data_0", variadic=True)], [_out], elementwise=True, flops=_variadic_flops, doc=_doc)(_variadic)


@op_schema("Where", ["condition", "X", "Y"], ["output"], elementwise=True)
def _where(ctx):
    """Where: ``X`` where ``condition`` else ``Y``, all three broadcast together."""
    if ctx.dtypes[0] != BOOL:
        ctx.fail(f"condition must be bool, got {ctx.dtypes[0]}")
    if ctx.dtypes[1] != ctx.dtypes[2]:
        ctx.fail(f"X and Y dtypes differ: {ctx.dtypes[1]} vs {ctx.dtypes[2]}")
    return [(broadcast(ctx, ctx.shapes[:3]), ctx.dtypes[1])]


@op_schema(
    "CastLike",
    ["input", "target_type"],
    ["output"],
    attrs={"saturate": Attr("int", 1), "round_mode": Attr("string", "up", ("up", "down", "nearest"))},
    same_rank=(0,),
    flops=MOVES,
)
def _cast_like(ctx):
    """CastLike: ``input`` converted to ``target_type``'s dtype (Cast semantics)."""
    return [(ctx.shapes[0], ctx.dtypes[1])]

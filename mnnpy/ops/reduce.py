"""Reductions (opset-18 form: ``axes`` as an optional input) and their shape rule."""

from __future__ import annotations

from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import per_input_element
from mnnpy.ops.registry import Attr, In, op_schema

REDUCE_ATTRS = {"keepdims": Attr("int", 1, (0, 1)), "noop_with_empty_axes": Attr("int", 0, (0, 1))}


def reduce_axes(ctx) -> tuple[int, ...]:
    """Normalised reduced axes: input ``axes`` if given, else all (or none with ``noop_with_empty_axes``)."""
    rank = len(ctx.shapes[0])
    axes = [int(a) for a in ctx.value(1).reshape(-1)] if ctx.has(1) else []
    if not axes:
        return () if ctx.attrs["noop_with_empty_axes"] else tuple(range(rank))
    norm = tuple(sorted({norm_axis(ctx, a, rank, "axes entry") for a in axes}))
    if len(norm) != len(axes):
        ctx.fail(f"axes {axes} repeat an axis")
    return norm


def _reduce(ctx):
    x = ctx.shapes[0]
    axes = reduce_axes(ctx)
    ctx.derive(axes=axes)
    if ctx.attrs["keepdims"]:
        out = tuple(1 if i in axes else d for i, d in enumerate(x))
    else:
        out = tuple(d for i, d in enumerate(x) if i not in axes)
    return [(out, ctx.dtypes[0])]


op_schema(
    "ReduceMean",
    ["data", In("axes", optional=True, value=True)],
    ["reduced"],
    attrs=REDUCE_ATTRS,
    flops=per_input_element(1),
    doc="ReduceMean: ``mean(x)`` over ``axes`` (all when absent; none with ``noop_with_empty_axes``), ``keepdims``.",
)(_reduce)

"""Reductions other than ReduceMean, ArgMax/ArgMin and TopK (ONNX operators.md).

Reductions use the opset-18 form (``axes`` an optional input, ``keepdims``,
``noop_with_empty_axes``) and share ``mnnpy.ops.reduce``'s shape rule; the converter
turns the older ``axes`` attribute into a constant input.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import per_input_element
from mnnpy.ops.reduce import REDUCE_ATTRS, _reduce
from mnnpy.ops.registry import Attr, In, op_schema

# op -> (formula, FLOPs per input element)
_REDUCTIONS = {
    "ReduceSum": ("sum(x)", 1),
    "ReduceMax": ("max(x)", 1),
    "ReduceMin": ("min(x)", 1),
    "ReduceProd": ("prod(x)", 1),
    "ReduceL1": ("sum(|x|)", 2),
    "ReduceL2": ("sqrt(sum(x^2))", 2),
    "ReduceLogSum": ("log(sum(x))", 1),
    "ReduceLogSumExp": ("log(sum(exp(x)))", 3),
    "ReduceSumSquare": ("sum(x^2)", 2),
}
REDUCTIONS = tuple(_REDUCTIONS)

for _name, (_rule, _flops) in _REDUCTIONS.items():
    op_schema(
        _name,
        ["data", In("axes", optional=True, value=True)],
        ["reduced"],
        attrs=REDUCE_ATTRS,
        flops=per_input_element(_flops),
        doc=f"{_name}: ``{_rule}`` over ``axes`` (all when absent; none with ``noop_with_empty_axes``), ``keepdims``.",
    )(_reduce)


_ARG = {"axis": Attr("int", 0), "keepdims": Attr("int", 1, (0, 1)), "select_last_index": Attr("int", 0, (0, 1))}


def _arg(ctx):
    """ArgMax/ArgMin: int64 index of the first (or last) extreme along ``axis``."""
    x = ctx.shapes[0]
    axis = norm_axis(ctx, ctx.attrs["axis"], max(len(x), 1))
    if len(x) and x[axis] == 0:
        ctx.fail(f"cannot take the arg of an empty axis {axis}")
    if ctx.attrs["keepdims"]:
        out = tuple(1 if i == axis else d for i, d in enumerate(x))
    else:
        out = tuple(d for i, d in enumerate(x) if i != axis)
    return [(out, np.dtype(np.int64))]


op_schema("ArgMax", ["data"], ["reduced"], attrs=_ARG, flops=per_input_element(1))(_arg)
op_schema("ArgMin", ["data"], ["reduced"], attrs=_ARG, flops=per_input_element(1))(_arg)


@op_schema(
    "TopK",
    ["X", In("K", value=True)],
    ["Values", "Indices"],
    attrs={"axis": Attr("int", -1), "largest": Attr("int", 1, (0, 1)), "sorted": Attr("int", 1, (0, 1))},
    flops=per_input_element(1),
)
def topk(ctx):
    """TopK: the ``K`` largest (or smallest) elements along ``axis`` and their int64 indices;
    ties keep the lower index first. K is a one-element int64 tensor (opset-10+ form)."""
    x = ctx.shapes[0]
    if not x:
        ctx.fail("X must have rank >= 1")
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    kv = ctx.value(1).reshape(-1)
    if kv.size != 1:
        ctx.fail("K must hold one value")
    k = int(kv[0])
    if not 0 <= k <= x[axis]:
        ctx.fail(f"K={k} out of range [0, {x[axis]}] for axis {axis}")
    out = tuple(k if i == axis else d for i, d in enumerate(x))
    return [(out, ctx.dtypes[0]), (out, np.dtype(np.int64))]

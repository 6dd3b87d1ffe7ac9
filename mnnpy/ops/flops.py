"""FLOPs rules of the op schemas (``OpSchema.flops``) and the total of a plan.

Counting (MNN's ``SizeComputer::onComputeFlops`` reports the same kind of estimate):
one FLOP per arithmetic operation, comparison or elementary function (exp, tanh,
erf...) on one element; a multiply-add is two. Data movement (copies, gathers,
reshapes, pads, casts) counts none. A rule ``rule(ctx, out_shapes)`` gets the op's
``ShapeContext`` (input shapes, dtypes, values known at resize, resolved attributes)
and its output shapes, and returns a count; its docstring is the rule in words
(``docs/ops.md``). ``OpSchema.mflops`` and ``mflops_by_op`` give MFLOPs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def numel(shape: Sequence[int] | None) -> int:
    """Elements of ``shape`` (0 for an absent tensor)."""
    return 0 if shape is None else math.prod(int(d) for d in shape)


def per_element(k: float = 1):
    """A rule: ``k`` FLOPs per element of output 0."""

    def rule(ctx, outs) -> float:
        return k * numel(outs[0])

    rule.__doc__ = f"{k:g} per output element"
    return rule


def per_input_element(k: float = 1):
    """A rule: ``k`` FLOPs per element of input 0 (reductions, normalisations)."""

    def rule(ctx, outs) -> float:
        return k * numel(ctx.shapes[0])

    rule.__doc__ = f"{k:g} per element of the first input"
    return rule


def _moves(ctx, outs) -> float:
    """none (data movement)"""
    return 0.0


MOVES = _moves


def mflops_by_op(graph, sizes, ops: Sequence[int] | None = None) -> dict[int, float]:
    """MFLOPs of each op that runs in a plan: ``op index -> MFLOPs``.

    ``sizes``: the SizeComputer's result for the plan's input shapes
    (``mnnpy.size_computer.SizeResult``: shapes, dtypes, values known at resize, resolved
    attributes, ``runtime_ops``); ``ops`` defaults to ``sizes.runtime_ops`` (ops folded at
    resize do not run). The total of a plan is ``sum(mflops_by_op(...).values())``.
    """
    from mnnpy.ops.registry import ShapeContext, get_schema

    def get(table, ts):
        return [table.get(t) if t >= 0 else None for t in ts]

    out = {}
    for i in sizes.runtime_ops if ops is None else ops:
        op = graph.ops[i]
        schema = get_schema(op.type)
        ins = [get(table, op.inputs) for table in (sizes.shapes, sizes.dtypes, sizes.values)]
        ctx = ShapeContext(op, schema, *ins, sizes.attrs[i])
        out[i] = schema.mflops(ctx, [s if s is not None else () for s in get(sizes.shapes, op.outputs)])
    return out

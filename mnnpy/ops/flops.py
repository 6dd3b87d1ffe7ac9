"""FLOPs rules of the op schemas (``OpSchema.flops``) and the total of a plan.

Counting (MNN's ``SizeComputer::onComputeFlops`` reports the same kind of estimate):
one FLOP per arithmetic operation, comparison or elementary function (exp, tanh,
erf...) on one element; a multiply-add is two. Data movement (copies, gathers,
reshapes, pads, casts) counts none. A rule ``rule(ctx, out_shapes)`` gets the op's
``ShapeContext`` (input shapes, dtypes, values known at resize, resolved attributes)
and its output shapes, and returns a count; its docstring is the rule in words
(``docs/ops.md``). ``OpSchema.mflops`` gives MFLOPs; the SizeComputer applies it to every op
at resize (``SizeResult.mflops``) and ``Session.op_mflops`` lists a plan's.
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

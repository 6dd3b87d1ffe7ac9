"""Elementwise ops: unary activations and math, binary ops with broadcasting, Clip.

Unary: ``Y = f(X)``, same shape and dtype. Binary: ``C = A op B`` with ONNX
multidirectional broadcasting (numpy rules). ``Clip``: ``min(max(X, min), max)``
with optional scalar ``min``/``max`` inputs (opset-11+ form; the converter turns the
opset-6 attributes into constant inputs).
"""

from __future__ import annotations

from mnnpy.ops.common import broadcast
from mnnpy.ops.registry import Attr, In, op_schema


def _same(ctx):
    return [(ctx.shapes[0], ctx.dtypes[0])]


UNARY = {
    "Relu": {},
    "Sigmoid": {},
    "Tanh": {},
    "Sqrt": {},
    "HardSwish": {},
    "HardSigmoid": {"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)},
    "LeakyRelu": {"alpha": Attr("float", 0.01)},
    "Identity": {},
}

for _name, _attrs in UNARY.items():
    op_schema(_name, ["X"], attrs=_attrs, alias=0 if _name == "Identity" else None)(_same)


def _binary(ctx):
    if ctx.dtypes[0] != ctx.dtypes[1]:
        ctx.fail(f"input dtypes differ: {ctx.dtypes[0]} vs {ctx.dtypes[1]}")
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]


for _name in ("Add", "Sub", "Mul", "Div"):
    op_schema(_name, ["A", "B"], ["C"])(_binary)


@op_schema("Pow", ["X", "Y"], ["Z"])
def _pow(ctx):
    """Pow: ``Z = X ** Y``, broadcast; the exponent may have another dtype (opset 12+)."""
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]


@op_schema("Clip", ["input", In("min", optional=True), In("max", optional=True)], ["output"])
def _clip(ctx):
    """Clip: ``min(max(input, min), max)``; ``min``/``max`` are scalars (rank 0 or one element)."""
    for i in (1, 2):
        if ctx.has(i) and len(ctx.shapes[i]) > 1:
            ctx.fail("min and max must be scalars")
    return [(ctx.shapes[0], ctx.dtypes[0])]

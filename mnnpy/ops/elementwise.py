"""Identity and the arithmetic binary ops with broadcasting (ONNX operators.md).

Binary: ``C = A op B`` with ONNX multidirectional broadcasting (numpy rules). The
unary elementwise ops (activations, Clip, unary math) are declared in
``mnnpy.ops.activation``.
"""

from __future__ import annotations

from mnnpy.ops.common import broadcast
from mnnpy.ops.registry import op_schema


@op_schema("Identity", ["X"], alias=0, same_rank=(0,))
def _identity(ctx):
    """Identity: ``Y = X`` (any dtype); Y may share X's buffer."""
    return [(ctx.shapes[0], ctx.dtypes[0])]


def _binary(ctx):
    if ctx.dtypes[0] != ctx.dtypes[1]:
        ctx.fail(f"input dtypes differ: {ctx.dtypes[0]} vs {ctx.dtypes[1]}")
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]


for _name, _sign in (("Add", "+"), ("Sub", "-"), ("Mul", "*"), ("Div", "/")):
    _doc = f"{_name}: ``C = A {_sign} B``, broadcast; one dtype (integer Div truncates toward zero)."
    op_schema(_name, ["A", "B"], ["C"], elementwise=True, doc=_doc)(_binary)


@op_schema("Pow", ["X", "Y"], ["Z"], elementwise=True)
def _pow(ctx):
    """Pow: ``Z = X ** Y``, broadcast; the exponent may have another dtype (opset 12+)."""
    return [(broadcast(ctx, ctx.shapes[:2]), ctx.dtypes[0])]

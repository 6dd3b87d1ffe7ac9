"""Split (opset-18 form: ``split`` as an optional input, ``num_outputs`` attribute), ONNX operators.md #Split."""

from __future__ import annotations

from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import MOVES
from mnnpy.ops.registry import Attr, In, op_schema


def split_sizes(ctx) -> list[int]:
    """Length of each output along ``axis``.

    ``split`` given: its values (non-negative, summing to the axis length). Else
    ``n = num_outputs`` (or the number of outputs when 0): chunks of ``ceil(d / n)``,
    the last one smaller (possibly empty) when ``d`` does not divide, an error when it
    would be negative (opset 18 rule, as onnxruntime applies it: 4 into 3 is 2, 2, 0; 5
    into 4 is refused; earlier opsets required ``d`` divisible, which this covers).
    """
    x = ctx.shapes[0]
    axis = norm_axis(ctx, ctx.attrs["axis"], len(x))
    d = x[axis]
    n_out = len(ctx.op.outputs)
    if ctx.has(1) and ctx.value(1).size:
        sizes = [int(v) for v in ctx.value(1).reshape(-1)]
        if len(sizes) != n_out or any(s < 0 for s in sizes) or sum(sizes) != d:
            ctx.fail(f"split {sizes} must be {n_out} non-negative lengths summing to dim {axis} ({d})")
        return sizes
    n = ctx.attrs["num_outputs"] or n_out
    if n != n_out:
        ctx.fail(f"num_outputs {n} differs from the {n_out} outputs")
    chunk = -(-d // n)
    last = d - chunk * (n - 1)
    if last < 0:
        ctx.fail(f"dim {axis} ({d}) cannot be split into {n} chunks of {chunk} (the last would be {last} long)")
    return [chunk] * (n - 1) + [last]


@op_schema(
    "Split",
    ["input", In("split", optional=True, value=True)],
    ["outputs"],
    attrs={"axis": Attr("int", 0), "num_outputs": Attr("int", 0)},
    variadic_outputs=True,
    same_rank=(0,),
    flops=MOVES,
)
def split(ctx):
    """Split: ``input`` cut along ``axis`` into consecutive parts; see ``split_sizes``."""
    x = ctx.shapes[0]
    axis = ctx.attrs["axis"] % len(x)
    sizes = split_sizes(ctx)
    ctx.derive(split=sizes)
    return [(x[:axis] + (s,) + x[axis + 1 :], ctx.dtypes[0]) for s in sizes]

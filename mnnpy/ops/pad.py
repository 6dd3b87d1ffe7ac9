"""Pad (opset-11+ form: pads, constant_value, axes as inputs), ONNX operators.md #Pad."""

from __future__ import annotations

from mnnpy.ops.common import norm_axis
from mnnpy.ops.flops import MOVES
from mnnpy.ops.registry import Attr, In, op_schema


def pad_widths(ctx) -> list[tuple[int, int]]:
    """``(begin, end)`` per data axis; negative values crop."""
    x = ctx.shapes[0]
    pads = [int(p) for p in ctx.value(1).reshape(-1)]
    axes = [norm_axis(ctx, int(a), len(x), "axes entry") for a in ctx.value(3).reshape(-1)] if ctx.has(3) else list(range(len(x)))
    if len(pads) != 2 * len(axes):
        ctx.fail(f"pads has {len(pads)} values, expected {2 * len(axes)}")
    widths = [(0, 0)] * len(x)
    for i, a in enumerate(axes):
        widths[a] = (pads[i], pads[i + len(axes)])
    return widths


@op_schema(
    "Pad",
    ["data", In("pads", value=True), In("constant_value", optional=True), In("axes", optional=True, value=True)],
    ["output"],
    attrs={"mode": Attr("string", "constant", ("constant", "reflect", "edge", "wrap"))},
    same_rank=(0,),
    flops=MOVES,
)
def pad(ctx):
    """Pad: ``out[i] = in[i] + pad_begin[i] + pad_end[i]`` per axis; modes constant/reflect/edge/wrap."""
    x = ctx.shapes[0]
    out, widths = [], pad_widths(ctx)
    ctx.derive(pads=widths)
    for d, (b, e) in zip(x, widths):
        if d + b + e < 0:
            ctx.fail(f"pads ({b}, {e}) crop more than dim {d}")
        if ctx.attrs["mode"] != "constant" and d == 0 and b + e > 0:
            ctx.fail(f"mode {ctx.attrs['mode']} cannot pad an empty axis")
        out.append(d + b + e)
    return [(tuple(out), ctx.dtypes[0])]

"""Conv and ConvTranspose (ONNX operators.md #Conv, #ConvTranspose), with a fused activation.

``X: (N, C, *spatial)``, ``W: (M, C/group, *kernel)``, ``B: (M,)`` -> ``Y: (N, M, *out)``.
The converter may fuse a following activation into Conv: ``activation`` is one of
``FUSED_ACTIVATIONS`` (the activation table's entries with ``fuse``) and
``activation_params`` holds its scalars (``Activation.scalars``: Clip min, max;
HardSigmoid alpha, beta; LeakyRelu alpha).
"""

from __future__ import annotations

from mnnpy.ops.activation import ACTIVATIONS, FUSED
from mnnpy.ops.common import window_output
from mnnpy.ops.flops import numel
from mnnpy.ops.geometry import Window
from mnnpy.ops.registry import Attr, In, op_schema

AUTO_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FUSED_ACTIVATIONS = ("", *FUSED)

_WINDOW = {
    "auto_pad": Attr("string", "NOTSET", AUTO_PAD),
    "dilations": Attr("ints", []),
    "group": Attr("int", 1),
    "kernel_shape": Attr("ints", []),
    "pads": Attr("ints", []),
    "strides": Attr("ints", []),
}


def _check_rank(ctx):
    x, w = ctx.shapes[0], ctx.shapes[1]
    if len(x) < 3 or len(w) != len(x):
        ctx.fail("X must be (N, C, spatial...) and W of the same rank")
    if ctx.attrs["group"] < 1:
        ctx.fail("group must be >= 1")
    k = list(ctx.attrs["kernel_shape"]) or list(w[2:])
    if k != list(w[2:]):
        ctx.fail(f"kernel_shape {k} does not match W's spatial dims {list(w[2:])}")
    return x, w, k


def conv_flops(ctx, outs) -> float:
    """per output element: 2 * (C/group) * prod(kernel) (multiply-adds), 1 for the bias, the
    fused activation's FLOPs per element"""
    act = ctx.attrs["activation"]
    per = 2 * numel(ctx.shapes[1][1:]) + ctx.has(2) + (ACTIVATIONS[act].flops if act else 0)
    return per * numel(outs[0])


def conv_transpose_flops(ctx, outs) -> float:
    """2 * (M/group) * prod(kernel) per input element (multiply-adds), 1 per output element for the bias"""
    return 2 * numel(ctx.shapes[0]) * numel(ctx.shapes[1][1:]) + ctx.has(2) * numel(outs[0])


def check_activation(attrs) -> str | None:
    """The broken rule, or ``None``: ``activation_params`` holds exactly the scalars of the
    fused ``activation`` (``Activation.scalars``: 2 for Clip, HardSigmoid and HardSwish, 1 for LeakyRelu,
    none for the others and for no activation). Missing or extra parameters made the CPU
    raise ``ValueError`` on every run while the GPUs read other numbers."""
    act, params = attrs["activation"], list(attrs["activation_params"])
    entry = ACTIVATIONS.get(act)
    want = 0 if entry is None else 2 if entry.bounds else len(entry.attrs)
    if len(params) != want:
        # HardSwish took none before its scale and shift (mnnpy 0.1.0's first conversions)
        again = "; convert the model again with this mnnpy" if act == "HardSwish" and not params else ""
        return f"activation '{act}' takes {want} activation_params, got {len(params)}{again}"
    return None


@op_schema(
    "Conv",
    ["X", "W", In("B", optional=True)],
    attrs={
        **_WINDOW,
        "activation": Attr("string", "", FUSED_ACTIVATIONS),
        "activation_params": Attr("floats", []),
    },
    same_rank=(0, 1),
    flops=conv_flops,
    check_attrs=check_activation,
)
def conv(ctx):
    """Conv: ``Y[n, m] = B[m] + sum_c,k X_pad[n, g*C/G + c, s*o + d*k] * W[m, c, k]``; fused activation after."""
    x, w, k = _check_rank(ctx)
    g = ctx.attrs["group"]
    if x[1] != w[1] * g or w[0] % g:
        ctx.fail(f"channels: X has {x[1]}, W expects {w[1]} x group {g}, M={w[0]} must divide by group")
    if ctx.has(2) and tuple(ctx.shapes[2]) != (w[0],):
        ctx.fail(f"B must have shape ({w[0]},)")
    a = ctx.attrs
    win = window_output(ctx, x[2:], k, a["strides"], a["dilations"], a["pads"], a["auto_pad"])
    return [((x[0], w[0], *win.out_sizes), ctx.dtypes[0])]


@op_schema(
    "ConvTranspose",
    ["X", "W", In("B", optional=True)],
    attrs={**_WINDOW, "output_padding": Attr("ints", []), "output_shape": Attr("ints", [])},
    same_rank=(0, 1),
    flops=conv_transpose_flops,
)
def conv_transpose(ctx):
    """ConvTranspose: ``out = s*(in-1) + op + ((k-1)*d+1) - pb - pe`` (or ``output_shape`` with auto pads).

    Geometry ``window``: ``in_sizes`` are X's spatial dims, ``out_sizes`` Y's, ``pads`` after
    ``auto_pad``/``output_shape``."""
    x, w, k = _check_rank(ctx)
    a, g, n = ctx.attrs, ctx.attrs["group"], len(x) - 2
    if x[1] != w[0]:
        ctx.fail(f"channels: X has {x[1]}, W expects {w[0]}")
    strides = list(a["strides"]) or [1] * n
    dil = list(a["dilations"]) or [1] * n
    opad = list(a["output_padding"]) or [0] * n
    out = []
    pads = conv_transpose_pads(ctx, x[2:], k)
    for i in range(n):
        o = strides[i] * (x[2 + i] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1 - pads[i] - pads[n + i]
        if o <= 0:
            ctx.fail(f"output size {o} on spatial dim {i} is not positive")
        out.append(o)
    ctx.derive(window=Window(tuple(x[2:]), tuple(out), tuple(k), tuple(strides), tuple(dil), tuple(pads)))
    return [((x[0], w[1] * g, *out), ctx.dtypes[0])]


def conv_transpose_pads(ctx, in_sizes, kernel) -> list[int]:
    """Explicit pads (begin..., end...) of ConvTranspose after ``auto_pad``/``output_shape`` (ONNX spec)."""
    a, n = ctx.attrs, len(in_sizes)
    strides = list(a["strides"]) or [1] * n
    dil = list(a["dilations"]) or [1] * n
    opad = list(a["output_padding"]) or [0] * n
    pads = list(a["pads"]) or [0] * (2 * n)
    out_shape = list(a["output_shape"])[-n:] if a["output_shape"] else None
    if out_shape is None and a["auto_pad"] not in ("SAME_UPPER", "SAME_LOWER"):
        return [0] * (2 * n) if a["auto_pad"] == "VALID" else pads
    if out_shape is None:
        out_shape = [in_sizes[i] * strides[i] for i in range(n)]
    for i in range(n):
        total = strides[i] * (in_sizes[i] - 1) + opad[i] + ((kernel[i] - 1) * dil[i] + 1) - out_shape[i]
        if a["auto_pad"] == "SAME_UPPER":
            pads[i], pads[n + i] = total // 2, total - total // 2
        else:
            pads[i], pads[n + i] = total - total // 2, total // 2
    return pads

"""Shape helpers shared by op families: broadcasting, axis normalisation, window sizes."""

from __future__ import annotations

import math

from mnnpy.ops.geometry import Window


def broadcast_shape(*shapes) -> tuple[int, ...] | None:
    """Multidirectional (numpy) broadcast of ``shapes`` (ONNX Broadcasting.md) in Python
    integers (dims of any size: NumPy's ``broadcast_shapes`` fails where the product passes
    int64), or ``None`` when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-rank, 0):
        dims = {int(s[i]) for s in shapes if len(s) >= -i} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast(ctx, shapes) -> tuple[int, ...]:
    """``broadcast_shape`` of ``shapes``; ``ctx.fail`` on mismatch."""
    out = broadcast_shape(*shapes)
    if out is None:
        ctx.fail("shapes are not broadcastable (ONNX multidirectional broadcasting)")
    return out


def norm_axis(ctx, axis: int, rank: int, what: str = "axis") -> int:
    """Map ``axis`` in ``[-rank, rank)`` to ``[0, rank)``; ``ctx.fail`` when out of range."""
    if not -rank <= axis < rank:
        ctx.fail(f"{what} {axis} out of range for rank {rank}")
    return axis % rank


def window_output(ctx, in_sizes, kernel, strides, dilations, pads, auto_pad: str, ceil_mode: int = 0) -> Window:
    """The ``Window`` of a conv/pool op (output spatial sizes, explicit pads (begin...,
    end...)), recorded as the op's geometry ``window`` (``ctx.derive``).

    ONNX Conv/AveragePool/MaxPool: ``out = floor_or_ceil((in + pb + pe - ((k-1)*d+1)) / s) + 1``;
    ``SAME_UPPER``/``SAME_LOWER``: ``out = ceil(in / s)`` with the odd pad at the end/begin;
    ``VALID``: no pads. With ``ceil_mode`` the last window must start inside the input or
    the begin padding (PyTorch/ORT rule).
    """
    n = len(in_sizes)
    strides = list(strides) or [1] * n
    dilations = list(dilations) or [1] * n
    pads = list(pads) or [0] * (2 * n)
    if len(kernel) != n or len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        ctx.fail(f"kernel/strides/dilations/pads do not match {n} spatial dims")
    if any(s <= 0 for s in strides) or any(d <= 0 for d in dilations) or any(k <= 0 for k in kernel):
        ctx.fail("kernel_shape, strides and dilations must be positive")
    out, pb, pe = [], list(pads[:n]), list(pads[n:])
    for i in range(n):
        ek = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-in_sizes[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + ek - in_sizes[i])
            small, big = total // 2, total - total // 2
            pb[i], pe[i] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        else:
            if auto_pad == "VALID":
                pb[i] = pe[i] = 0
            span = in_sizes[i] + pb[i] + pe[i] - ek
            if span < 0:
                ctx.fail(f"window {ek} larger than padded input {in_sizes[i] + pb[i] + pe[i]} on spatial dim {i}")
            if ceil_mode:
                o = math.ceil(span / strides[i]) + 1
                if (o - 1) * strides[i] >= in_sizes[i] + pb[i]:
                    o -= 1
            else:
                o = span // strides[i] + 1
        out.append(int(o))
    win = Window(*(tuple(int(v) for v in t) for t in (in_sizes, out, kernel, strides, dilations, pb + pe)))
    ctx.derive(window=win)
    return win

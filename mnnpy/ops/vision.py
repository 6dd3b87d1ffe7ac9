"""Vision ops (ONNX operators.md, the newest opset's form of each): MaxUnpool, Col2Im,
GridSample (canonical modes ``linear``/``nearest``/``cubic``, opset 20), RoiAlign,
NonMaxSuppression, AffineGrid.

NonMaxSuppression's output count depends on the data: its boxes, scores and thresholds
are value inputs, read at resize.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.ops.flops import MOVES, numel, per_input_element
from mnnpy.ops.registry import Attr, In, op_schema

I64 = np.dtype(np.int64)


def _ints(ctx, i) -> list[int]:
    return [int(v) for v in np.asarray(ctx.value(i)).reshape(-1)]


def _float(ctx):
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"X must be a float tensor, got {ctx.dtypes[0]}")


def unpool_shape(x_shape, kernel, pads, strides) -> list[int]:
    """MaxUnpool's default output spatial sizes: ``(in-1)*s + k - pb - pe``."""
    n = len(kernel)
    strides = list(strides) or [1] * n
    pads = list(pads) or [0] * (2 * n)
    return [(x_shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[n + i] for i in range(n)]


@op_schema(
    "MaxUnpool",
    ["X", "I", In("output_shape", optional=True, value=True)],
    ["output"],
    attrs={"kernel_shape": Attr("ints"), "pads": Attr("ints", []), "strides": Attr("ints", [])},
    same_rank=(0,),
    flops=MOVES,
)
def max_unpool(ctx):
    """MaxUnpool: zeros with ``X``'s values scattered at the flat indices ``I`` (of the default
    output); ``output_shape`` (when given) pads that result with zeros at the end."""
    x, a = ctx.shapes[0], ctx.attrs
    n = len(x) - 2
    if n < 1 or len(a["kernel_shape"]) != n or tuple(ctx.shapes[1]) != tuple(x):
        ctx.fail("X must be (N, C, spatial...), I of X's shape, kernel_shape one entry per spatial dim")
    if (a["strides"] and len(a["strides"]) != n) or (a["pads"] and len(a["pads"]) != 2 * n):
        ctx.fail("strides/pads do not match the spatial dims")
    inferred = unpool_shape(x, a["kernel_shape"], a["pads"], a["strides"])
    if ctx.has(2):
        out = _ints(ctx, 2)
        if len(out) != len(x) or any(o < i for o, i in zip(out[2:], inferred)) or list(out[:2]) != list(x[:2]):
            ctx.fail(f"output_shape {out} must be (N, C, sizes >= {inferred})")
        return [(tuple(out), ctx.dtypes[0])]
    if any(d <= 0 for d in inferred):
        ctx.fail(f"output size {inferred} must be positive")
    return [((x[0], x[1], *inferred), ctx.dtypes[0])]


def col2im_params(ctx):
    """``(image, block, dilations, pads, strides, blocks per dim)`` of Col2Im."""
    image, block = _ints(ctx, 1), _ints(ctx, 2)
    n = len(image)
    a = ctx.attrs
    dil = list(a["dilations"]) or [1] * n
    pads = list(a["pads"]) or [0] * (2 * n)
    strides = list(a["strides"]) or [1] * n
    if len(block) != n or len(dil) != n or len(pads) != 2 * n or len(strides) != n:
        ctx.fail("image_shape, block_shape, dilations, pads and strides must agree on the spatial dims")
    nb = []
    for i in range(n):
        ek = (block[i] - 1) * dil[i] + 1
        span = image[i] + pads[i] + pads[n + i] - ek
        if span < 0 or strides[i] < 1:
            ctx.fail(f"block {block[i]} larger than padded image on spatial dim {i}")
        nb.append(span // strides[i] + 1)
    return image, block, dil, pads, strides, nb


@op_schema(
    "Col2Im",
    ["input", In("image_shape", value=True), In("block_shape", value=True)],
    ["output"],
    attrs={"dilations": Attr("ints", []), "pads": Attr("ints", []), "strides": Attr("ints", [])},
    flops=per_input_element(1),
)
def col2im(ctx):
    """Col2Im: ``(N, C*prod(block), L)`` column blocks summed back into ``(N, C, *image_shape)``."""
    x = ctx.shapes[0]
    params = col2im_params(ctx)
    ctx.derive(col2im=params)
    image, block, _, _, _, nb = params
    k = math.prod(block)
    if len(x) != 3 or k == 0 or x[1] % k or x[2] != math.prod(nb):
        ctx.fail(f"input must be (N, C*{k}, {math.prod(nb)})")
    return [((x[0], x[1] // k, *image), ctx.dtypes[0])]


def grid_sample_flops(ctx, outs) -> float:
    """per output element: 2 per tap of the interpolation (``2^d`` taps linear, ``4^d`` cubic,
    none nearest) and 4 per spatial axis for the coordinate"""
    d = len(ctx.shapes[0]) - 2
    taps = {"nearest": 0, "linear": 2**d, "cubic": 4**d}[ctx.attrs["mode"]]
    return (2 * taps + 4 * d) * numel(outs[0])


@op_schema(
    "GridSample",
    ["X", "grid"],
    attrs={
        "align_corners": Attr("int", 0, (0, 1)),
        "mode": Attr("string", "linear", ("linear", "nearest", "cubic")),
        "padding_mode": Attr("string", "zeros", ("zeros", "border", "reflection")),
    },
    same_rank=(0,),
    flops=grid_sample_flops,
)
def grid_sample(ctx):
    """GridSample: ``Y[n, c, *o] = interp(X[n, c], grid[n, *o])`` (grid's last dim: x, y[, z])."""
    x, g = ctx.shapes[0], ctx.shapes[1]
    _float(ctx)
    if len(x) < 3 or len(g) != len(x) or g[0] != x[0] or g[-1] != len(x) - 2:
        ctx.fail("X must be (N, C, spatial...) and grid (N, out spatial..., rank-2)")
    if ctx.attrs["mode"] == "cubic" and len(x) != 4:
        ctx.fail("cubic mode supports 2-D (4-D input) only")
    return [((x[0], x[1], *g[1:-1]), ctx.dtypes[0])]


def roi_align_flops(ctx, outs) -> float:
    """per output element: 10 per bilinear sample (4 taps and their weights), ``sampling_ratio^2``
    samples (4 when adaptive, 0)"""
    ratio = ctx.attrs["sampling_ratio"] or 2
    return 10 * ratio * ratio * numel(outs[0])


@op_schema(
    "RoiAlign",
    ["X", "rois", "batch_indices"],
    attrs={
        "coordinate_transformation_mode": Attr("string", "half_pixel", ("half_pixel", "output_half_pixel")),
        "mode": Attr("string", "avg", ("avg", "max")),
        "output_height": Attr("int", 1),
        "output_width": Attr("int", 1),
        "sampling_ratio": Attr("int", 0),
        "spatial_scale": Attr("float", 1.0),
    },
    same_rank=(0,),
    flops=roi_align_flops,
)
def roi_align(ctx):
    """RoiAlign: ``(num_rois, C, output_height, output_width)`` bilinear samples averaged (or maxed) per bin."""
    x, r, b = ctx.shapes
    _float(ctx)
    if len(x) != 4 or len(r) != 2 or r[1] != 4 or tuple(b) != (r[0],):
        ctx.fail("X must be (N, C, H, W), rois (R, 4), batch_indices (R,)")
    a = ctx.attrs
    if a["output_height"] < 1 or a["output_width"] < 1 or a["sampling_ratio"] < 0:
        ctx.fail("output_height/width must be positive and sampling_ratio non-negative")
    return [((r[0], x[1], a["output_height"], a["output_width"]), ctx.dtypes[0])]


def _iou_suppress(box, others, center: int, thr: float) -> np.ndarray:
    """Whether each of ``others`` overlaps ``box`` with IoU > ``thr`` (onnxruntime's rules)."""
    b, o = np.asarray(box, np.float64), np.asarray(others, np.float64)
    if center:
        b = np.array([b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2])
        o = np.stack([o[:, 1] - o[:, 3] / 2, o[:, 0] - o[:, 2] / 2, o[:, 1] + o[:, 3] / 2, o[:, 0] + o[:, 2] / 2], 1)
    by0, by1 = min(b[0], b[2]), max(b[0], b[2])
    bx0, bx1 = min(b[1], b[3]), max(b[1], b[3])
    oy0, oy1 = np.minimum(o[:, 0], o[:, 2]), np.maximum(o[:, 0], o[:, 2])
    ox0, ox1 = np.minimum(o[:, 1], o[:, 3]), np.maximum(o[:, 1], o[:, 3])
    ih = np.minimum(by1, oy1) - np.maximum(by0, oy0)
    iw = np.minimum(bx1, ox1) - np.maximum(bx0, ox0)
    inter = np.where((ih > 0) & (iw > 0), ih * iw, 0.0)
    a1 = (by1 - by0) * (bx1 - bx0)
    a2 = (oy1 - oy0) * (ox1 - ox0)
    union = a1 + a2 - inter
    with np.errstate(all="ignore"):
        iou = np.where((inter > 0) & (a1 > 0) & (a2 > 0) & (union > 0), inter / union, 0.0)
    return iou > thr


def nms_select(boxes, scores, max_out, iou_thr, score_thr, center: int) -> np.ndarray:
    """``(count, 3)`` int64 ``[batch, class, box]`` selected by greedy per-class NMS: boxes in
    descending score order (ties: lower index first), scores ``> score_thr``, suppressed
    when IoU ``> iou_thr`` with a kept box, at most ``max_out`` per class."""
    out = []
    nb, nc, _ = scores.shape
    for b in range(nb):
        for c in range(nc):
            s = scores[b, c]
            cand = np.argsort(-s.astype(np.float64), kind="stable")
            if score_thr is not None:
                cand = cand[s[cand] > score_thr]
            kept: list[int] = []
            while cand.size and len(kept) < max_out:
                top = cand[0]
                kept.append(int(top))
                cand = cand[1:]
                if cand.size:
                    cand = cand[~_iou_suppress(boxes[b, top], boxes[b, cand], center, iou_thr)]
            out.extend((b, c, k) for k in kept)
    return np.array(out, np.int64).reshape(-1, 3)


def nms_args(values):
    """``(boxes, scores, max_out, iou_thr, score_thr)`` from NonMaxSuppression's input values."""
    boxes, scores = np.asarray(values[0]), np.asarray(values[1])
    opt = [
        None if (i >= len(values) or values[i] is None or np.asarray(values[i]).size == 0) else np.asarray(values[i])
        for i in (2, 3, 4)
    ]
    max_out = int(opt[0].reshape(-1)[0]) if opt[0] is not None else 0
    iou = float(opt[1].reshape(-1)[0]) if opt[1] is not None else 0.0
    score = float(opt[2].reshape(-1)[0]) if opt[2] is not None else None
    return boxes, scores, max_out, iou, score


def nms_flops(ctx, outs) -> float:
    """15 per pair of boxes of one batch and class (intersection over union), at most"""
    b, c, n = ctx.shapes[1]
    return 15.0 * b * c * n * (n - 1) / 2


@op_schema(
    "NonMaxSuppression",
    [
        In("boxes", value=True),
        In("scores", value=True),
        In("max_output_boxes_per_class", optional=True, value=True),
        In("iou_threshold", optional=True, value=True),
        In("score_threshold", optional=True, value=True),
    ],
    ["selected_indices"],
    attrs={"center_point_box": Attr("int", 0, (0, 1))},
    flops=nms_flops,
)
def non_max_suppression(ctx):
    """NonMaxSuppression: ``(count, 3)`` int64 selected ``[batch, class, box]`` (count depends on the data)."""
    bx, sc = ctx.shapes[0], ctx.shapes[1]
    if len(bx) != 3 or bx[2] != 4 or len(sc) != 3 or sc[0] != bx[0] or sc[2] != bx[1]:
        ctx.fail("boxes must be (B, n, 4) and scores (B, C, n)")
    values = [ctx.value(0), ctx.value(1)] + [ctx.value(i) if ctx.has(i) else None for i in (2, 3, 4)]
    y = nms_select(*nms_args(values), ctx.attrs["center_point_box"])
    ctx.set_value(0, y)
    return [(y.shape, I64)]


def affine_base_grid(sizes, align_corners: int) -> np.ndarray:
    """Homogeneous base grid ``(*sizes, n+1)`` with coordinates in x, y[, z] order, then 1."""
    axes = []
    for s in sizes:
        if align_corners:
            a = np.linspace(-1.0, 1.0, s) if s > 1 else np.full(s, -1.0)
        else:
            a = (np.arange(s) * 2.0 + 1.0) / s - 1.0
        axes.append(a)
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([*mesh[::-1], np.ones(tuple(sizes))], axis=-1)


def affine_grid_flops(ctx, outs) -> float:
    """``2 (d + 1)`` per output element (a row of ``theta`` times the homogeneous point)"""
    return 2 * (outs[0][-1] + 1) * numel(outs[0])


@op_schema(
    "AffineGrid",
    ["theta", In("size", value=True)],
    ["grid"],
    attrs={"align_corners": Attr("int", 0, (0, 1))},
    flops=affine_grid_flops,
)
def affine_grid(ctx):
    """AffineGrid: ``grid[n, *p] = theta[n] @ (x, y[, z], 1)`` over the normalised base grid of ``size``."""
    size = _ints(ctx, 1)
    t = ctx.shapes[0]
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"theta must be a float tensor, got {ctx.dtypes[0]}")
    if len(size) not in (4, 5):
        ctx.fail(f"size {size} must be (N, C, H, W) or (N, C, D, H, W)")
    n = len(size) - 2
    if tuple(t) != (size[0], n, n + 1):
        ctx.fail(f"theta must be ({size[0]}, {n}, {n + 1})")
    return [((size[0], *size[2:], n), ctx.dtypes[0])]

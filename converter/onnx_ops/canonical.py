"""ONNX ops whose form changed across opsets, rewritten to the one canonical form.

Sources: ONNX Changelog.md (per-op version history).
"""

from __future__ import annotations

import numpy as np

from mnnpy.converter.registry import onnx_op
from mnnpy.errors import ModelFormatError, UnsupportedOperatorError


@onnx_op("Constant")
def constant(node, ctx):
    """Constant (every ``value*`` attribute) -> a constant tensor; no op is emitted."""
    a = ctx.attrs(node)
    if "value" in a:
        v = a["value"]
    elif "value_float" in a:
        v = np.array(a["value_float"], np.float32)
    elif "value_floats" in a:
        v = np.array(a["value_floats"], np.float32)
    elif "value_int" in a:
        v = np.array(a["value_int"], np.int64)
    elif "value_ints" in a:
        v = np.array(a["value_ints"], np.int64)
    else:
        raise ModelFormatError(f"Constant '{node.name}': attribute {sorted(a)} is not supported")
    ctx.const(v, node.output[0])


def _axes_to_input(node, ctx, type_, since: int, extra: dict | None = None):
    """Ops whose ``axes`` attribute became an input in opset ``since``."""
    a = ctx.attrs(node)
    inputs = list(node.input)
    if ctx.opset < since:
        axes = a.pop("axes", None)
        inputs = inputs[:1] + ([ctx.const(np.array(axes, np.int64))] if axes is not None else [])
    a.update(extra or {})
    ctx.emit(type_, inputs, list(node.output), a, node.name)


@onnx_op("Squeeze")
def squeeze(node, ctx):
    """Squeeze: ``axes`` attribute (< 13) -> input."""
    _axes_to_input(node, ctx, "Squeeze", 13)


@onnx_op("Unsqueeze")
def unsqueeze(node, ctx):
    """Unsqueeze: ``axes`` attribute (< 13) -> input."""
    _axes_to_input(node, ctx, "Unsqueeze", 13)


@onnx_op("Split")
def split(node, ctx):
    """Split: ``split`` attribute (< 13) -> input; ``num_outputs`` (18+) kept."""
    a = ctx.attrs(node)
    inputs = list(node.input[:2])
    if ctx.opset < 13:
        sizes = a.pop("split", None)
        inputs = inputs[:1] + ([ctx.const(np.array(sizes, np.int64))] if sizes else [])
    attrs = {k: a[k] for k in ("axis", "num_outputs") if k in a}
    ctx.emit("Split", inputs, list(node.output), attrs, node.name)


@onnx_op("Clip")
def clip(node, ctx):
    """Clip: ``min``/``max`` attributes (< 11) -> scalar constant inputs."""
    if ctx.opset < 11:
        a = ctx.attrs(node)
        lo = ctx.const(np.array(a.get("min", -3.4028234663852886e38), np.float32))
        hi = ctx.const(np.array(a.get("max", 3.4028234663852886e38), np.float32))
        ctx.emit("Clip", [node.input[0], lo, hi], list(node.output), {}, node.name)
    else:
        ctx.emit("Clip", list(node.input), list(node.output), {}, node.name)


@onnx_op("BatchNormalization")
def batch_normalization(node, ctx):
    """BatchNormalization: one output (``is_test``/``consumed_inputs`` dropped); with
    ``training_mode`` (opset 14+) also the running mean and variance.

    ``spatial=0`` (opsets 7-8: per-activation statistics of shape (C, D1, ...)) with
    constant parameters becomes ``Mul(X, s) + t``, ``s = scale / sqrt(var + eps)``,
    ``t = B - mean * s``.
    """
    a = ctx.attrs(node)
    if a.get("spatial", 1) == 0:
        params = [ctx.value(n) for n in node.input[1:5]]
        if any(v is None for v in params):
            raise ModelFormatError(f"BatchNormalization '{node.name}': spatial=0 needs constant parameters")
        scale, b, mean, var = (np.asarray(v, np.float64) for v in params)
        s = scale / np.sqrt(var + a.get("epsilon", 1e-5))
        dt = params[0].dtype
        mid = ctx.fresh(node.output[0] + "_scaled")
        ctx.emit("Mul", [node.input[0], ctx.const(s.astype(dt))], [mid], {}, (node.name or node.output[0]) + "_mul")
        ctx.emit("Add", [mid, ctx.const((b - mean * s).astype(dt))], [node.output[0]], {}, node.name)
        return
    keep = {k: a[k] for k in ("epsilon", "momentum", "training_mode") if k in a}
    outputs = list(node.output[:3]) if a.get("training_mode", 0) else [node.output[0]]
    ctx.emit("BatchNormalization", list(node.input[:5]), outputs, keep, node.name)


@onnx_op("Softmax")
def softmax(node, ctx):
    """Softmax: opset < 13 coerces the input to 2-D at ``axis`` (default 1) and normalises
    each row: Shape + Flatten(axis) -> Softmax(-1) -> Reshape back. ``axis=-1`` is the
    same in both semantics and becomes one Softmax.
    """
    axis = ctx.attrs(node).get("axis", 1 if ctx.opset < 13 else -1)
    if ctx.opset >= 13 or axis == -1:
        ctx.emit("Softmax", [node.input[0]], [node.output[0]], {"axis": axis}, node.name)
        return
    base = node.name or node.output[0]
    flat, shape = ctx.fresh(node.output[0] + "_2d"), ctx.fresh(node.output[0] + "_shape")
    soft = ctx.fresh(node.output[0] + "_softmax")
    ctx.emit("Shape", [node.input[0]], [shape], {}, base + "_shape")
    ctx.emit("Flatten", [node.input[0]], [flat], {"axis": axis}, base + "_flatten")
    ctx.emit("Softmax", [flat], [soft], {"axis": -1}, base)
    ctx.emit("Reshape", [soft, shape], [node.output[0]], {}, base + "_reshape")


@onnx_op("Slice")
def slice_(node, ctx):
    """Slice: ``starts``/``ends``/``axes`` attributes (< 10) -> inputs."""
    if ctx.opset < 10:
        a = ctx.attrs(node)
        ins = [node.input[0], ctx.const(np.array(a["starts"], np.int64)), ctx.const(np.array(a["ends"], np.int64))]
        if "axes" in a:
            ins.append(ctx.const(np.array(a["axes"], np.int64)))
        ctx.emit("Slice", ins, list(node.output), {}, node.name)
    else:
        ctx.emit("Slice", list(node.input), list(node.output), {}, node.name)


@onnx_op("Pad")
def pad(node, ctx):
    """Pad: ``pads``/``value`` attributes (< 11) -> inputs."""
    a = ctx.attrs(node)
    mode = a.get("mode", "constant")
    if ctx.opset < 11:
        ins = [node.input[0], ctx.const(np.array(a["pads"], np.int64)), ctx.const(np.array(a.get("value", 0.0), np.float32))]
        ctx.emit("Pad", ins, list(node.output), {"mode": mode}, node.name)
    else:
        ctx.emit("Pad", list(node.input), list(node.output), {"mode": mode}, node.name)


@onnx_op("Dropout")
def dropout(node, ctx):
    """Dropout (inference) -> Identity. The optional mask is a constant of X's shape, as
    onnxruntime makes it: opset < 10 zeros of X's dtype, 10-11 False, 12+ True."""
    ctx.emit("Identity", [node.input[0]], [node.output[0]], {}, node.name)
    if len(node.output) > 1 and node.output[1]:
        base = node.name or node.output[0]
        if ctx.opset < 10:
            fill = np.zeros(1, ctx.graph.tensors[ctx.tensor(node.input[0])].dtype)
        else:
            fill = np.array([ctx.opset >= 12])
        shape = ctx.fresh(node.output[1] + "_shape")
        ctx.emit("Shape", [node.input[0]], [shape], {}, base + "_mask_shape")
        ctx.emit("ConstantOfShape", [shape], [node.output[1]], {"value": fill}, base + "_mask")


def _nearest_split(scales: np.ndarray | None) -> list[tuple[np.ndarray | None, str]]:
    """Upsample / Resize-10 nearest: onnxruntime rounds the asymmetric source coordinate
    down on upsampled axes and up on downsampled ones. Returns (scales, nearest_mode)
    steps; axes of both kinds need two Resizes (nearest is separable per axis)."""
    if scales is None or not (scales < 1).any():
        return [(scales, "floor")]
    if not (scales > 1).any():
        return [(scales, "ceil")]
    down, up = np.where(scales < 1, scales, 1), np.where(scales < 1, 1, scales)
    return [(down.astype(np.float32), "ceil"), (up.astype(np.float32), "floor")]


def _old_resize(node, ctx, mode: str) -> None:
    """Upsample (7: ``scales`` attribute; 9: input) and Resize-10 -> asymmetric Resize."""
    a = ctx.attrs(node)
    attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
    if "scales" in a:
        scales_name, scales = None, np.array(a["scales"], np.float32)
    else:
        scales_name, scales = node.input[1], ctx.value(node.input[1])
    if mode != "nearest":
        steps = [(scales, None)]
    else:
        steps = _nearest_split(None if scales is None else np.asarray(scales, np.float32))
    src, base = node.input[0], node.name or node.output[0]
    for k, (sc, nearest) in enumerate(steps):
        last = k == len(steps) - 1
        dst = node.output[0] if last else ctx.fresh(node.output[0] + "_down")
        sc_name = scales_name if scales_name and len(steps) == 1 else ctx.const(sc)
        extra = {"nearest_mode": nearest} if nearest else {}
        ctx.emit("Resize", [src, "", sc_name, ""], [dst], attrs | extra, base if last else base + "_down")
        src = dst


@onnx_op("Resize", "Upsample")
def resize(node, ctx):
    """Resize/Upsample of every opset -> opset-18 Resize (X, roi, scales, sizes).

    Upsample and Resize-10 use asymmetric coordinates (``bilinear`` of Upsample-7 is
    ``linear``). From opset 11 on: empty ``roi``/``scales``/``sizes`` tensors mean
    absent; ``roi`` only matters for ``tf_crop_and_resize``; opset 11's
    ``tf_half_pixel_for_nn`` (source ``(x + 0.5) / scale``) equals ``half_pixel`` with
    rounding mode ``round_prefer_floor`` -> ``ceil`` and ``floor`` -> ``round_prefer_ceil``
    (the other two have no equivalent and are refused).
    """
    a = ctx.attrs(node)
    mode = a.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode
    if node.op_type == "Upsample" or ctx.opset < 11:
        _old_resize(node, ctx, mode)
        return
    if a.get("antialias", 0):
        raise UnsupportedOperatorError({"Resize (antialias=1)": 1}, where=f"Resize '{node.name or node.output[0]}'")
    ins = list(node.input) + [""] * (4 - len(node.input))
    a["mode"] = mode
    for i in (1, 2, 3):
        v = ctx.value(ins[i])
        if v is not None and v.size == 0:
            ins[i] = ""
    if a.get("coordinate_transformation_mode") == "tf_half_pixel_for_nn":
        a["coordinate_transformation_mode"] = "half_pixel"
        if mode == "nearest":
            nearest = a.get("nearest_mode", "round_prefer_floor")
            fixed = {"round_prefer_floor": "ceil", "floor": "round_prefer_ceil"}
            if nearest not in fixed:
                raise ModelFormatError(f"Resize '{node.name}': tf_half_pixel_for_nn with nearest_mode {nearest} is not supported")
            a["nearest_mode"] = fixed[nearest]
    if a.get("coordinate_transformation_mode") != "tf_crop_and_resize":
        ins[1] = ""
    ctx.emit("Resize", ins, list(node.output), a, node.name)

"""ONNX ops whose form changed across opsets, rewritten to the one canonical form.

Sources: ONNX Changelog.md (per-op version history).
"""

from __future__ import annotations

import numpy as np

from mnnpy.converter.registry import onnx_op


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
        from mnnpy.errors import ModelFormatError

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


@onnx_op("ReduceMean")
def reduce_mean(node, ctx):
    """ReduceMean: ``axes`` attribute (< 18) -> input."""
    _axes_to_input(node, ctx, "ReduceMean", 18)


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
    """BatchNormalization: inference form, one output (``spatial``/``is_test``/``consumed_inputs`` dropped)."""
    a = ctx.attrs(node)
    keep = {k: a[k] for k in ("epsilon", "momentum") if k in a}
    ctx.emit("BatchNormalization", list(node.input[:5]), [node.output[0]], keep, node.name)


@onnx_op("Softmax")
def softmax(node, ctx):
    """Softmax: opset < 13 coerces to 2-D at ``axis`` (default 1): Flatten -> Softmax(-1) -> Reshape."""
    axis = ctx.attrs(node).get("axis", 1 if ctx.opset < 13 else -1)
    if ctx.opset >= 13:
        ctx.emit("Softmax", [node.input[0]], [node.output[0]], {"axis": axis}, node.name)
        return
    flat, shape = ctx.fresh(node.output[0] + "_2d"), ctx.fresh(node.output[0] + "_shape")
    soft = ctx.fresh(node.output[0] + "_softmax")
    ctx.emit("Shape", [node.input[0]], [shape], {}, node.name + "_shape")
    ctx.emit("Flatten", [node.input[0]], [flat], {"axis": axis}, node.name + "_flatten")
    ctx.emit("Softmax", [flat], [soft], {"axis": -1}, node.name)
    ctx.emit("Reshape", [soft, shape], [node.output[0]], {}, node.name + "_reshape")


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
    """Dropout (inference) -> Identity; the optional mask output is not supported."""
    ctx.emit("Identity", [node.input[0]], [node.output[0]], {}, node.name)


@onnx_op("Resize", "Upsample")
def resize(node, ctx):
    """Resize/Upsample of every opset -> opset-18 Resize (X, roi, scales, sizes).

    Upsample (7: ``scales`` attribute; 9: input) and Resize-10 use asymmetric
    coordinates; ``linear`` was called ``bilinear`` in Upsample-7.
    """
    a = ctx.attrs(node)
    mode = a.get("mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode
    if node.op_type == "Upsample" or ctx.opset < 11:
        scales = ctx.const(np.array(a["scales"], np.float32)) if "scales" in a else node.input[1]
        attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
        if mode == "nearest":
            attrs["nearest_mode"] = "floor"
        ctx.emit("Resize", [node.input[0], "", scales, ""], list(node.output), attrs, node.name)
        return
    ins = list(node.input) + [""] * (4 - len(node.input))
    a["mode"] = mode
    for k in ("roi",):
        a.pop(k, None)
    if ctx.opset < 13:
        # opset 11: roi and scales were required inputs, empty tensors meaning "absent"
        for i in (1, 2, 3):
            v = ctx.value(ins[i])
            if v is not None and v.size == 0:
                ins[i] = ""
    if a.get("coordinate_transformation_mode") != "tf_crop_and_resize":
        ins[1] = ""
    ctx.emit("Resize", ins, list(node.output), a, node.name)

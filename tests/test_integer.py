"""Integer and quantised ops against onnxruntime: MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv (int8/uint8, scalar and per-row/column/channel zero points)."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import EXACT, check, make_model


def _q(rng, dtype, *shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_axis", [False, True])
def test_matmul_integer(rng, dtype, per_axis):
    a, b = _q(rng, dtype, 5, 7), _q(rng, dtype, 7, 3)
    azp = _q(rng, dtype)  # onnxruntime takes a per-tensor a_zero_point only
    bzp = _q(rng, dtype, 3) if per_axis else _q(rng, dtype)
    node = helper.make_node("MatMulInteger", ["a", "b", "azp", "bzp"], ["y"])
    m = make_model([node], {"a": a, "b": b}, ["y"], initializers={"azp": azp, "bzp": bzp}, opset=10)
    check(m, {"a": a, "b": b}, **EXACT)


def test_matmul_integer_batched_no_zero_points(rng):
    a, b = _q(rng, np.uint8, 2, 4, 6), _q(rng, np.uint8, 6, 5)
    m = make_model([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"], opset=10)
    check(m, {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 2, 1, 0], "strides": [2, 1]}, {"dilations": [2, 2], "group": 2}])
def test_conv_integer(rng, attrs):
    x, w = _q(rng, np.uint8, 2, 4, 9, 8), _q(rng, np.uint8, 6, 4 // attrs.get("group", 1), 3, 2)
    inits = {"w": w, "xzp": np.array(7, np.uint8), "wzp": np.array(129, np.uint8)}
    node = helper.make_node("ConvInteger", ["x", "w", "xzp", "wzp"], ["y"], **attrs)
    check(make_model([node], {"x": x}, ["y"], initializers=inits, opset=10), {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul(rng, dtype):
    a, b = _q(rng, dtype, 3, 6, 11), _q(rng, dtype, 11, 5)
    inits = {
        "as": np.array(0.02, np.float32),
        "azp": _q(rng, dtype),
        "b": b,
        "bs": np.array(0.013, np.float32),
        "bzp": _q(rng, dtype),
        "ys": np.array(0.7, np.float32),
        "yzp": _q(rng, dtype),
    }
    node = helper.make_node("QLinearMatMul", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"], ["y"])
    check(make_model([node], {"a": a}, ["y"], initializers=inits, opset=10), {"a": a}, atol=1, rtol=0)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv(rng, dtype, per_channel):
    x = _q(rng, dtype, 1, 3, 7, 6)
    w = _q(rng, np.int8, 4, 3, 3, 3)
    inits = {
        "xs": np.array(0.05, np.float32),
        "xzp": _q(rng, dtype),
        "w": w,
        "ws": (rng.uniform(0.001, 0.01, 4) if per_channel else np.array(0.004)).astype(np.float32),
        "wzp": np.zeros(4 if per_channel else (), np.int8),
        "ys": np.array(0.3, np.float32),
        "yzp": _q(rng, dtype),
        "B": rng.integers(-500, 500, 4).astype(np.int32),
    }
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xzp", "w", "ws", "wzp", "ys", "yzp", "B"], ["y"], pads=[1, 1, 1, 1], strides=[1, 2]
    )
    check(make_model([node], {"x": x}, ["y"], initializers=inits, opset=10), {"x": x}, atol=1, rtol=0)

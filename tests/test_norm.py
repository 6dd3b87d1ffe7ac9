"""Normalisation extras, LogSoftmax/Hardmax, GlobalMaxPool, LpPool and
Quantize/DequantizeLinear against onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand


def _one(op, x, opset, inits=None, inputs=None, outputs=("y",), **attrs):
    node = helper.make_node(op, ["x", *(inputs or [])], list(outputs), **attrs)
    return make_model([node], {"x": x}, list(outputs), inits, opset=opset)


@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_like(rng, op, axis, opset):
    x = rand(rng, 3, 5, 7, scale=3)
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    check(_one(op, x, opset, **attrs), {"x": x}, **(ACCUMULATE if op == "LogSoftmax" else EXACT))


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("bias", [False, True])
def test_layer_norm(rng, axis, bias):
    x = rand(rng, 2, 5, 7)
    shape = x.shape[axis:]
    inits = {"s": rand(rng, *shape), **({"b": rand(rng, *shape)} if bias else {})}
    ins = ["s", "b"] if bias else ["s"]
    m = _one("LayerNormalization", x, 17, inits, ins, ("y", "mean", "inv"), axis=axis, epsilon=1e-3)
    check(m, {"x": x}, **ACCUMULATE)


def test_layer_norm_broadcast_scale_fp16(rng):
    x = rand(rng, 3, 4, 6, dtype=np.float16)
    m = _one("LayerNormalization", x, 17, {"s": rand(rng, 6, dtype=np.float16)}, ["s"], axis=1)
    check(m, {"x": x}, atol=5 * 2**-10, rtol=5 * 2**-10)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 5), (2, 2, 2, 3, 3)])
def test_instance_norm(rng, shape):
    x = rand(rng, *shape)
    c = shape[1]
    m = _one("InstanceNormalization", x, 11, {"s": rand(rng, c), "b": rand(rng, c)}, ["s", "b"], epsilon=1e-4)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm(rng, groups):
    x = rand(rng, 2, 6, 5, 3)
    m = _one("GroupNormalization", x, 21, {"s": rand(rng, 6), "b": rand(rng, 6)}, ["s", "b"], num_groups=groups)
    check(m, {"x": x}, **ACCUMULATE)


def test_group_norm_18(rng):
    """Opset 18: one scale/bias per group (checked against a numpy reference)."""
    from tests.oracle import run_mnnpy

    x, s, b = rand(rng, 2, 6, 4), rand(rng, 3), rand(rng, 3)
    m = _one("GroupNormalization", x, 18, {"s": s, "b": b}, ["s", "b"], num_groups=3)
    xg = x.reshape(2, 3, -1)
    ref = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)
    ref = ref * s[None, :, None] + b[None, :, None]
    np.testing.assert_allclose(run_mnnpy(m, {"x": x})[0], ref.reshape(x.shape), **ACCUMULATE)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_lp_norm(rng, p, axis):
    x = rand(rng, 3, 4, 5)
    check(_one("LpNormalization", x, 13, p=p, axis=axis), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("size", [1, 3, 5, 9])  # onnxruntime takes odd sizes only
def test_lrn(rng, size):
    x = rand(rng, 2, 7, 4, 3)
    check(_one("LRN", x, 13, size=size, alpha=0.02, beta=0.6, bias=1.5), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("axes", [None, [1], [0, 2, 3], [2, 3]])
def test_mvn(rng, axes):
    x = rand(rng, 2, 3, 4, 5)
    attrs = {} if axes is None else {"axes": axes}
    check(_one("MeanVarianceNormalization", x, 13, **attrs), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 5, 4, 3), (1, 2, 3, 2, 4)])
def test_global_max_pool(rng, shape):
    x = rand(rng, *shape)
    check(_one("GlobalMaxPool", x, 13), {"x": x}, **EXACT)


@pytest.mark.parametrize(
    "attrs",
    [
        dict(kernel_shape=[3]),
        dict(kernel_shape=[2, 3], p=1),
        dict(kernel_shape=[3, 3], pads=[1, 0, 2, 1], p=3),
        dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER"),
        dict(kernel_shape=[3, 2], strides=[2, 1], auto_pad="SAME_LOWER"),
        dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="VALID"),
        dict(kernel_shape=[2, 2], dilations=[2, 1]),
        dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    ],
)
def test_lp_pool(rng, attrs):
    nd = len(attrs["kernel_shape"])
    x = rand(rng, 2, 3, *[9, 8][:nd]) if nd == 2 else rand(rng, 2, 3, 11)
    opset = 18 if "dilations" in attrs or "ceil_mode" in attrs else 11
    check(_one("LpPool", x, opset, **attrs), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("zp_dtype", [None, np.uint8, np.int8, np.uint16, np.int16])
def test_quantize_per_tensor(rng, zp_dtype):
    x = rand(rng, 3, 17, scale=200)
    inits = {"s": np.array(1.7, np.float32)}
    ins = ["s"]
    if zp_dtype is not None:
        inits["z"] = np.array(3, zp_dtype)
        ins.append("z")
    check(_one("QuantizeLinear", x, 21, inits, ins), {"x": x}, **EXACT)
    if zp_dtype is not None and zp_dtype in (np.uint8, np.int8):
        q = rng.integers(0, 100, (3, 17)).astype(zp_dtype)
        node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
        m = make_model([node], {"q": q}, ["y"], inits, opset=10)
        check(m, {"q": q}, **EXACT)


def test_quantize_half_even(rng):
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300, -300], np.float32)
    check(_one("QuantizeLinear", x, 13, {"s": np.array(1.0, np.float32)}, ["s"]), {"x": x}, **EXACT)
    z = {"s": np.array(1.0, np.float32), "z": np.array(0, np.int8)}
    check(_one("QuantizeLinear", x, 13, z, ["s", "z"]), {"x": x}, **EXACT)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_per_axis(rng, axis):
    x = rand(rng, 4, 5, 3, scale=50)
    n = x.shape[axis]
    inits = {"s": (rng.random(n) + 0.5).astype(np.float32), "z": rng.integers(-10, 10, n).astype(np.int8)}
    check(_one("QuantizeLinear", x, 13, inits, ["s", "z"], axis=axis), {"x": x}, **EXACT)
    q = rng.integers(-100, 100, x.shape).astype(np.int8)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis)
    check(make_model([node], {"q": q}, ["y"], inits, opset=13), {"q": q}, **EXACT)


def test_blocked(rng):
    x = rand(rng, 3, 7, scale=20)
    s = (rng.random((3, 3)) + 0.5).astype(np.float32)
    z = rng.integers(0, 20, (3, 3)).astype(np.uint8)
    m = _one("QuantizeLinear", x, 21, {"s": s, "z": z}, ["s", "z"], axis=1, block_size=3)
    check(m, {"x": x}, **EXACT)
    m = _one("QuantizeLinear", x, 21, {"s": s}, ["s"], axis=1, block_size=3, output_dtype=TensorProto.INT16)
    check(m, {"x": x}, **EXACT)
    q = rng.integers(0, 200, (3, 7)).astype(np.uint8)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=3)
    check(make_model([node], {"q": q}, ["y"], {"s": s, "z": z}, opset=21), {"q": q}, **EXACT)


def test_dequantize_int32_and_fp16(rng):
    q = rng.integers(-(2**20), 2**20, (4, 6)).astype(np.int32)
    node = helper.make_node("DequantizeLinear", ["q", "s"], ["y"])
    check(make_model([node], {"q": q}, ["y"], {"s": np.array(0.03, np.float32)}, opset=13), {"q": q}, **EXACT)
    q8 = rng.integers(0, 255, (4, 6)).astype(np.uint8)
    inits = {"s": np.array(0.25, np.float16), "z": np.array(7, np.uint8)}
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    check(make_model([node], {"q": q8}, ["y"], inits, opset=19), {"q": q8}, **EXACT)

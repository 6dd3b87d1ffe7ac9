"""Further ops against onnxruntime: bitwise ops, Shrink, Swish, ReverseSequence, Compress,
Unique, Det, RMSNormalization, CenterCropPad (seeded random data, odd sizes, attribute
edge cases, value inputs fed as constants and as graph inputs)."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ACCUMULATE, ELEMENTWISE, EXACT, HALF, check, make_model, rand


def _model(op, inputs, outputs=("y",), inits=None, opset=18, **attrs):
    names = list(inputs) + list(inits or {})
    node = helper.make_node(op, names, list(outputs), **attrs)
    return make_model([node], inputs, list(outputs), initializers=inits, opset=opset)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64])
def test_bitwise_binary(rng, op, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 5, 7), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (5, 1), dtype=dtype, endpoint=True)
    check(_model(op, {"a": a, "b": b}), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.uint64])
def test_bitwise_not(rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (2, 9, 3), dtype=dtype, endpoint=True)
    check(_model("BitwiseNot", {"x": x}), {"x": x}, **EXACT)


@pytest.mark.parametrize("attrs", [{}, {"lambd": 1.5, "bias": 0.7}, {"lambd": 0.0, "bias": -0.3}])
def test_shrink_float(rng, attrs):
    x = rand(rng, 4, 11, scale=2)
    check(_model("Shrink", {"x": x}, **attrs), {"x": x}, **ELEMENTWISE)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.float64])
def test_shrink_types(rng, dtype):
    x = rng.integers(-6, 7, (3, 7)).astype(dtype)
    check(_model("Shrink", {"x": x}, lambd=1.5, bias=1.0), {"x": x}, **EXACT)


# a one-off bound for Swish, x * sigmoid(alpha * x): onnxruntime's sigmoid is a few ulp off
# the correctly rounded one (as for the transcendental functions in tests/test_math_ops.py)
SWISH = {"atol": 1e-5, "rtol": 1e-5}


@pytest.mark.parametrize("alpha", [1.0, 0.35, -2.0])
def test_swish(rng, alpha):
    x = rand(rng, 3, 17, 5, scale=4)
    check(_model("Swish", {"x": x}, opset=24, alpha=alpha), {"x": x}, **SWISH)


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(rng, batch_axis, time_axis):
    shape = [6, 4, 3]
    shape[batch_axis], shape[time_axis] = 5, 7
    x = rand(rng, *shape)
    lens = np.array([7, 1, 0, 4, 3], np.int64)
    m = _model("ReverseSequence", {"x": x, "lens": lens}, batch_axis=batch_axis, time_axis=time_axis)
    check(m, {"x": x, "lens": lens}, **EXACT)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_constant_condition(rng, axis):
    x = rand(rng, 5, 6, 3)
    n = x.size if axis is None else x.shape[axis]
    cond = rng.random(n - 1) > 0.4  # shorter than the axis: the rest counts as false
    attrs = {} if axis is None else {"axis": axis}
    check(_model("Compress", {"x": x}, inits={"c": cond}, **attrs), {"x": x}, **EXACT)


def test_compress_condition_input(rng):
    x = rng.integers(-9, 9, (4, 7)).astype(np.int32)
    cond = np.array([1, 0, 0, 1, 1, 0, 1], bool)
    check(_model("Compress", {"x": x, "c": cond}, axis=1), {"x": x, "c": cond}, **EXACT)


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique(rng, sorted_, axis):
    x = rng.integers(0, 3, (6, 4)).astype(np.float32)
    x[3] = x[1]
    x[:, 2] = x[:, 0]
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    outs = ("y", "indices", "inverse", "counts")
    check(_model("Unique", {"x": x}, outs, opset=11, **attrs), {"x": x}, **EXACT)


def test_unique_int_first_output_only(rng):
    x = rng.integers(-5, 5, 37).astype(np.int64)
    check(_model("Unique", {"x": x}, ("y",), opset=11, sorted=0), {"x": x}, **EXACT)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 5, 5), (1, 1)])
def test_det(rng, shape):
    x = rand(rng, *shape)
    check(_model("Det", {"x": x}, opset=11), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("axis", [-1, 1, 0, -2])
def test_rms_normalization(rng, axis):
    x = rand(rng, 3, 5, 7)
    scale = rand(rng, *x.shape[axis:])
    m = _model("RMSNormalization", {"x": x}, inits={"s": scale}, opset=23, axis=axis, epsilon=1e-3)
    check(m, {"x": x}, **ACCUMULATE)


def test_rms_normalization_float16(rng):
    x = rand(rng, 4, 33, dtype=np.float16)
    s = rand(rng, 33, dtype=np.float16)
    check(_model("RMSNormalization", {"x": x, "s": s}, opset=23), {"x": x, "s": s}, **HALF)


@pytest.mark.parametrize(
    "shape,target,axes",
    [((5, 8, 3), (3, 11, 3), None), ((7, 6), (4,), [0]), ((4, 9, 2), (6, 4), [-2, 0]), ((3, 4), (3, 4), None)],
)
def test_center_crop_pad(rng, shape, target, axes):
    x = rand(rng, *shape)
    attrs = {} if axes is None else {"axes": axes}
    m = _model("CenterCropPad", {"x": x}, inits={"shape": np.array(target, np.int64)}, **attrs)
    check(m, {"x": x}, **EXACT)

"""MaxPool (with Indices), AveragePool and GlobalAveragePool against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand, run_ort

WINDOWS = [
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "strides": [2, 3]},
    {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [3, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "dilations": [2, 1], "pads": [2, 1, 2, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"},
]


def pool_model(rng, op, xs, outs=("y",), **attrs):
    x = rand(rng, *xs)
    return make_model([helper.make_node(op, ["x"], list(outs), **attrs)], {"x": x}, list(outs), opset=19), x


@pytest.mark.parametrize("attrs", WINDOWS)
def test_max_pool(rng, attrs):
    m, x = pool_model(rng, "MaxPool", (2, 3, 13, 11), **attrs)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("attrs", WINDOWS[:5])
@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(rng, attrs, storage_order):
    m, x = pool_model(rng, "MaxPool", (2, 3, 13, 11), ("y", "i"), storage_order=storage_order, **attrs)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("attrs", [a for a in WINDOWS if "dilations" not in a])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(rng, attrs, count_include_pad):
    m, x = pool_model(rng, "AveragePool", (2, 3, 13, 11), count_include_pad=count_include_pad, **attrs)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3], "strides": [2], "pads": [1, 2], "ceil_mode": 1},
        {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]},
    ],
)
def test_pool_1d_3d(rng, op, attrs):
    xs = (2, 3, 13) if len(attrs["kernel_shape"]) == 1 else (1, 2, 5, 7, 9)
    m, x = pool_model(rng, op, xs, **attrs)
    check(m, {"x": x}, **ACCUMULATE)


def test_max_pool_large_parallel(rng):
    m, x = pool_model(rng, "MaxPool", (1, 64, 57, 57), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("xs", [(2, 5, 13, 7), (1, 3, 127), (1, 2, 3, 5, 7)])
def test_global_average_pool(rng, xs):
    m, x = pool_model(rng, "GlobalAveragePool", xs)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "ceil_mode": 1}),
        ("GlobalAveragePool", {}),
    ],
)
def test_pool_second_run_new_shape(rng, op, attrs):
    x1 = rand(rng, 1, 3, 13, 11)
    m = make_model(
        [helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x1}, ["y"], opset=19, input_shapes={"x": ["N", "C", "H", "W"]}
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 5, 8, 17)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)

"""Pad (constant/reflect/edge/wrap, negative pads, axes, constant_value) against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import EXACT, check, make_model, rand, run_ort

MODES = ["constant", "reflect", "edge", "wrap"]


def pad_model(rng, xs, pads, mode, value=None, axes=None, dtype=np.float32, opset=19):
    x = rand(rng, *xs, dtype=dtype)
    inits, ins = {"pads": np.array(pads, np.int64)}, ["x", "pads", "", ""]
    if value is not None:
        inits["v"], ins[2] = np.array(value, dtype), "v"
    if axes is not None:
        inits["axes"], ins[3] = np.array(axes, np.int64), "axes"
    while ins[-1] == "":
        ins.pop()
    return make_model([helper.make_node("Pad", ins, ["y"], mode=mode)], {"x": x}, ["y"], inits, opset=opset), x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "xs,pads",
    [
        ((2, 3, 7, 13), [0, 0, 1, 2, 0, 1, 3, 1]),
        ((2, 3, 7, 13), [0, 0, -1, 2, 0, 0, 3, -2]),
        ((2, 3, 7, 13), [1, 0, 0, 4, 0, 2, 5, 0]),
        ((127,), [5, 6]),
    ],
)
def test_pad(rng, mode, xs, pads):
    m, x = pad_model(rng, xs, pads, mode)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("mode", MODES)
def test_pad_axes(rng, mode):
    m, x = pad_model(rng, (3, 7, 13), [1, 3, 2, 3], mode, axes=[0, -1])
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype,value", [(np.float32, 2.5), (np.int64, 7), (np.int32, -3)])
def test_pad_constant_value(rng, dtype, value):
    m, x = pad_model(rng, (2, 3, 5), [1, 0, 2, 0, 3, 1], "constant", value=value, dtype=dtype)
    check(m, {"x": x}, **EXACT)


def test_pad_opset10_attributes(rng):
    x = rand(rng, 2, 3, 5)
    m = make_model(
        [helper.make_node("Pad", ["x"], ["y"], mode="constant", pads=[0, 1, 2, 0, 3, 1], value=1.5)], {"x": x}, ["y"], opset=10
    )
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("mode", MODES)
def test_pad_second_run_new_shape(rng, mode):
    x1 = rand(rng, 1, 3, 7, 13)
    m = make_model(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)],
        {"x": x1},
        ["y"],
        {"pads": np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)},
        opset=19,
        input_shapes={"x": ["N", "C", "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 2, 5, 9)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_array_equal(session.run({"x": x})["y"], expected)

"""Resize (nearest/linear/cubic, every coordinate mode, roi, axes) against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand, run_ort

COORD = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize_model(rng, xs, scales=None, sizes=None, roi=None, opset=19, **attrs):
    x = rand(rng, *xs)
    inits, ins = {}, ["x", "", "", ""]
    for i, (name, v, dt) in enumerate([("roi", roi, np.float32), ("scales", scales, np.float32), ("sizes", sizes, np.int64)]):
        if v is not None:
            inits[name], ins[i + 1] = np.array(v, dt), name
    while ins[-1] == "":
        ins.pop()
    return make_model([helper.make_node("Resize", ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=opset), x


@pytest.mark.parametrize("ctm", COORD)
@pytest.mark.parametrize("nearest_mode", NEAREST)
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2.5, 0.7], None), (None, [1, 3, 13, 5]), ([1, 1, 3, 2], None)])
def test_resize_nearest(rng, ctm, nearest_mode, scales, sizes):
    m, x = resize_model(
        rng, (1, 3, 7, 13), scales, sizes, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=ctm
    )
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize(
    "xs,scales", [((1, 16, 13, 7), [1, 1, 2, 2]), ((2, 3, 5, 6), [1, 2, 3, 1]), ((1, 3, 7, 5), [1, 1, 1, 2])]
)
def test_resize_nearest_integer_upsample(rng, xs, scales):
    """The PP-OCR det form (asymmetric, floor, integer scales), taken by the broadcast-copy path."""
    m, x = resize_model(rng, xs, scales, mode="nearest", nearest_mode="floor", coordinate_transformation_mode="asymmetric")
    check(m, {"x": x}, **EXACT)


def test_upsample_opset9(rng):
    x = rand(rng, 1, 3, 5, 7)
    m = make_model(
        [helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")],
        {"x": x},
        ["y"],
        {"s": np.array([1, 1, 2, 3], np.float32)},
        opset=9,
    )
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", COORD)
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2.5, 0.6], None), (None, [1, 3, 1, 5]), (None, [1, 3, 15, 27])])
def test_resize_interpolate(rng, mode, ctm, scales, sizes):
    m, x = resize_model(rng, (1, 3, 7, 13), scales, sizes, mode=mode, coordinate_transformation_mode=ctm)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(rng, mode):
    m, x = resize_model(
        rng,
        (1, 3, 7, 13),
        sizes=[1, 3, 9, 11],
        roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2],
        mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-3.0,
    )
    check(m, {"x": x}, **(EXACT if mode == "nearest" else ACCUMULATE))


@pytest.mark.parametrize("a,exclude", [(-0.5, 0), (-0.75, 1), (-0.5, 1)])
def test_resize_cubic_options(rng, a, exclude):
    m, x = resize_model(rng, (1, 3, 7, 13), [1, 1, 1.7, 0.6], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_resize_axes_and_aspect(rng, policy):
    m, x = resize_model(rng, (1, 3, 8, 12), sizes=[9, 9], axes=[2, 3], keep_aspect_ratio_policy=policy, mode="linear")
    check(m, {"x": x}, **ACCUMULATE)


def test_resize_opset11_linear(rng):
    x = rand(rng, 1, 2, 5, 7)
    m = make_model(
        [helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
        {"x": x},
        ["y"],
        {"roi": np.array([], np.float32), "s": np.array([1, 1, 2, 2], np.float32)},
        opset=11,
    )
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_second_run_new_shape(rng, mode):
    x1 = rand(rng, 1, 3, 7, 13)
    m = make_model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode)],
        {"x": x1},
        ["y"],
        {"s": np.array([1, 1, 2, 2], np.float32)},
        opset=19,
        input_shapes={"x": ["N", "C", "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 4, 5, 9)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)

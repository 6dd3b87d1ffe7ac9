"""Inputs whose contents decide shapes (a Reshape's target shape, Resize's scales, fed as inputs)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import EXACT, check, make_model, rand


def _reshape_model(rng):
    x, shape = rand(rng, 2, 3, 4), np.array([4, 6], np.int64)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"])]
    return make_model(nodes, {"x": x, "shape": shape}, ["y"], input_shapes={"shape": ["rank"]}), x


def test_reshape_target_fed_as_input(rng):
    model, x = _reshape_model(rng)
    session = mnnpy.Interpreter(convert(model)).create_session()
    assert session.value_inputs == ["shape"]
    for target in ([4, 6], [2, 12], [-1, 3, 2], [4, 6]):
        y = session.run({"x": x, "shape": np.array(target, np.int64)})["y"]
        np.testing.assert_array_equal(y, np.maximum(x, 0).reshape(target))
    assert session.resize_count == 3  # [4, 6] again reuses its plan


def test_value_input_mismatch_is_a_shape_error(rng):
    model, x = _reshape_model(rng)
    session = mnnpy.Interpreter(convert(model)).create_session()
    with pytest.raises(mnnpy.ShapeError, match="Reshape"):
        session.run({"x": x, "shape": np.array([5, 5], np.int64)})


def test_resize_scales_fed_as_input(rng):
    x = rand(rng, 1, 2, 3, 5)
    scales = np.array([1, 1, 2, 1.5], np.float32)
    model = make_model(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")], {"x": x, "scales": scales}, ["y"]
    )
    check(model, {"x": x, "scales": scales}, **EXACT)


def test_large_data_dependent_input_runs_in_segments(rng):
    """A value input too large to key plans by: the ops before the data-dependent one run,
    then the rest is resized with the values computed (a second segment)."""
    x = rand(rng, 300, 300)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["y"], perm=[1, 0]),
    ]
    model = make_model(nodes, {"x": x}, ["y", "r"])
    session = mnnpy.Interpreter(convert(model)).create_session()
    for k in range(2):
        xk = rand(rng, 300, 300) - k
        out = session.run({"x": xk})
        np.testing.assert_array_equal(out["y"], np.array(np.nonzero(np.maximum(xk, 0))).T)
        np.testing.assert_array_equal(out["r"], np.maximum(xk, 0))
        assert session.output_shapes["y"] == out["y"].shape

"""Edge cases a newcomer's differential testing found (each against onnxruntime or the spec)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
import mnnpy.onnx_backend as backend
from tests.oracle import EXACT, check, make_model


def test_resize_asymmetric_exact_tie_rounds_up():
    """8 * 7/16 = 3.5 exactly: round_prefer_ceil must give 4 (coordinates in float64)."""
    x = np.arange(7, dtype=np.float32).reshape(1, 1, 7, 1)
    node = helper.make_node(
        "Resize", ["x", "", "", "sizes"], ["y"], mode="nearest",
        coordinate_transformation_mode="asymmetric", nearest_mode="round_prefer_ceil",
    )  # fmt: skip
    m = make_model([node], {"x": x}, ["y"], {"sizes": np.array([1, 1, 16, 1], np.int64)}, opset=19)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("op", ["ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_log_reductions_of_integers(op, dtype):
    x = np.array([[1, 2, 3], [4, 5, 9]], dtype)
    check(make_model([helper.make_node(op, ["x"], ["y"], keepdims=0)], {"x": x}, ["y"]), {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_reduce_mean_of_an_empty_axis_is_zero(dtype):
    x = np.zeros((0, 3), dtype)
    m = make_model(
        [helper.make_node("ReduceMean", ["x", "axes"], ["y"])], {"x": x}, ["y"], {"axes": np.array([0], np.int64)}, opset=18
    )
    out = mnnpy.Interpreter(__import__("mnnpy.converter").converter.convert(m)).create_session().run({"x": x})["y"]
    np.testing.assert_array_equal(out, np.zeros((1, 3), dtype))


def test_layer_normalization_statistics_take_the_stash_type():
    x = np.random.default_rng(0).standard_normal((2, 3))
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"])
    m = make_model([node], {"x": x}, ["y", "mean", "inv"], {"s": np.ones(3)})
    _, mean, inv = backend.prepare(m).run([x])
    assert mean.dtype == inv.dtype == np.float32


def test_prepare_takes_models_onnx_checker_rejects_and_refuses_non_models():
    """Like onnxruntime, models whose outputs carry no type still run; garbage is a clear error."""
    x = np.array([-1.0, 2.0], np.float32)
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])  # untyped output
    np.testing.assert_array_equal(backend.prepare(model).run([x])[0], [0.0, 2.0])
    with pytest.raises(mnnpy.ModelFormatError):
        backend.prepare(b"not a model")


def test_resize_antialias_is_reported_unsupported():
    x = np.zeros((1, 1, 4, 4), np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)
    m = make_model([node], {"x": x}, ["y"], {"scales": np.array([1, 1, 0.5, 0.5], np.float32)}, opset=18)
    with pytest.raises(mnnpy.UnsupportedOperatorError, match="antialias"):
        backend.prepare(m)

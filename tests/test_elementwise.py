"""Unary activations and broadcasting binary ops against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ELEMENTWISE, EXACT, check, make_model, rand


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("Relu", {}),
        ("Sigmoid", {}),
        ("Tanh", {}),
        ("HardSwish", {}),
        ("HardSigmoid", {}),
        ("HardSigmoid", {"alpha": 0.1666667, "beta": 0.5}),
        ("LeakyRelu", {"alpha": 0.1}),
        ("Identity", {}),
    ],
)
def test_unary(rng, op, attrs):
    x = rand(rng, 2, 13, 7, 5, scale=4)
    m = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check(m, {"x": x}, **ELEMENTWISE)


def test_sqrt(rng):
    x = np.abs(rand(rng, 3, 127))
    check(make_model([helper.make_node("Sqrt", ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, **ELEMENTWISE)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize(
    "sa,sb", [((2, 3, 5), (2, 3, 5)), ((2, 3, 5), (5,)), ((2, 1, 5), (3, 1)), ((), (4, 1)), ((1, 13, 1, 1), (2, 13, 7, 9))]
)
def test_binary_broadcast(rng, op, sa, sb):
    a, b = rand(rng, *sa), rand(rng, *sb)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
    m = make_model([helper.make_node(op, ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    check(m, {"a": a, "b": b}, **ELEMENTWISE)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_int64(rng, op):
    a = rng.integers(-50, 50, (4, 6)).astype(np.int64)
    b = rng.integers(1, 9, (6,)).astype(np.int64) * rng.choice([-1, 1], 6)
    m = make_model([helper.make_node(op, ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    check(m, {"a": a, "b": b}, **EXACT)


def test_pow(rng):
    a = np.abs(rand(rng, 3, 5)) + 0.1
    b = np.array([2.0], np.float32)
    m = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a}, ["c"], {"b": b})
    check(m, {"a": a}, atol=1e-5, rtol=1e-6)


@pytest.mark.parametrize("opset", [7, 11, 13])
def test_clip(rng, opset):
    x = rand(rng, 4, 9, scale=5)
    if opset < 11:
        m = make_model([helper.make_node("Clip", ["x"], ["y"], min=0.0, max=6.0)], {"x": x}, ["y"], opset=opset)
    else:
        m = make_model(
            [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
            {"x": x},
            ["y"],
            {"lo": np.array(-1.0, np.float32), "hi": np.array(2.5, np.float32)},
            opset=opset,
        )
    check(m, {"x": x}, **EXACT)


def test_clip_no_bounds(rng):
    """Absent bounds are float32's lowest / highest: +-inf clamp to +-FLT_MAX (as in
    onnxruntime), NaN stays NaN; one bound absent likewise."""
    x = rand(rng, 4, 9)
    x.flat[:3] = [np.inf, -np.inf, np.nan]
    out = check(make_model([helper.make_node("Clip", ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, **EXACT)[0]
    big = np.finfo(np.float32).max
    assert out.flat[0] == big and out.flat[1] == -big and np.isnan(out.flat[2])
    lo = {"lo": np.array(-1.0, np.float32)}
    out = check(make_model([helper.make_node("Clip", ["x", "lo"], ["y"])], {"x": x}, ["y"], lo), {"x": x}, **EXACT)[0]
    assert out.flat[0] == big and out.flat[1] == -1.0


@pytest.mark.parametrize("op", ["Add", "Mul", "Div"])
@pytest.mark.parametrize("sb", [(1, 64, 1, 1), (47,), (2, 1, 45, 1), (2, 64, 45, 47), ()])
def test_binary_large_split_over_threads(rng, op, sb):
    """Outputs of 2**18 elements and more are computed in blocks on the backend's pool."""
    a, b = rand(rng, 2, 64, 45, 47), np.asarray(rand(rng, *sb) + 3, np.float32)
    m = make_model([helper.make_node(op, ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    check(m, {"a": a, "b": b}, **ELEMENTWISE)
    check(make_model([helper.make_node(op, ["b", "a"], ["c"])], {"a": a, "b": b}, ["c"]), {"a": a, "b": b}, **ELEMENTWISE)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "HardSwish", "HardSigmoid"])
def test_unary_large_split_over_threads(rng, op):
    x = rand(rng, 1, 96, 61, 59, scale=4)
    check(make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, **ELEMENTWISE)

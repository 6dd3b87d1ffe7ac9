"""Elementwise math, logic and comparison ops against onnxruntime (seeded random data,
odd sizes, attribute edge cases, several dtypes and opsets)."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ELEMENTWISE, EXACT, FLOAT64, HALF, check, make_model, rand

# transcendental functions: onnxruntime's vectorised float32 approximations differ from
# the correctly rounded ones by a few ulps
ULPS = dict(atol=1e-5, rtol=4e-6)


def _unary(op, x, opset=17, **attrs):
    return make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)


def _domain(rng, op, shape, dtype=np.float32):
    """Random inputs inside ``op``'s domain."""
    if op in ("Asin", "Acos", "Atanh"):
        return rng.uniform(-0.99, 0.99, shape).astype(dtype)
    if op == "Acosh":
        return rng.uniform(1.0, 5.0, shape).astype(dtype)
    if op in ("Log",):
        return rng.uniform(0.01, 10.0, shape).astype(dtype)
    if op == "Reciprocal":
        x = rand(rng, *shape, dtype=dtype, scale=3)
        return np.where(np.abs(x) < 0.1, 1, x).astype(dtype)
    if op == "Tan":
        return rng.uniform(-1.4, 1.4, shape).astype(dtype)
    return rand(rng, *shape, dtype=dtype, scale=3)


FLOAT_UNARY = [
    ("Abs", {}),
    ("Neg", {}),
    ("Exp", {}),
    ("Log", {}),
    ("Reciprocal", {}),
    ("Floor", {}),
    ("Ceil", {}),
    ("Sign", {}),
    ("Erf", {}),
    ("Sin", {}),
    ("Cos", {}),
    ("Tan", {}),
    ("Asin", {}),
    ("Acos", {}),
    ("Atan", {}),
    ("Sinh", {}),
    ("Cosh", {}),
    ("Asinh", {}),
    ("Acosh", {}),
    ("Atanh", {}),
    ("Softplus", {}),
    ("Softsign", {}),
    ("Elu", {}),
    ("Elu", {"alpha": 0.3}),
    ("Selu", {}),
    ("Selu", {"alpha": 2.0, "gamma": 0.5}),
    ("Celu", {}),
    ("Celu", {"alpha": 2.5}),
    ("ThresholdedRelu", {}),
    ("ThresholdedRelu", {"alpha": -0.5}),
    ("Mish", {}),
    ("Gelu", {}),
    ("Gelu", {"approximate": "tanh"}),
]


@pytest.mark.parametrize("op,attrs", FLOAT_UNARY)
def test_float_unary(rng, op, attrs):
    x = _domain(rng, op, (2, 13, 7, 5))
    opset = 20 if op == "Gelu" else 18
    check(_unary(op, x, opset, **attrs), {"x": x}, **ULPS)


@pytest.mark.parametrize("op,attrs", [("Erf", {}), ("Gelu", {}), ("Celu", {"alpha": 0.7}), ("Mish", {}), ("Elu", {})])
def test_float_unary_large(rng, op, attrs):
    """Outputs above the parallel threshold are split over the pool (temporaries too)."""
    x = rand(rng, 3, 311, 301, scale=3)
    check(_unary(op, x, 20, **attrs), {"x": x}, **ULPS)


@pytest.mark.parametrize("op,attrs", [("Erf", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}), ("Exp", {}), ("Elu", {})])
def test_float16_unary(rng, op, attrs):
    x = rand(rng, 5, 33, dtype=np.float16, scale=2)
    check(_unary(op, x, 20, **attrs), {"x": x}, **HALF)


@pytest.mark.parametrize("op", ["Exp", "Sin", "Log", "Neg", "Floor"])
def test_float64_unary(rng, op):
    x = rand(rng, 4, 9, dtype=np.float64)
    check(_unary(op, x), {"x": x}, **FLOAT64)


def test_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.7, -0.0, np.inf, np.nan], np.float32)
    check(_unary("Round", x, 11), {"x": x}, **EXACT)


def test_special_values():
    """inf/NaN inputs through the composite formulas (no overflow into NaN)."""
    x = np.array([np.inf, -np.inf, 100.0, -100.0, 0.0, -0.0, 89.0], np.float32)
    for op in ("Softplus", "Elu", "Selu", "Celu", "Softsign"):
        check(_unary(op, x, 18), {"x": x}, **ELEMENTWISE)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_int_unary(rng, op, dtype):
    x = rng.integers(-100, 100, (3, 17)).astype(dtype)
    check(_unary(op, x), {"x": x}, **EXACT)


def test_not(rng):
    x = rng.random((4, 7)) > 0.5
    check(_unary("Not", x), {"x": x}, **EXACT)


def test_isnan_isinf():
    x = np.array([[1.0, np.nan, np.inf, -np.inf, 0.0, -3.5]], np.float32)
    check(_unary("IsNaN", x, 13), {"x": x}, **EXACT)
    for pos in (0, 1):
        for neg in (0, 1):
            check(_unary("IsInf", x, 10, detect_positive=pos, detect_negative=neg), {"x": x}, **EXACT)


def _binary(op, a, b, opset=17, **attrs):
    return make_model([helper.make_node(op, ["a", "b"], ["c"], **attrs)], {"a": a, "b": b}, ["c"], opset=opset)


SHAPES = [((3, 5), (3, 5)), ((2, 3, 5), (5,)), ((2, 1, 7), (3, 1)), ((), (4, 1)), ((1, 13, 1, 1), (2, 13, 7, 9))]


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_logical(rng, op, sa, sb):
    a, b = rng.random(sa) > 0.5, rng.random(sb) > 0.5
    a, b = np.asarray(a), np.asarray(b)
    check(_binary(op, a, b), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("op", ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("sa,sb", SHAPES[1:4])
def test_compare(rng, op, dtype, sa, sb):
    a = rng.integers(-3, 3, sa).astype(dtype)
    b = rng.integers(-3, 3, sb).astype(dtype)
    check(_binary(op, a, b), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("op,opset", [("Equal", 7), ("Greater", 7), ("Less", 9), ("LessOrEqual", 12)])
def test_compare_old_opsets(rng, op, opset):
    """Old forms; Equal-7 is defined on bool and integers only."""
    dtype = np.int32 if op == "Equal" else np.float32
    a, b = rand(rng, 3, 4).round().astype(dtype), rand(rng, 4).round().astype(dtype)
    check(_binary(op, a, b, opset), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
def test_bitshift(rng, direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = rng.integers(0, 200, (3, 11)).astype(dtype)
    b = rng.integers(0, bits, (11,)).astype(dtype)
    check(_binary("BitShift", a, b, 11, direction=direction), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_mod_int(rng, fmod, dtype):
    a = rng.integers(-100, 100, (4, 9)).astype(dtype)
    b = (rng.integers(1, 12, (9,)) * rng.choice([-1, 1], 9)).astype(dtype)
    check(_binary("Mod", a, b, 13, fmod=fmod), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mod_float(rng, dtype):
    """Float Mod: onnxruntime implements ``fmod=1`` (C fmod) only."""
    a, b = rand(rng, 4, 9, dtype=dtype, scale=10), rand(rng, 4, 1, dtype=dtype, scale=3)
    check(_binary("Mod", a, b, 13, fmod=1), {"a": a, "b": b}, **ELEMENTWISE)


@pytest.mark.parametrize("slope_shape", [(1,), (13, 1, 1), (7, 5), (2, 13, 7, 5), ()])
@pytest.mark.parametrize("opset", [7, 16])
def test_prelu(rng, slope_shape, opset):
    x = rand(rng, 2, 13, 7, 5)
    slope = rand(rng, *slope_shape)
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": slope}, opset=opset)
    check(m, {"x": x}, **ELEMENTWISE)


def _variadic(op, arrays, opset=13):
    names = [f"x{i}" for i in range(len(arrays))]
    feeds = dict(zip(names, arrays))
    return make_model([helper.make_node(op, names, ["y"])], feeds, ["y"], opset=opset), feeds


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", [[(3, 5)], [(3, 5), (3, 5)], [(2, 1, 5), (3, 1), ()], [(4,), (3, 4), (2, 1, 4), (1,)]])
def test_variadic(rng, op, shapes):
    m, feeds = _variadic(op, [rand(rng, *s) for s in shapes])
    check(m, feeds, **ELEMENTWISE)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.float64])
def test_max_min_dtypes(rng, op, dtype):
    m, feeds = _variadic(op, [rng.integers(-50, 50, s).astype(dtype) for s in [(3, 7), (7,), (1, 1)]])
    check(m, feeds, **EXACT)


@pytest.mark.parametrize("op", ["Max", "Sum", "Mean"])
def test_variadic_opset8_large(rng, op):
    m, feeds = _variadic(op, [rand(rng, 3, 301, 307), rand(rng, 301, 1), rand(rng, 307)], opset=8)
    check(m, feeds, **ELEMENTWISE)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8])
@pytest.mark.parametrize("sc,sx,sy", [((3, 5), (3, 5), (3, 5)), ((2, 1, 5), (3, 1), ()), ((5,), (2, 3, 5), (1, 5))])
def test_where(rng, dtype, sc, sx, sy):
    c = np.asarray(rng.random(sc) > 0.5)
    x = np.asarray(rng.integers(-9, 9, sx)).astype(dtype)
    y = np.asarray(rng.integers(-9, 9, sy)).astype(dtype)
    m = make_model([helper.make_node("Where", ["c", "x", "y"], ["z"])], {"c": c, "x": x, "y": y}, ["z"], opset=16)
    check(m, {"c": c, "x": x, "y": y}, **EXACT)


def test_where_large(rng):
    c = np.asarray(rng.random((1, 517, 1)) > 0.5)
    x, y = rand(rng, 4, 517, 301), rand(rng, 301)
    m = make_model([helper.make_node("Where", ["c", "x", "y"], ["z"])], {"c": c, "x": x, "y": y}, ["z"], opset=9)
    check(m, {"c": c, "x": x, "y": y}, **EXACT)


@pytest.mark.parametrize(
    "src,dst", [(np.float32, np.float16), (np.float32, np.int32), (np.float64, np.float32), (np.int64, np.float32)]
)
def test_castlike(rng, src, dst):
    x = (rand(rng, 3, 7, dtype=np.float64) * 20).astype(src)
    like = np.zeros((2,), dst)
    m = make_model([helper.make_node("CastLike", ["x", "like"], ["y"])], {"x": x, "like": like}, ["y"], opset=15)
    check(m, {"x": x, "like": like}, **EXACT)

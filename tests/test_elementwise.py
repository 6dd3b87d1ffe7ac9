"""Elementwise ops on every backend: the CPU backend against onnxruntime, each GPU backend
against the CPU (``tests/backend_compare.py``), within ``ELEMENTWISE`` (fp16 storage: ``HALF``;
integers and the CPU's Clip: ``EXACT``; a chain of dependent ops: ``ELEMENTWISE_CHAIN``).
Tests without a ``backend`` parameter run the CPU backend against onnxruntime; the CPU-only
math, logic and comparison ops are in tests/test_math_ops.py.

Every backend: unary activations, binary ops with every broadcast. CPU: int64 arithmetic,
Clip of every opset, large outputs split over threads. GPU (OpenCL, Vulkan; skipped with the
reason where the driver is missing): zeros, infinities and NaN, Clip and its CPU fallback, the
fused Swish, broadcasts up to rank 8, Pow with its special values, constant operands, odd and
empty shapes, a chain that reuses memory, fp16 storage. Integers and bool (the counters and
conditions of control flow), every backend: int32/int64 arithmetic with broadcasting, scalars
and empty tensors (the GPUs over the whole range, wrapping around), Mod, Div, comparisons of
float32/int32/int64, And/Or/Xor/Not, Cast between float32, int32, int64 and bool, a Loop
body's ``i + 1; i < n; and cond`` on the device; GPU: fp16 storage beside them, and the
fallbacks where a device lacks what a dtype needs. The copies at partition borders are in
tests/test_gpu_partitions.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import (
    backend_cases,
    backends,
    check_backend,
    gpu_backends,
)
from tests.oracle import ELEMENTWISE, ELEMENTWISE_CHAIN, EXACT, HALF, check, make_model, rand

SHAPE = (13, 7, 127)


def _binary(op, a, b, inits=None):
    """``(model, feeds)``: ``a op b -> c``; ``b`` a constant where ``inits`` (``{"b": value}``) is given."""
    feeds = {"a": a} if inits else {"a": a, "b": b}
    return make_model([helper.make_node(op, ["a", "b"], ["c"])], feeds, ["c"], inits), feeds


# -- unary ---------------------------------------------------------------------------------

# (op, attrs, input scale)
UNARY = {
    "cpu": [
        ("Relu", {}, 4.0),
        ("Sigmoid", {}, 4.0),
        ("Tanh", {}, 4.0),
        ("HardSwish", {}, 4.0),
        ("HardSigmoid", {}, 4.0),
        ("HardSigmoid", {"alpha": 0.1666667, "beta": 0.5}, 4.0),
        ("LeakyRelu", {"alpha": 0.1}, 4.0),
        ("Identity", {}, 4.0),
    ],
    "opencl": [
        ("Relu", {}, 1.0),
        ("Sigmoid", {}, 4.0),
        ("Tanh", {}, 3.0),
        ("HardSwish", {}, 4.0),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 3.0),
        ("HardSigmoid", {}, 3.0),
        ("LeakyRelu", {"alpha": 0.07}, 1.0),
        ("Sqrt", {}, 1.0),  # negatives give NaN on both
        ("Abs", {}, 1.0),
        ("Neg", {}, 1.0),
        ("Exp", {}, 3.0),
    ],
    "vulkan": [
        ("Relu", {}, 1.0),
        ("Sigmoid", {}, 4.0),
        ("Sigmoid", {}, 60.0),  # saturates on both sides
        ("Tanh", {}, 3.0),
        ("Tanh", {}, 0.05),  # the small-argument series
        ("HardSwish", {}, 4.0),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 3.0),
        ("HardSigmoid", {}, 3.0),
        ("LeakyRelu", {"alpha": 0.07}, 1.0),
        ("LeakyRelu", {}, 1.0),
        ("Sqrt", {}, 1.0),  # negatives give NaN on both
        ("Abs", {}, 1.0),
        ("Neg", {}, 1.0),
        ("Exp", {}, 3.0),
        ("Exp", {}, 40.0),  # up to overflow: exp's argument reduction keeps a few ulp
    ],
}
UNARY_IDS = {
    "cpu": [f"{u[0]}{'-attrs' if u[1] else ''}" for u in UNARY["cpu"]],
    "opencl": [f"{u[0]}{'-attrs' if u[1] else ''}" for u in UNARY["opencl"]],
    "vulkan": [f"{u[0]}-{u[2]}{'-attrs' if u[1] else ''}" for u in UNARY["vulkan"]],
}
UNARY_SHAPE = {"cpu": (2, 13, 7, 5), "opencl": SHAPE, "vulkan": SHAPE}
# the first elements of the unary input (the CPU cases against onnxruntime: none)
SPECIAL = {"cpu": [], "opencl": [0.0, -0.0, np.inf, -np.inf], "vulkan": [0.0, -0.0, np.inf, -np.inf, np.nan]}


@pytest.mark.parametrize("backend,op,attrs,scale", backend_cases(UNARY, UNARY_IDS))
def test_unary(rng, backend, op, attrs, scale):
    x = rand(rng, *UNARY_SHAPE[backend], scale=scale)
    x.flat[: len(SPECIAL[backend])] = SPECIAL[backend]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


@pytest.mark.parametrize("backend", ["cpu", *gpu_backends()])
def test_mish(rng, backend):
    """Mish (opset 18): ``x * tanh(ln(1 + exp(x)))`` over about [-100, 100] (beyond 20 softplus
    is ``x`` on the GPUs) and, on the GPUs, the special values; each backend against its oracle."""
    x = rand(rng, *UNARY_SHAPE[backend], scale=30.0)
    x.flat[: len(SPECIAL[backend])] = SPECIAL[backend]
    model = make_model([helper.make_node("Mish", ["x"], ["y"])], {"x": x}, ["y"], opset=18)
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


def test_sqrt(rng):
    x = np.abs(rand(rng, 3, 127))
    check(make_model([helper.make_node("Sqrt", ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, **ELEMENTWISE)


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "HardSwish", "HardSigmoid"])
def test_unary_large_split_over_threads(rng, op):
    x = rand(rng, 1, 96, 61, 59, scale=4)
    check(make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, **ELEMENTWISE)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("Relu", {}),
        ("Sigmoid", {}),
        ("Tanh", {}),
        ("HardSwish", {}),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("LeakyRelu", {"alpha": 0.1}),
        ("Abs", {}),
        ("Neg", {}),
        ("Exp", {}),
    ],
)
@pytest.mark.parametrize("backend", gpu_backends("vulkan", precision="low"))
def test_unary_fp16(rng, backend, op, attrs):
    """fp16 storage (the shaders' ``_f16`` twins): within HALF of the CPU's fp32."""
    x = rand(rng, 2, 3, 7, 5)
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check_backend(model, {"x": x}, HALF, backend, precision="low")


@pytest.mark.parametrize("backend", gpu_backends())
def test_swish(rng, backend):
    x = rand(rng, *SHAPE, scale=4)
    model = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])], {"x": x}, ["y"])
    s = check_backend(model, {"x": x}, ELEMENTWISE, backend)
    assert "Swish" in s.partitions()  # the converter fused x*sigmoid(x); the backend runs the fused op


@pytest.mark.parametrize("backend", gpu_backends())
def test_swish_far_negative(rng, backend):
    """x * sigmoid(x) for x down to -1e30: sigmoid stays relative-accurate far below 0 (a
    ``0.5 * (1 + tanh(x / 2))`` sigmoid bottoms out at 3e-8, which x then multiplies: OpenCL
    gave -3e-2 at x = -1e6)."""
    x = -np.logspace(0, 30, 61).astype(np.float32)
    model = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])], {"x": x}, ["y"])
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


# -- Clip ----------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [7, 11, 13])
def test_clip_opsets(rng, opset):
    """Bounds as attributes (opset < 11) and as inputs."""
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


@pytest.mark.parametrize("bounds", [(-0.5, 0.75), (-0.5, None), (None, 0.75), (None, None), (1.0, -1.0)])
@pytest.mark.parametrize("backend", gpu_backends())
def test_clip(rng, backend, bounds):
    x = rand(rng, *SHAPE)
    x.flat[0] = np.nan
    names, inits = ["x"], {}
    for name, v in zip(("lo", "hi"), bounds):
        names.append("" if v is None else name)
        if v is not None:
            inits[name] = np.array(v, np.float32)
    model = make_model([helper.make_node("Clip", names, ["y"])], {"x": x}, ["y"], inits)
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_clip_bounds_at_run_time_fall_back(rng, backend):
    x, lo = rand(rng, 5, 7), np.array(-0.1, np.float32)
    model = make_model([helper.make_node("Clip", ["x", "lo"], ["y"])], {"x": x, "lo": lo}, ["y"])
    s = check_backend(model, {"x": x, "lo": lo}, ELEMENTWISE, backend, on_device=False)
    assert "Clip min/max computed at run time" in s.partitions()


# -- binary --------------------------------------------------------------------------------

BINARY_SHAPES = [
    (SHAPE, SHAPE),  # same shape: the plain kernel, no index arithmetic
    ((13, 1, 127), (7, 1)),  # both broadcast
    (SHAPE, ()),  # scalar
    ((1,), SHAPE),
    ((127,), SHAPE),
    ((3, 1, 5, 1, 7, 2), (1, 4, 1, 6, 1, 2)),  # rank 6, alternating
    ((2, 3, 1, 5, 1, 7), (4, 1, 1, 1)),
    ((2, 1, 3, 1, 2, 1, 3, 1), (1, 2, 1, 3, 1, 2, 1, 3)),  # rank 8, nothing merges
    ((1,), (1,)),
    ((5, 1), (1, 1)),
]
CPU_BINARY_SHAPES = [((2, 3, 5), (2, 3, 5)), ((2, 3, 5), (5,)), ((2, 1, 5), (3, 1)), ((), (4, 1)), ((1, 13, 1, 1), (2, 13, 7, 9))]
GPU_OPS = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
# (op, A shape, B shape)
BINARY = {
    "cpu": [(op, sa, sb) for sa, sb in CPU_BINARY_SHAPES for op in ["Add", "Sub", "Mul", "Div"]],
    "opencl": [(op, sa, sb) for sa, sb in BINARY_SHAPES[:7] for op in GPU_OPS],
    "vulkan": [(op, sa, sb) for sa, sb in BINARY_SHAPES for op in GPU_OPS],
}


@pytest.mark.parametrize("backend,op,sa,sb", backend_cases(BINARY, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}"))
def test_binary(rng, backend, op, sa, sb):
    """Broadcasting binary ops (Max/Min with NaN on either side)."""
    a, b = rand(rng, *sa), rand(rng, *sb)
    if op == "Div" and backend == "cpu":  # as the onnxruntime cases were written: divisors away from 0
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
    if op in ("Max", "Min") and a.size > 2 and b.size > 2:
        a.flat[1], b.flat[2] = np.nan, np.nan
    check_backend(*_binary(op, a, b), ELEMENTWISE, backend)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_int64(rng, op):
    a = rng.integers(-50, 50, (4, 6)).astype(np.int64)
    b = rng.integers(1, 9, (6,)).astype(np.int64) * rng.choice([-1, 1], 6)
    check(*_binary(op, a, b), **EXACT)


@pytest.mark.parametrize("op", ["Add", "Mul", "Div"])
@pytest.mark.parametrize("sb", [(1, 64, 1, 1), (47,), (2, 1, 45, 1), (2, 64, 45, 47), ()])
def test_binary_large_split_over_threads(rng, op, sb):
    """Outputs of 2**18 elements and more are computed in blocks on the backend's pool."""
    a, b = rand(rng, 2, 64, 45, 47), np.asarray(rand(rng, *sb) + 3, np.float32)
    m = make_model([helper.make_node(op, ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    check(m, {"a": a, "b": b}, **ELEMENTWISE)
    check(make_model([helper.make_node(op, ["b", "a"], ["c"])], {"a": a, "b": b}, ["c"]), {"a": a, "b": b}, **ELEMENTWISE)


@pytest.mark.parametrize("backend", gpu_backends())
def test_binary_with_constant_operand(rng, backend):
    x, w = rand(rng, 2, 5, 9), rand(rng, 5, 1)
    model = make_model([helper.make_node("Mul", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": w})
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


@pytest.mark.parametrize("op", GPU_OPS)
@pytest.mark.parametrize("backend", gpu_backends("vulkan", precision="low"))
def test_binary_fp16(rng, backend, op):
    """fp16 storage: broadcasting between two fp16 activations, then a float32 constant operand
    beside an fp16 activation."""
    a, b = rand(rng, 2, 3, 5, 7), rand(rng, 3, 1, 7)
    b = b + np.sign(b) * 0.5 if op == "Div" else b  # away from 0
    check_backend(*_binary(op, a, b), HALF, backend, precision="low")
    k = (rand(rng, 7) + 2.0).astype(np.float32)
    check_backend(*_binary(op, a, None, {"b": k}), HALF, backend, precision="low")


# -- Pow -----------------------------------------------------------------------------------

# a one-off bound for onnxruntime's pow: rtol 1e-6 (about 8 ulp), a little above ELEMENTWISE's 5 ulp
POW_SQUARE = {"atol": 1e-5, "rtol": 1e-6}


def test_pow_square(rng):
    """A constant exponent of 2 against onnxruntime (CPU)."""
    a = np.abs(rand(rng, 3, 5)) + 0.1
    b = np.array([2.0], np.float32)
    m = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a}, ["c"], {"b": b})
    check(m, {"a": a}, **POW_SQUARE)


@pytest.mark.parametrize("shapes", BINARY_SHAPES[:3], ids=[f"{a}x{b}" for a, b in BINARY_SHAPES[:3]])
@pytest.mark.parametrize("backend", gpu_backends())
def test_pow(rng, backend, shapes):
    a = np.abs(rand(rng, *shapes[0], scale=2)) + np.float32(0.05)
    b = rand(rng, *shapes[1], scale=2)
    check_backend(*_binary("Pow", a, b), ELEMENTWISE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_large_results(rng, backend):
    """Results up to 1e38: 2^(y log2 x) with the exponent carried in two parts."""
    a = np.abs(rand(rng, 4097, scale=40)) + np.float32(1)
    b = rand(rng, 4097, scale=8)
    check_backend(*_binary("Pow", a, b), ELEMENTWISE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_special_values(backend):
    """C99 pow: negative bases with integer exponents, zeros, infinities, NaN."""
    vals = np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf, -np.inf, np.nan], np.float32)
    exps = np.array([-3.0, -2.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, -np.inf, np.nan], np.float32)
    check_backend(*_binary("Pow", vals[:, None], exps[None, :]), ELEMENTWISE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_negative_base_integer_exponent(rng, backend):
    a = rand(rng, 7, 13, scale=2)
    b = rng.integers(-3, 4, (13,)).astype(np.float32)
    check_backend(*_binary("Pow", a, b), ELEMENTWISE, backend)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_integer_constant_exponent(backend, dtype):
    """A float32 base with an integer constant exponent (ONNX's Pow T1) falls back to the CPU:
    the kernels read the exponent as float32 (they gave 1.0 for every element before)."""
    a = np.array([1.0, 2.0, 3.0, -1.5], np.float32)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a}, ["c"], {"b": np.array([4, 5, 6, 3], dtype)})
    session = check_backend(model, {"a": a}, ELEMENTWISE, backend, on_device=False)
    assert "Pow of float32 and " + np.dtype(dtype).name in session.partitions()


# -- shapes, chains, partition borders ------------------------------------------------------


@pytest.mark.parametrize("backend", gpu_backends())
def test_empty_tensor(rng, backend):
    x = np.zeros((3, 0, 5), np.float32)
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])], {"x": x}, ["y"])
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


ODD_SHAPES = [(1,), (63,), (64,), (65,), (3, 0, 5), (0,), (1, 1, 1, 1), (300_007,)]


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
@pytest.mark.parametrize("backend", gpu_backends())
def test_odd_and_empty_shapes(rng, backend, shape):
    """Sizes around the work-group size, empty tensors (no dispatch, no staging slot), a long vector."""
    x = rand(rng, *shape)
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])], {"x": x}, ["y"])
    check_backend(model, {"x": x}, ELEMENTWISE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_chain_with_memory_reuse(rng, backend):
    """A chain long enough that the planner reuses arena ranges: the ordering between
    dependent launches (read-after-write and write-after-read) keeps the result exact."""
    x = rand(rng, 4, 33, 17)
    nodes, prev = [], "x"
    for k in range(12):
        op = ["Neg", "Abs", "Sqrt", "Exp", "Tanh", "Relu"][k % 6]
        nodes.append(helper.make_node(op, [prev], [f"t{k}"]))
        nodes.append(helper.make_node("Add", [f"t{k}", prev], [f"s{k}"]))
        prev = f"s{k}"
    check_backend(make_model(nodes, {"x": x}, [prev]), {"x": x}, ELEMENTWISE_CHAIN, backend)


# -- integers and bool: arithmetic, comparisons, logic, Cast (the counters and conditions) --------

INTS = [np.int32, np.int64]
INT_IDS = ["int32", "int64"]
# (A shape, B shape): same shape, broadcast both ways, rank-0 scalars, an empty tensor
INT_SHAPES = [((13, 7, 5), (13, 7, 5)), ((13, 1, 5), (7, 1)), ((), (4, 3)), ((), ()), ((3, 0, 2), (1, 2))]
INT_SHAPE_IDS = [f"{a}x{b}" for a, b in INT_SHAPES]


def _ints(rng, shape, dtype, wide: bool) -> np.ndarray:
    """Seeded integers of ``dtype``: small ones of both signs, or (``wide``) over the whole range
    of the dtype, so that sums and products wrap around (int64: far beyond 2**31)."""
    info = np.iinfo(dtype)
    lo, hi = (info.min, info.max) if wide else (-1000, 1000)
    return rng.integers(lo, hi, shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("sa,sb", INT_SHAPES, ids=INT_SHAPE_IDS)
@pytest.mark.parametrize("dtype", INTS, ids=INT_IDS)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min"])
@pytest.mark.parametrize("backend", backends())
def test_integer_arithmetic(rng, backend, op, dtype, sa, sb):
    """int32/int64 with broadcasting; the GPUs over the whole range, where + - * wrap around as
    on the CPU (the CPU against onnxruntime on small values)."""
    wide = backend != "cpu"
    check_backend(*_binary(op, _ints(rng, sa, dtype, wide), _ints(rng, sb, dtype, wide)), EXACT, backend)


@pytest.mark.parametrize("dtype", INTS, ids=INT_IDS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_integer_wrap_around(backend, dtype):
    """Two's complement at the ends of the range: MAX + 1 = MIN, MIN - 1 = MAX, MAX * 2 = -2,
    MIN * -1 = MIN, as numpy (the CPU backend) computes."""
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max, info.min, -1, 0], dtype)
    b = np.array([1, -1, 2, -1, info.min, info.max], dtype)
    for op in ("Add", "Sub", "Mul"):
        check_backend(*_binary(op, a, b), EXACT, backend)


# Mod: the dividend over its range, divisors of both signs, zero (0, as the CPU backend gives;
# not asked of onnxruntime) and -1 with MIN (0: no trap)
@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", INTS, ids=INT_IDS)
@pytest.mark.parametrize("backend", backends())
def test_integer_mod(rng, backend, dtype, fmod):
    a = _ints(rng, (6, 31), dtype, backend != "cpu")
    b = rng.integers(-9, 10, (31,)).astype(dtype)
    if backend == "cpu":
        b[b == 0] = 7
    else:
        a[0, :2], b[:2] = np.iinfo(dtype).min, [-1, 0]
    model = make_model([helper.make_node("Mod", ["a", "b"], ["c"], fmod=fmod)], {"a": a, "b": b}, ["c"])
    check_backend(model, {"a": a, "b": b}, EXACT, backend)


@pytest.mark.parametrize("dtype", INTS, ids=INT_IDS)
@pytest.mark.parametrize("backend", backends())
def test_integer_div(rng, backend, dtype):
    """Truncation toward zero (onnxruntime's C division) by constant divisors of both signs,
    exact beyond 2**53 for int64; on the GPUs also MIN / -1 (wraps to MIN)."""
    a = _ints(rng, (5, 8), dtype, True)
    b = np.array([1, -1, 2, -2, 3, -7, 1000, -(2**30)], dtype)
    if backend == "cpu":
        a[a == np.iinfo(dtype).min] = 0  # onnxruntime traps on MIN / -1
    else:
        a[0, 1] = np.iinfo(dtype).min
    a[1, :4] = [7, -7, 7, -7]
    check_backend(*_binary("Div", a, None, {"b": b}), EXACT, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_integer_div_by_run_time_or_zero_divisor_falls_back(rng, backend):
    """A divisor computed at run time, or a constant one with a zero (an ``InputError`` on the
    CPU, which a kernel cannot raise), runs on the CPU, saying why."""
    a, b = _ints(rng, (4, 3), np.int32, False), np.array([3, -2, 5], np.int32)
    s = check_backend(*_binary("Div", a, b), EXACT, backend, on_device=False)
    assert "int32 Div by a divisor computed at run time" in s.partitions()
    model = make_model([helper.make_node("Div", ["a", "b"], ["c"])], {"a": a}, ["c"], {"b": np.array([3, 0, 5], np.int32)})
    desc = mnnpy.Interpreter(convert(model)).create_session(backend=[backend, "cpu"]).partitions()
    assert "int32 Div by zero" in desc and "on cpu" in desc


COMPARISONS = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]


def _compared(rng, dtype, sa, sb):
    """``(a, b)`` of ``dtype`` with many equal pairs: floats with NaN, infinities and signed zeros;
    int64 values near 2**62 that differ by 1 (equal once rounded to float); bool at random."""
    if dtype == np.bool_:
        return rng.integers(0, 2, sa).astype(bool), rng.integers(0, 2, sb).astype(bool)
    if dtype == np.float32:
        pool = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 3.25], np.float32)
        return rng.choice(pool, sa).astype(np.float32), rng.choice(pool, sb).astype(np.float32)
    base = 2**62 if dtype == np.int64 else 2**30
    return np.asarray(base + rng.integers(-2, 3, sa), dtype), np.asarray(base + rng.integers(-2, 3, sb), dtype)


@pytest.mark.parametrize("sa,sb", INT_SHAPES[:4], ids=INT_SHAPE_IDS[:4])
@pytest.mark.parametrize("dtype", [np.float32, *INTS], ids=["float32", *INT_IDS])
@pytest.mark.parametrize("op", COMPARISONS)
@pytest.mark.parametrize("backend", backends())
def test_comparison(rng, backend, op, dtype, sa, sb):
    """bool outputs of float32 (NaN compares unequal and unordered), int32 and int64 (exact:
    neighbours of 2**62) inputs, broadcast."""
    check_backend(*_binary(op, *_compared(rng, dtype, sa, sb)), EXACT, backend)


@pytest.mark.parametrize("sa,sb", INT_SHAPES, ids=INT_SHAPE_IDS)
@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
@pytest.mark.parametrize("backend", backends())
def test_logic(rng, backend, op, sa, sb):
    check_backend(*_binary(op, *_compared(rng, np.bool_, sa, sb)), EXACT, backend)


@pytest.mark.parametrize("shape", [(13, 7, 5), (), (0, 4)], ids=str)
@pytest.mark.parametrize("backend", backends())
def test_not(rng, backend, shape):
    x = rng.integers(0, 2, shape).astype(bool)
    check_backend(make_model([helper.make_node("Not", ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, EXACT, backend)


CAST_DTYPES = {np.float32: 1, np.int32: 6, np.int64: 7, np.bool_: 9}  # numpy dtype -> ONNX TensorProto type


def _castable(rng, src, dst, on_cpu: bool) -> np.ndarray:
    """Values of ``src`` whose Cast to ``dst`` is defined: floats with fractions of both signs
    (truncated toward zero), zeros, NaN and infinities only toward float or bool; int64 far
    beyond 2**31 (float32 rounds to nearest; int32 keeps the low 32 bits) but within what
    onnxruntime casts alike (on the CPU)."""
    if src == np.bool_:
        return rng.integers(0, 2, (9, 13)).astype(bool)
    if src == np.float32:
        x = (rng.standard_normal((9, 13)) * 1000).astype(np.float32)
        x.flat[:3] = [0.0, -0.0, -0.75]
        if dst in (np.float32, np.bool_):
            x.flat[3:6] = [np.nan, np.inf, -np.inf]
        return x
    x = _ints(rng, (9, 13), src, not on_cpu)
    x.flat[:4] = [0, 1, -1, 2**31 - 1]
    if src == np.int64:
        x.flat[4:8] = [2**40 + 3, -(2**40) - 3, 2**53 + 1, 2**31]
    return x


@pytest.mark.parametrize("dst", CAST_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("src", CAST_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("backend", backends())
def test_cast(rng, backend, src, dst):
    """Cast between float32, int32, int64 and bool, each way."""
    x = _castable(rng, src, dst, backend == "cpu")
    model = make_model([helper.make_node("Cast", ["x"], ["y"], to=CAST_DTYPES[dst])], {"x": x}, ["y"])
    check_backend(model, {"x": x}, EXACT, backend)


def loop_body_model(dtype=np.int64):
    """``(model, feeds)`` of a Loop body's counter and condition: ``i1 = i + 1``, ``cond_out = (i1
    < n) and cond``, scalars of ``dtype`` and bool, with a float32 state ``s1 = s * float(i1)``."""
    feeds = {"i": np.array(2, dtype), "n": np.array(10, dtype), "cond": np.array(True), "s": np.full((3,), 0.5, np.float32)}
    nodes = [
        helper.make_node("Add", ["i", "one"], ["i1"]),
        helper.make_node("Less", ["i1", "n"], ["lt"]),
        helper.make_node("And", ["lt", "cond"], ["cond_out"]),
        helper.make_node("Cast", ["i1"], ["f"], to=1),
        helper.make_node("Mul", ["s", "f"], ["s1"]),
    ]
    return make_model(nodes, feeds, ["i1", "cond_out", "s1"], {"one": np.array(1, dtype)}), feeds


@pytest.mark.parametrize("dtype", INTS, ids=INT_IDS)
@pytest.mark.parametrize("backend", backends())
def test_loop_body_counter_and_condition_run_on_the_device(backend, dtype):
    """``i + 1; i < n; and cond`` with a float state: every op on the backend (one partition,
    no CPU partition on a GPU), at the start, the middle and the end of the loop."""
    model, feeds = loop_body_model(dtype)
    s = check_backend(model, feeds, EXACT, backend)
    for i, cond in [(0, True), (9, True), (4, False)]:
        feeds = {**feeds, "i": np.array(i, dtype), "cond": np.array(cond)}
        out = s.run(feeds)
        assert out["i1"] == i + 1 and out["i1"].dtype == dtype and out["cond_out"] == (i + 1 < 10 and cond)


@pytest.mark.parametrize("backend", gpu_backends(precision="low"))
def test_integers_and_bool_with_fp16_storage(rng, backend):
    """fp16 storage is for float32 tensors only: int32, int64 and bool tensors are stored and
    cross the partition borders as themselves; comparisons read fp16 activations, Cast writes
    them. Values exact in fp16, so the results are exact."""
    x, y = (rng.integers(-64, 64, (5, 7)) / 4).astype(np.float32), (rng.integers(-64, 64, (7,)) / 4).astype(np.float32)
    k = rng.integers(-(2**40), 2**40, (5, 7), dtype=np.int64)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("LessOrEqual", ["r", "y"], ["le"]),
        helper.make_node("Not", ["le"], ["nle"]),
        helper.make_node("Cast", ["r"], ["ri"], to=7),
        helper.make_node("Add", ["ri", "k"], ["sum"]),
        helper.make_node("Cast", ["le"], ["lf"], to=1),
        helper.make_node("Add", ["lf", "r"], ["z"]),
        helper.make_node("Greater", ["r", "c"], ["gt"]),  # a float32 constant beside an fp16 activation
    ]
    model = make_model(nodes, {"x": x, "y": y, "k": k}, ["nle", "sum", "z", "gt"], {"c": y + np.float32(0.125)})
    check_backend(model, {"x": x, "y": y, "k": k}, EXACT, backend, precision="low")


@pytest.mark.parametrize(
    "feature,dtype,reason",
    [
        ("int64", np.int64, "has no shaderInt64"),
        ("storage8", np.bool_, "has no storageBuffer8BitAccess"),
    ],
)
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_vulkan_without_a_feature_falls_back(rng, monkeypatch, backend, feature, dtype, reason):
    """A device without shaderInt64 (int64) or storageBuffer8BitAccess (bool) runs those ops on
    the CPU, saying which feature is missing; the rest stays on Vulkan."""
    from mnnpy.backend import get_runtime

    monkeypatch.setattr(get_runtime("vulkan"), feature, False)
    model, feeds = loop_body_model(np.int64)
    s = check_backend(model, feeds, EXACT, backend, on_device=False)
    desc = s.partitions()
    assert reason in desc and "on vulkan" in desc, desc


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_vulkan_1_0_runs_float32_only(monkeypatch, backend):
    """Integer and bool shaders are SPIR-V 1.3: on a Vulkan 1.0 device they fall back."""
    from mnnpy.backend import get_runtime

    rt = get_runtime("vulkan")
    monkeypatch.setattr(rt.info, "api_version", rt.vk.VK_MAKE_VERSION(1, 0, 0))
    model, feeds = loop_body_model(np.int32)
    s = check_backend(model, feeds, EXACT, backend, on_device=False)
    assert "Vulkan 1.0 device (integer and bool shaders need 1.1)" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_opencl_without_int64_falls_back(monkeypatch, backend):
    """An embedded-profile device without cles_khr_int64 runs int64 ops on the CPU, saying why."""
    from mnnpy.backend import get_runtime

    monkeypatch.setattr(get_runtime("opencl"), "int64", False)
    model, feeds = loop_body_model(np.int64)
    s = check_backend(model, feeds, EXACT, backend, on_device=False)
    assert "has no 64-bit integers" in s.partitions()

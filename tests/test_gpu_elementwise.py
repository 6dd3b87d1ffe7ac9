"""Elementwise ops on every GPU backend against the CPU: unary ops with zeros, infinities (and
NaN), Clip and its CPU fallback, the fused Swish, binary ops with every broadcast (up to rank
8), Pow with its special values, constant operands, odd and empty shapes, a chain that reuses
memory, and the copies made only at partition borders. Each backend is skipped, with the
reason, where it is unusable (CI: PoCL, lavapipe). Backend-only checks live in
tests/test_opencl.py and tests/test_vulkan.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import ELEMENTWISE, compare, gpu_backends, gpu_cases, partitioned_model, sessions
from tests.oracle import make_model, rand

SHAPE = (13, 7, 127)

# (op, attrs, input scale)
UNARY = {
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
    "opencl": [f"{u[0]}{'-attrs' if u[1] else ''}" for u in UNARY["opencl"]],
    "vulkan": [f"{u[0]}-{u[2]}{'-attrs' if u[1] else ''}" for u in UNARY["vulkan"]],
}
# the first elements of the unary input
SPECIAL = {"opencl": [0.0, -0.0, np.inf, -np.inf], "vulkan": [0.0, -0.0, np.inf, -np.inf, np.nan]}


@pytest.mark.parametrize("backend,op,attrs,scale", gpu_cases(UNARY, UNARY_IDS))
def test_unary(rng, backend, op, attrs, scale):
    x = rand(rng, *SHAPE, scale=scale)
    x.flat[: len(SPECIAL[backend])] = SPECIAL[backend]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    compare(model, {"x": x}, backend=backend)


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
    compare(model, {"x": x}, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_clip_bounds_at_run_time_fall_back(rng, backend):
    x, lo = rand(rng, 5, 7), np.array(-0.1, np.float32)
    model = make_model([helper.make_node("Clip", ["x", "lo"], ["y"])], {"x": x, "lo": lo}, ["y"])
    s = compare(model, {"x": x, "lo": lo}, on_device=False, backend=backend)
    assert "Clip min/max computed at run time" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_swish(rng, backend):
    x = rand(rng, *SHAPE, scale=4)
    model = make_model([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])], {"x": x}, ["y"])
    s = compare(model, {"x": x}, backend=backend)
    assert "Swish" in s.partitions()  # the converter fused x*sigmoid(x); the backend runs the fused op


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
BINARY = {"opencl": BINARY_SHAPES[:7], "vulkan": BINARY_SHAPES}


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
@pytest.mark.parametrize("backend,sa,sb", gpu_cases(BINARY, ids=lambda s: f"{s[0]}x{s[1]}"))
def test_binary(rng, backend, sa, sb, op):
    a, b = rand(rng, *sa), rand(rng, *sb)
    if op in ("Max", "Min") and a.size > 2 and b.size > 2:
        a.flat[1], b.flat[2] = np.nan, np.nan
    model = make_model([helper.make_node(op, ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    compare(model, {"a": a, "b": b}, backend=backend)


@pytest.mark.parametrize("shapes", BINARY_SHAPES[:3], ids=[f"{a}x{b}" for a, b in BINARY_SHAPES[:3]])
@pytest.mark.parametrize("backend", gpu_backends())
def test_pow(rng, backend, shapes):
    a = np.abs(rand(rng, *shapes[0], scale=2)) + np.float32(0.05)
    b = rand(rng, *shapes[1], scale=2)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    compare(model, {"a": a, "b": b}, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_large_results(rng, backend):
    """Results up to 1e38: 2^(y log2 x) with the exponent carried in two parts."""
    a = np.abs(rand(rng, 4097, scale=40)) + np.float32(1)
    b = rand(rng, 4097, scale=8)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    compare(model, {"a": a, "b": b}, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_special_values(backend):
    """C99 pow: negative bases with integer exponents, zeros, infinities, NaN."""
    vals = np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf, -np.inf, np.nan], np.float32)
    exps = np.array([-3.0, -2.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, -np.inf, np.nan], np.float32)
    a, b = vals[:, None], exps[None, :]
    model = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    compare(model, {"a": a, "b": b}, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_pow_negative_base_integer_exponent(rng, backend):
    a = rand(rng, 7, 13, scale=2)
    b = rng.integers(-3, 4, (13,)).astype(np.float32)
    model = make_model([helper.make_node("Pow", ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    compare(model, {"a": a, "b": b}, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_binary_with_constant_operand(rng, backend):
    x, w = rand(rng, 2, 5, 9), rand(rng, 5, 1)
    model = make_model([helper.make_node("Mul", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": w})
    compare(model, {"x": x}, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_empty_tensor(rng, backend):
    x = np.zeros((3, 0, 5), np.float32)
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])], {"x": x}, ["y"])
    compare(model, {"x": x}, backend=backend)


ODD_SHAPES = [(1,), (63,), (64,), (65,), (3, 0, 5), (0,), (1, 1, 1, 1), (300_007,)]


@pytest.mark.parametrize("shape", ODD_SHAPES, ids=str)
@pytest.mark.parametrize("backend", gpu_backends())
def test_odd_and_empty_shapes(rng, backend, shape):
    """Sizes around the work-group size, empty tensors (no dispatch, no staging slot), a long vector."""
    x = rand(rng, *shape)
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])], {"x": x}, ["y"])
    compare(model, {"x": x}, backend=backend)


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
    model = make_model(nodes, {"x": x}, [prev])
    compare(model, {"x": x}, (1e-4, 1e-5), backend=backend)


# backend calls per run of the GPU, CPU, GPU partitions (the CPU reads the border tensor with
# download_into, straight into its arena; Vulkan: also two submissions)
BORDER_CALLS = {
    "opencl": {"upload": 3, "download": 1, "download_into": 2},
    "vulkan": {"upload": 3, "download": 1, "download_into": 2, "submit": 2},
}


@pytest.mark.parametrize("backend", gpu_backends())
def test_copies_only_at_partition_borders(rng, monkeypatch, backend):
    """gpu [Relu] -> cpu [Erf] -> gpu [Add z, Sigmoid]: per run, the uploads are the two inputs
    and one border tensor, the downloads one border tensor and the output."""
    dev, cpu = sessions(partitioned_model(rng), backend=backend)
    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    want = cpu.run({"x": x, "z": z})["y"]
    dev.run({"x": x, "z": z})  # plan and build first
    gpu = dev.backends[0]
    calls = dict.fromkeys(BORDER_CALLS[backend], 0)
    for name in calls:
        real = getattr(gpu, name)

        def counted(*a, _real=real, _name=name):
            calls[_name] += 1
            return _real(*a)

        monkeypatch.setattr(gpu, name, counted)
    np.testing.assert_allclose(dev.run({"x": x, "z": z})["y"], want, atol=ELEMENTWISE[0], rtol=ELEMENTWISE[1])
    assert calls == BORDER_CALLS[backend]

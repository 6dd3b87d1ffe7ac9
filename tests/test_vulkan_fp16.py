"""Vulkan fp16 storage (``precision="low"``): every shader family's ``_f16`` twin against the CPU.

Activations are stored as float16 (storageBuffer16BitAccess), arithmetic and accumulation
stay fp32, weights, biases and constant operands stay fp32. Each op on seeded random
inputs with odd sizes within ``HALF`` (5 * 2^-10 absolute plus relative) of the CPU's fp32
result; the storage dtype is checked (handles are float16 and rounding to fp16 is visible);
a device without the feature falls back to fp32 storage with a warning. The real models
with fp16 storage are in ``test_vulkan_models.py``. Skipped, with the reason, where Vulkan
is unusable or the device has no 16-bit storage (lavapipe has it; CI installs lavapipe).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability, get_runtime
from mnnpy.converter import convert
from tests.backend_compare import HALF, compare, partitioned_model
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)
if not get_runtime("vulkan").storage16:
    pytest.skip("this Vulkan device has no storageBuffer16BitAccess", allow_module_level=True)


def _low(model, feeds, tol=HALF):
    return compare(model, feeds, tol, backend="vulkan", precision="low")


def _one(op, x, attrs=None):
    """A model ``x -> op -> y``."""
    return make_model([helper.make_node(op, ["x"], ["y"], **(attrs or {}))], {"x": x}, ["y"])


@pytest.mark.parametrize(
    "op, attrs",
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
def test_unary(rng, op, attrs):
    x = rand(rng, 2, 3, 7, 5)
    _low(_one(op, x, attrs), {"x": x})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_broadcast_and_constant_operand(rng, op):
    a, b = rand(rng, 2, 3, 5, 7), rand(rng, 3, 1, 7)
    b = b + np.sign(b) * 0.5 if op == "Div" else b  # away from 0
    m = make_model([helper.make_node(op, ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    _low(m, {"a": a, "b": b})
    k = (rand(rng, 7) + 2.0).astype(np.float32)  # a float32 constant operand beside an fp16 activation
    m = make_model([helper.make_node(op, ["a", "k"], ["y"])], {"a": a}, ["y"], {"k": k})
    _low(m, {"a": a})


def test_matmul_of_two_activations_and_gemm_with_weights(rng):
    a, b = rand(rng, 3, 17, 33), rand(rng, 3, 33, 9)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    _low(m, {"a": a, "b": b})
    x, w, c = rand(rng, 5, 37), rand(rng, 13, 37, scale=0.2), rand(rng, 13)
    m = make_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], {"x": x}, ["y"], {"w": w, "c": c})
    _low(m, {"x": x})
    a, b = rand(rng, 9, 1000), rand(rng, 1000, 20, scale=0.03)  # split-K: fp16 operands, fp32 partials
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    _low(m, {"a": a, "b": b})
    x, w, c = rand(rng, 1, 300), rand(rng, 10, 300, scale=0.06), rand(rng, 10)  # the GEMV shader
    m = make_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], {"x": x}, ["y"], {"w": w, "c": c})
    _low(m, {"x": x})


@pytest.mark.parametrize(
    "xs, ws, attrs",
    [
        ((2, 5, 9, 11), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),  # general
        ((1, 6, 10, 9), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),  # depthwise
        ((1, 9, 7, 5), (11, 9, 1, 1), {}),  # 1x1: the GEMM shader
        ((1, 6, 8, 7), (10, 3, 3, 3), {"group": 2, "pads": [1, 0, 1, 0]}),  # grouped
        ((1, 16, 9, 10), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),  # wider, strided
    ],
)
def test_conv_with_fused_relu(rng, xs, ws, attrs):
    x, w, b = rand(rng, *xs), rand(rng, *ws, scale=1 / np.sqrt(np.prod(ws[1:]))), rand(rng, ws[0], scale=0.5)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs), helper.make_node("Relu", ["c"], ["y"])]
    _low(make_model(nodes, {"x": x}, ["y"], {"w": w, "b": b}), {"x": x})


def test_conv_transpose(rng):
    x, w, b = rand(rng, 1, 5, 6, 7), rand(rng, 5, 3, 3, 3, scale=0.3), rand(rng, 3)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])
    _low(make_model([node], {"x": x}, ["y"], {"w": w, "b": b}), {"x": x})


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ("AveragePool", {"kernel_shape": [3, 2], "count_include_pad": 1, "pads": [1, 0, 1, 0]}),
        ("GlobalAveragePool", {}),
        ("GlobalMaxPool", {}),
    ],
)
def test_pools(rng, op, attrs):
    x = rand(rng, 2, 3, 9, 11)
    _low(_one(op, x, attrs), {"x": x})


@pytest.mark.parametrize(
    "op, attrs",
    [
        ("Softmax", {"axis": -1}),
        ("LogSoftmax", {"axis": 1}),
        ("ReduceMean", {"axes": [2, 3], "keepdims": 1}),
        ("ReduceMax", {"axes": [1], "keepdims": 0}),
        ("ReduceSumSquare", {"axes": [3], "keepdims": 1}),
    ],
)
def test_softmax_and_reductions(rng, op, attrs):
    x = rand(rng, 2, 5, 7, 9)
    _low(_one(op, x, attrs), {"x": x})


def test_large_reduction_goes_through_fp32_scratch(rng):
    """A reduction long enough for the two-pass form (float32 scratch between the passes)."""
    x = rand(rng, 1, 3, 300, 301)
    _low(_one("ReduceMean", x, {"axes": [2, 3], "keepdims": 1}), {"x": x})


def test_layer_and_batch_normalization(rng):
    x, g, b = rand(rng, 2, 7, 33), rand(rng, 33), rand(rng, 33)
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)
    _low(make_model([node], {"x": x}, ["y"], {"g": g, "b": b}), {"x": x})
    x = rand(rng, 2, 5, 6, 7)
    s, t, mu = rand(rng, 5), rand(rng, 5), rand(rng, 5)
    var = (np.abs(rand(rng, 5)) + 0.5).astype(np.float32)
    node = helper.make_node("BatchNormalization", ["x", "s", "t", "mu", "var"], ["y"])
    _low(make_model([node], {"x": x}, ["y"], {"s": s, "t": t, "mu": mu, "var": var}), {"x": x})


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize(rng, mode):
    x = rand(rng, 1, 3, 5, 7)
    scales = np.array([1, 1, 2, 2], np.float32)
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)
    _low(make_model([node], {"x": x}, ["y"], {"scales": scales}), {"x": x})


def test_movement_ops_copy_exactly(rng):
    """Transpose, Slice, Concat, Split, Gather on fp16-representable input: exact copies."""
    x = rand(rng, 2, 5, 7, 3).astype(np.float16).astype(np.float32)
    inits = {
        "i": np.array([4, 0, 2], np.int64),
        "s0": np.array([1], np.int64),
        "e0": np.array([6], np.int64),
        "a0": np.array([2], np.int64),
        "sp": np.array([2, 3], np.int64),
    }
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Slice", ["x", "s0", "e0", "a0"], ["s"]),
        helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
        helper.make_node("Split", ["x", "sp"], ["p", "q"], axis=1),
        helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
    ]
    _low(make_model(nodes, {"x": x}, ["t", "s", "c", "p", "q", "g"], inits), {"x": x}, (0, 0))


def test_storage_is_float16(rng):
    """Activations are stored as float16: 1 + 2^-12 reads back as 1 after a copy (fp32 keeps it);
    values beyond fp16's range become inf without a NumPy warning."""
    x = np.array([[1 + 2**-12, 3.0, 70000.0, -1e6]], np.float32)
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    interp = mnnpy.Interpreter(convert(m))
    low = interp.create_session(backend="vulkan", precision="low")
    high = interp.create_session(backend="vulkan", precision="high")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = low.run({"x": x})["y"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [[1.0, 3.0, np.inf, 0.0]])
    np.testing.assert_array_equal(high.run({"x": x})["y"], np.maximum(x, 0))
    vk = low.backends[0]
    assert vk.name == "vulkan" and vk.half and vk.storage == np.float16


def test_without_16bit_storage_says_so_and_stores_fp32(rng, monkeypatch):
    rt = get_runtime("vulkan")
    monkeypatch.setattr(rt, "storage16", False)
    x = np.array([[1 + 2**-12, -2.0]], np.float32)
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    with pytest.warns(RuntimeWarning, match="storageBuffer16BitAccess"):
        s = mnnpy.Interpreter(convert(m)).create_session(backend="vulkan", precision="low")
    np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(x, 0))


def test_partition_borders_cross_as_float32(rng):
    """GPU -> CPU -> GPU partitions: each border tensor is staged as float32 and cast on the
    device (the host converts nothing), over two input shapes."""
    model = partitioned_model(rng)
    interp = mnnpy.Interpreter(convert(model))
    s = interp.create_session(backend=["vulkan", "cpu"], precision="low")
    cpu = interp.create_session(backend="cpu")
    z = rand(rng, 3, 1, 1)
    for shape in [(1, 3, 13, 7), (1, 3, 5, 9)]:
        x = rand(rng, *shape)
        got, want = s.run({"x": x, "z": z})["y"], cpu.run({"x": x, "z": z})["y"]
        np.testing.assert_allclose(got, want, atol=HALF[0], rtol=HALF[1])
    assert s.partitions().splitlines()[0].startswith("3 partitions"), s.partitions()
    staged = [t for part in s.backends[0]._last_parts for t in part.uploads + part.downloads]
    assert staged and all(t.dtype == np.float32 for t in staged)
    casts = [d.label for part in s.backends[0]._last_parts for d in part.dispatches if d.label == "Cast"]
    assert len(casts) == len(staged)

"""Fusing adjacent CPU Executions (``backends/cpu/fusion.py``) and the planner's
``PartitionStep.private``: ``Mul`` by a scalar then ``Add``/``Sub`` of one (every operand
order, in place and not, split over the pool) bit-identical to the unfused ops and against
onnxruntime; ``ConvTranspose -> Relu`` against onnxruntime; nothing fused where the tensor
between them is read elsewhere or is a graph output, where a constant is not a scalar, for
``Div``, float16, or where numba cannot compile."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backends.cpu import fusion
from mnnpy.converter import convert
from tests.oracle import ACCUMULATE, ELEMENTWISE, check, make_model, rand, run_ort


def _session(model):
    s = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
    return s


def _fused(session, feeds) -> list[str]:
    """Run once; the op types of the Executions that took over their reader."""
    session.run(feeds)
    plans = session.runner.segments or [session.runner.plan]
    return sorted(exe.op.type for p in plans for exe in p.executions.values() if getattr(exe, "fused_with", None))


def _affine(rng, shape, first, second, keep_input=False, a_shape=(1,), b_shape=(1,), dtype=np.float32):
    """``x -> first(x, a) -> second(., b) -> y``; ``first``/``second``: (op type, constant first?)."""
    x = rand(rng, *shape, dtype=dtype)
    inits = {"a": (rand(rng, *a_shape) * 2).astype(dtype), "b": rand(rng, *b_shape, dtype=dtype)}
    (op1, c1), (op2, c2) = first, second
    nodes = [
        helper.make_node(op1, ["a", "x"] if c1 else ["x", "a"], ["t"]),
        helper.make_node(op2, ["b", "t"] if c2 else ["t", "b"], ["y"]),
    ]
    outs = ["y"]
    if keep_input:  # x read again afterwards: the fused op cannot write over it
        nodes.append(helper.make_node("Relu", ["x"], ["z"]))
        outs.append("z")
    return make_model(nodes, {"x": x}, outs, inits), {"x": x}


ORDERS = [
    (("Mul", True), ("Add", False)),  # PP-OCRv4's learnable affine block
    (("Mul", False), ("Add", True)),
    (("Mul", False), ("Sub", False)),
    (("Mul", True), ("Sub", True)),
]


@pytest.mark.parametrize("order", range(len(ORDERS)))
@pytest.mark.parametrize("keep_input", [False, True])
@pytest.mark.parametrize("shape", [(1, 7, 5, 3), (2, 32, 96, 96)])
def test_scale_shift_bit_identical_to_the_two_ops(rng, monkeypatch, order, keep_input, shape):
    model, feeds = _affine(rng, shape, *ORDERS[order], keep_input=keep_input)
    s = _session(model)
    assert _fused(s, feeds) == ["Mul"]
    fused = s.run(feeds)
    monkeypatch.setattr(fusion, "scale_shift_kernel", lambda: None)
    s2 = _session(model)
    assert _fused(s2, feeds) == []
    for k, v in s2.run(feeds).items():
        np.testing.assert_array_equal(fused[k], v)
    check(model, feeds, **ELEMENTWISE)


def test_not_fused_where_the_tensor_between_is_read_elsewhere_or_an_output(rng):
    x = rand(rng, 2, 3, 4, 5)
    inits = {"a": np.array([1.5], np.float32), "b": np.array([0.25], np.float32)}
    mul, add = helper.make_node("Mul", ["x", "a"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])
    read_twice = make_model([mul, add, helper.make_node("Relu", ["t"], ["z"])], {"x": x}, ["y", "z"], inits)
    an_output = make_model([mul, add], {"x": x}, ["y", "t"], inits)
    for model in (read_twice, an_output):
        assert _fused(_session(model), {"x": x}) == []
        check(model, {"x": x}, **ELEMENTWISE)


@pytest.mark.parametrize(
    "kw",
    [
        {"a_shape": (1, 3, 1, 1)},  # per-channel scale
        {"b_shape": (5,)},  # a shift per column
        {"dtype": np.float16},
    ],
)
def test_not_fused_for_other_constants_and_dtypes(rng, kw):
    model, feeds = _affine(rng, (2, 3, 4, 5), *ORDERS[0], **kw)
    assert _fused(_session(model), feeds) == []
    check(model, feeds, **(ELEMENTWISE if kw.get("dtype") is None else {"atol": 1e-2, "rtol": 1e-2}))


def test_div_is_not_fused(rng):
    model, feeds = _affine(rng, (2, 3, 4, 5), ("Div", False), ("Add", False))
    assert _fused(_session(model), feeds) == []
    check(model, feeds, **ELEMENTWISE)


def _residual(rng, xs, s_shape, swap=False, also_read=False):
    """``x -> Mul(x, s) -> Add(x, .)`` with ``s`` a graph input (the squeeze-and-excitation form)."""
    x, sc = rand(rng, *xs), rand(rng, *s_shape)
    nodes = [
        helper.make_node("Mul", ["s", "x"] if swap else ["x", "s"], ["t"]),
        helper.make_node("Add", ["t", "x"] if swap else ["x", "t"], ["y"]),
    ]
    outs = ["y"]
    if also_read:
        nodes.append(helper.make_node("Neg", ["t"], ["z"]))
        outs.append("z")
    return make_model(nodes, {"x": x, "s": sc}, outs), {"x": x, "s": sc}


@pytest.mark.parametrize("xs", [(1, 96, 40, 40), (2, 5, 7, 3), (2, 3, 11)])
@pytest.mark.parametrize("swap", [False, True])
def test_residual_scale_bit_identical(rng, monkeypatch, xs, swap):
    model, feeds = _residual(rng, xs, xs[:2] + (1,) * (len(xs) - 2), swap)
    s = _session(model)
    assert _fused(s, feeds) == ["Mul"]
    fused = s.run(feeds)["y"]
    monkeypatch.setattr(fusion, "residual_scale_kernel", lambda: None)
    s2 = _session(model)
    assert _fused(s2, feeds) == []
    np.testing.assert_array_equal(fused, s2.run(feeds)["y"])
    check(model, feeds, **ELEMENTWISE)


@pytest.mark.parametrize("s_shape,also_read", [((1, 5, 1, 1), False), ((2, 5, 1, 7), False), ((2, 5, 1, 1), True)])
def test_residual_scale_not_fused(rng, s_shape, also_read):
    """A scale shared by the images, one that is not per channel, a product read elsewhere."""
    model, feeds = _residual(rng, (2, 5, 3, 7), s_shape, also_read=also_read)
    assert _fused(_session(model), feeds) == []
    check(model, feeds, **ELEMENTWISE)


def _resize_add(rng, xs, scales, mode="nearest", swap=False, keep_input=True, **attrs):
    """``Add(z, Resize(x))``; ``keep_input``: x read again after (else the planner may give
    its bytes to the sum, which the fused pass would overwrite: then nothing is fused)."""
    x = rand(rng, *xs)
    z = rand(rng, *[int(d * f) for d, f in zip(xs, scales)])
    nodes = [
        helper.make_node("Resize", ["x", "", "sc"], ["t"], mode=mode, **attrs),
        helper.make_node("Add", ["t", "z"] if swap else ["z", "t"], ["y"]),
    ]
    outs = ["y"]
    if keep_input:
        nodes.append(helper.make_node("Neg", ["x"], ["w"]))
        outs.append("w")
    inits = {"sc": np.array(scales, np.float32)}
    return make_model(nodes, {"x": x, "z": z}, outs, inits, opset=19), {"x": x, "z": z}


@pytest.mark.parametrize(
    "xs,scales,attrs",
    [
        ((1, 96, 20, 20), [1, 1, 2, 2], {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),  # det
        ((2, 3, 7, 5), [1, 1, 3, 3], {}),
        ((1, 4, 6, 9), [1, 1, 1.5, 0.5], {"nearest_mode": "round_prefer_ceil"}),
    ],
)
@pytest.mark.parametrize("swap", [False, True])
def test_resize_add(rng, xs, scales, attrs, swap):
    model, feeds = _resize_add(rng, xs, scales, swap=swap, **attrs)
    assert _fused(_session(model), feeds) == ["Resize"]
    check(model, feeds, **ELEMENTWISE)


def test_resize_add_where_the_input_dies(rng):
    model, feeds = _resize_add(rng, (1, 8, 20, 20), [1, 1, 2, 2], keep_input=False)
    check(model, feeds, **ELEMENTWISE)


def test_resize_add_not_fused_for_linear(rng):
    model, feeds = _resize_add(rng, (1, 3, 5, 5), [1, 1, 2, 2], mode="linear")
    assert _fused(_session(model), feeds) == []
    check(model, feeds, **ACCUMULATE)


def _deconv_relu(rng, xs, ws, attrs, also_read=False):
    x, w, b = rand(rng, *xs), rand(rng, *ws, scale=0.5), rand(rng, ws[1])
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["t"], **attrs), helper.make_node("Relu", ["t"], ["y"])]
    outs = ["y"]
    if also_read:
        nodes.append(helper.make_node("Sigmoid", ["t"], ["z"]))
        outs.append("z")
    return make_model(nodes, {"x": x}, outs, {"w": w, "b": b}), {"x": x}


@pytest.mark.parametrize(
    "xs,ws,attrs",
    [
        ((1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}),  # PP-OCR det
        ((2, 4, 7, 5), (4, 3, 2, 3), {"strides": [3, 4]}),  # outputs holding the bias alone
        ((1, 8, 40, 40), (8, 6, 2, 2), {"strides": [2, 2]}),  # split over the pool
    ],
)
def test_conv_transpose_relu(rng, xs, ws, attrs):
    model, feeds = _deconv_relu(rng, xs, ws, attrs)
    assert _fused(_session(model), feeds) == ["ConvTranspose"]
    check(model, feeds, **ACCUMULATE)
    y = _session(model).run(feeds)["y"]
    assert (y >= 0).all() and (y == 0).any()


def test_conv_transpose_relu_not_fused(rng):
    model, feeds = _deconv_relu(rng, (1, 4, 7, 5), (4, 3, 2, 2), {"strides": [2, 2]}, also_read=True)
    assert _fused(_session(model), feeds) == []
    check(model, feeds, **ACCUMULATE)
    model, feeds = _deconv_relu(rng, (1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2]})  # overlapping taps: NumPy path
    assert _fused(_session(model), feeds) == []
    check(model, feeds, **ACCUMULATE)


def test_private_tensors_of_a_partition(rng):
    """Made and read by one op of the partition, not an output, not read twice."""
    x = rand(rng, 2, 3)
    nodes = [
        helper.make_node("Relu", ["x"], ["p"]),
        helper.make_node("Neg", ["p"], ["q"]),
        helper.make_node("Abs", ["q"], ["r"]),
        helper.make_node("Exp", ["q"], ["e"]),
        helper.make_node("Add", ["r", "e"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y", "e"])
    s = _session(model)
    s.run({"x": x})
    g = s.graph
    (step,) = s.runner.plan.steps
    assert sorted(g.tensors[t].name for t in step.private) == ["p", "r"]
    np.testing.assert_allclose(s.run({"x": x})["y"], run_ort(model, {"x": x})[0], **ELEMENTWISE)


def _add_relu_model(rng, xs, bs, keep_a=False, twice=False):
    """``y = Relu(Add(a, b))``; ``a = Neg(x)`` so that ``a`` is a tensor the planner may let ``y``
    reuse (in place), unless it is read again (``keep_a``); ``twice``: ``Add(a, a)``."""
    x, b = rand(rng, *xs), rand(rng, *bs)
    nodes = [helper.make_node("Neg", ["x"], ["a"]), helper.make_node("Add", ["a", "a" if twice else "b"], ["t"])]
    nodes.append(helper.make_node("Relu", ["t"], ["y"]))
    outs = ["y"]
    if keep_a:
        nodes.append(helper.make_node("Exp", ["a"], ["z"]))
        outs.append("z")
    return make_model(nodes, {"x": x, "b": b}, outs), {"x": x, "b": b}


@pytest.mark.parametrize("xs", [(1, 64, 56, 56), (2, 5, 7, 3)])
@pytest.mark.parametrize("keep_a,twice", [(False, False), (True, False), (False, True)])
def test_add_relu_bit_identical(rng, monkeypatch, xs, keep_a, twice):
    model, feeds = _add_relu_model(rng, xs, xs, keep_a, twice)
    feeds["x"].reshape(-1)[:3] = [np.nan, np.inf, -np.inf]  # NaN passes, inf stays inf
    s = _session(model)
    assert "Add" in _fused(s, feeds)
    fused = s.run(feeds)
    monkeypatch.setattr(fusion, "add_relu_kernel", lambda: None)
    s2 = _session(model)
    assert "Add" not in _fused(s2, feeds)
    for k, v in s2.run(feeds).items():
        np.testing.assert_array_equal(fused[k], v)
    assert np.isnan(fused["y"].reshape(-1)[0])
    check(model, feeds, **ELEMENTWISE)


def test_add_relu_with_broadcast_is_not_fused(rng):
    model, feeds = _add_relu_model(rng, (2, 5, 7, 3), (5, 1, 1))
    assert "Add" not in _fused(_session(model), feeds)
    check(model, feeds, **ELEMENTWISE)

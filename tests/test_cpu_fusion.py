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

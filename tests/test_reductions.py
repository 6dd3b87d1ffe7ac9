"""Reductions, ArgMax/ArgMin and TopK against onnxruntime (every opset form of ``axes``/``k``)."""

import numpy as np
import pytest
from onnx import helper

from mnnpy.ops.reductions import REDUCTIONS
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand

REDUCE = list(REDUCTIONS)


def _reduce_model(op, x, axes, opset, **attrs):
    since = 13 if op == "ReduceSum" else 18
    if opset < since:
        extra = {} if axes is None else {"axes": axes}
        return make_model([helper.make_node(op, ["x"], ["y"], **extra, **attrs)], {"x": x}, ["y"], opset=opset)
    ins, inits = ["x"], {}
    if axes is not None:
        ins, inits = ["x", "axes"], {"axes": np.array(axes, np.int64)}
    return make_model([helper.make_node(op, ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=opset)


def _data(rng, op, *shape):
    x = rand(rng, *shape)
    if op == "ReduceLogSum":
        return np.abs(x) + 0.1
    if op == "ReduceProd":
        return (np.abs(x) * 0.5 + 0.75).astype(np.float32)
    return x


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("axes", [None, [1], [-1, 0], [0, 2, 3]])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce(rng, op, axes, opset):
    x = _data(rng, op, 3, 7, 5, 2)
    check(_reduce_model(op, x, axes, opset, keepdims=int(axes != [1])), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_empty_axes(rng, op, noop):
    x = _data(rng, op, 3, 5)
    node = helper.make_node(op, ["x", "axes"], ["y"], noop_with_empty_axes=noop, keepdims=0)
    m = make_model([node], {"x": x}, ["y"], {"axes": np.zeros(0, np.int64)}, opset=18)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reduce_int(rng, op, dtype):
    x = rng.integers(-5, 6, (4, 7)).astype(dtype)
    check(_reduce_model(op, x, [1], 13, keepdims=0), {"x": x}, **EXACT)


def test_reduce_empty_set():
    x = np.zeros((2, 0, 4), np.float32)
    for op, axes in (("ReduceSum", [1]), ("ReduceMax", [1]), ("ReduceLogSumExp", [1]), ("ReduceProd", [1])):
        check(_reduce_model(op, x, axes, 18, keepdims=1), {"x": x}, **EXACT)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(rng, op, axis, keepdims, last):
    x = rng.integers(0, 4, (5, 7, 3)).astype(np.float32)  # many ties
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    check(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, **EXACT)


def test_arg_opset11(rng):
    x = rand(rng, 4, 9)
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1)
    check(make_model([node], {"x": x}, ["y"], opset=11), {"x": x}, **EXACT)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_topk(rng, largest, axis, k):
    x = rng.integers(0, 3, (5, 6, 7)).astype(np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    m = make_model([node], {"x": x}, ["v", "i"], {"k": np.array([k], np.int64)}, opset=11)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64])
def test_topk_dtypes(rng, dtype):
    x = rng.integers(0, 50, (3, 11)).astype(dtype)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    m = make_model([node], {"x": x}, ["v", "i"], {"k": np.array([4], np.int64)}, opset=11)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("opset", [7, 10])
def test_topk_old(rng, opset):
    x = rand(rng, 4, 9)
    if opset < 10:
        node = helper.make_node("TopK", ["x"], ["v", "i"], k=3, axis=1)
        m = make_model([node], {"x": x}, ["v", "i"], opset=opset)
    else:
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
        m = make_model([node], {"x": x}, ["v", "i"], {"k": np.array([3], np.int64)}, opset=opset)
    check(m, {"x": x}, **EXACT)


def test_reduce_bool(rng):
    x = rng.random((3, 4)) > 0.5
    for op in ("ReduceMax", "ReduceMin"):
        check(_reduce_model(op, x, [1], 20, keepdims=0), {"x": x}, **EXACT)


def test_reduce_fp16(rng):
    x = rand(rng, 4, 9, 3, dtype=np.float16)
    for op in ("ReduceSum", "ReduceL2", "ReduceLogSumExp"):
        check(_reduce_model(op, x, [1], 18, keepdims=0), {"x": x}, atol=5 * 2**-10, rtol=5 * 2**-10)


def test_topk_k_graph_input(rng):
    """K fed as a graph input: the plan depends on its value."""
    x, k = rand(rng, 10), np.array([4], np.int64)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    check(make_model([node], {"x": x, "k": k}, ["v", "i"], opset=11), {"x": x, "k": k}, **EXACT)

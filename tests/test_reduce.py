"""ReduceMean against onnxruntime: axes as attribute (< 18) and as input (18+)."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand


def _model(x, axes, opset, **attrs):
    if opset < 18:
        extra = {} if axes is None else {"axes": axes}
        return make_model([helper.make_node("ReduceMean", ["x"], ["y"], **extra, **attrs)], {"x": x}, ["y"], opset=opset)
    ins, inits = ["x"], {}
    if axes is not None:
        ins, inits = ["x", "axes"], {"axes": np.array(axes, np.int64)}
    return make_model([helper.make_node("ReduceMean", ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=opset)


@pytest.mark.parametrize("axes", [None, [0], [1], [-1], [2, 3], [-1, -2], [0, 2], [0, 1, 2, 3]])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_mean(rng, axes, keepdims, opset):
    x = rand(rng, 2, 13, 7, 5)
    check(_model(x, axes, opset, keepdims=keepdims), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_mean_empty_axes(rng, noop):
    """Empty ``axes`` input: reduce all, or copy with ``noop_with_empty_axes``."""
    x = rand(rng, 3, 4, 5)
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], noop_with_empty_axes=noop, keepdims=0)
    m = make_model([node], {"x": x}, ["y"], {"axes": np.zeros(0, np.int64)}, opset=18)
    check(m, {"x": x}, **ACCUMULATE)


def test_reduce_mean_noop_no_axes(rng):
    x = rand(rng, 3, 4)
    node = helper.make_node("ReduceMean", ["x"], ["y"], noop_with_empty_axes=1)
    check(make_model([node], {"x": x}, ["y"], opset=18), {"x": x}, **EXACT)


def test_reduce_mean_int(rng):
    x = rng.integers(-50, 50, (4, 7)).astype(np.int32)
    check(_model(x, [1], 13, keepdims=0), {"x": x}, **EXACT)


def test_reduce_mean_large(rng):
    """Global average over H, W (the SE-block / head pattern) at a size computed at run time."""
    x = rand(rng, 1, 96, 40, 41)
    check(_model(x, [2, 3], 18, keepdims=1), {"x": x}, **ACCUMULATE)

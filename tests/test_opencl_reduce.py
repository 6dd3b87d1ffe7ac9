"""OpenCL-only checks of reductions, Softmax/LogSoftmax and LayerNormalization: fp16 storage
(``precision="low"``). What both GPU backends do is in tests/test_gpu_reduce.py.

Skipped, with the reason, where no OpenCL device is usable.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, HALF, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def _reduce(rng, op, shape, axes, keepdims=1, noop=0, x=None, **kw):
    x = rand(rng, *shape) if x is None else x
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    node = helper.make_node(op, ["x", "axes" if axes is not None else ""], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    model = make_model([node], {"x": x}, ["y"], inits, opset=18)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceLogSumExp", "ReduceL2"])
@pytest.mark.parametrize("shape", [(2, 3, 29, 31), (1, 1, 307, 293)])
def test_reduce_fp16(rng, op, shape):
    s = _reduce(rng, op, shape, [2, 3], tol=HALF, precision="low")
    assert s.backends[0].storage == np.float16


def _softmax(rng, op, x, axis, opset=17, **kw):
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": x}, ["y"], opset=opset)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_fp16(rng, op):
    s = _softmax(rng, op, rand(rng, 3, 29, 257, scale=3), -1, tol=HALF, precision="low")
    assert s.backends[0].storage == np.float16


def _layernorm(rng, x, axis, **kw):
    shape = x.shape[axis:]
    params = {"s": rand(rng, *shape), "b": rand(rng, *shape)}
    node = helper.make_node("LayerNormalization", ["x", *params], ["y"], axis=axis, epsilon=1e-3)
    model = make_model([node], {"x": x}, ["y"], params)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


def test_layernorm_fp16(rng):
    s = _layernorm(rng, rand(rng, 2, 31, 120), -1, tol=HALF, precision="low")
    assert s.backends[0].storage == np.float16

"""The compiled (numba) LayerNormalization rows of the CPU backend against onnxruntime
(``ACCUMULATE``): every axis, odd sizes, N=2, with and without bias, the Mean and InvStdDev
outputs, epsilon, run-time scale and bias, long rows, rows large enough to be split over the
pool, data far from zero; that the op picks them (not for a broadcast scale or float16); and
the NumPy fallback where numba cannot compile."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backends.cpu.ops import norm as norm_ops
from tests.backend_compare import spy_compiled
from tests.oracle import ACCUMULATE, HALF, check, make_model, rand


def _model(rng, xs, axis, bias=True, scale_shape=None, dynamic=(), outputs=("y",), offset=0.0, dtype=np.float32):
    x = rand(rng, *xs, dtype=dtype) + np.asarray(offset, dtype)
    shape = x.shape[axis:] if scale_shape is None else scale_shape
    params = {"s": rand(rng, *shape, dtype=dtype), **({"b": rand(rng, *shape, dtype=dtype)} if bias else {})}
    node = helper.make_node("LayerNormalization", ["x", *params], list(outputs), axis=axis, epsilon=1e-3)
    feeds = {"x": x, **{k: v for k, v in params.items() if k in dynamic}}
    inits = {k: v for k, v in params.items() if k not in dynamic}
    return make_model([node], feeds, list(outputs), inits, opset=17), feeds


@pytest.fixture
def picked(monkeypatch):
    """The LayerNormalizations that took the compiled rows."""
    return spy_compiled(monkeypatch, norm_ops.LayerNormalization)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
@pytest.mark.parametrize("bias", [True, False])
def test_rows_against_onnxruntime(rng, picked, axis, bias):
    check(*_model(rng, (2, 5, 7), axis, bias, outputs=("y", "mean", "inv")), **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize(
    "xs,axis", [((1, 40, 120), -1), ((3, 1, 1), -1), ((2, 3, 1027), -1), ((600, 512), -1), ((2, 3, 4, 5), 1)]
)
def test_shapes(rng, picked, xs, axis):
    """PP-OCR rec's rows, single values, long rows, rows split over the pool, a 4-D input."""
    check(*_model(rng, xs, axis, outputs=("y", "mean")), **ACCUMULATE)
    assert len(picked) == 1


def test_data_far_from_zero(rng, picked):
    check(*_model(rng, (4, 256), -1, offset=1000.0, outputs=("y", "mean", "inv")), **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize("dynamic", [("s",), ("s", "b")])
def test_scale_and_bias_at_run_time(rng, picked, dynamic):
    check(*_model(rng, (2, 5, 7), -1, dynamic=dynamic), **ACCUMULATE)
    assert len(picked) == 1


def test_broadcast_scale_and_float16_keep_numpy(rng, picked):
    check(*_model(rng, (2, 5, 6), 1, scale_shape=(6,)), **ACCUMULATE)
    check(*_model(rng, (3, 4, 6), -1, dtype=np.float16), **HALF)
    assert picked == []


def test_numpy_fallback_where_numba_cannot_compile(rng, monkeypatch, picked):
    monkeypatch.setattr(norm_ops, "layer_norm_kernel", lambda: None)
    for axis in (-1, 1):
        check(*_model(rng, (2, 5, 7), axis, outputs=("y", "mean", "inv")), **ACCUMULATE)
    assert picked == []

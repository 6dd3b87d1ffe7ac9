"""The compiled (numba) 2-D pooling kernel of the CPU backend against onnxruntime: MaxPool
(``EXACT``) and AveragePool (``ACCUMULATE``, with and without ``count_include_pad``) over
each vectorised form (stride 1 and 2, kernel widths 2, 3, 5) and the loops per tap (other
widths, strides, dilations), pads, ceil_mode, auto_pad, odd sizes, N=2, maps smaller than
the window, NaN and infinities (a plane with NaN takes the loops per tap), large enough to
be split over the pool; the split global pools; that the op picks the kernel (and not with
``Indices`` or on other ranks); and the NumPy fallback where numba cannot compile."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backends.cpu.ops import pool as pool_ops
from mnnpy.converter import convert
from tests.backend_compare import spy_compiled
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand

WINDOWS = [
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},  # ResNet-18
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]},  # YOLOv8's SPPF
    {"kernel_shape": [3, 3], "pads": [0, 1, 2, 1]},
    {"kernel_shape": [3, 5], "strides": [1, 2], "pads": [1, 2, 0, 1]},  # width 5 stride 2: per tap
    {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "strides": [2, 3]},
    {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "dilations": [2, 1], "pads": [2, 1, 2, 1]},
    {"kernel_shape": [3, 3], "dilations": [1, 2], "strides": [2, 2], "pads": [2, 2, 2, 2]},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [1, 7], "strides": [1, 1]},
]
SHAPES = [(2, 3, 13, 11), (1, 2, 3, 7), (1, 4, 31, 7)]


def _model(rng, op, shape, attrs, special=False):
    x = rand(rng, *shape)
    if special:
        x.flat[[0, 5, 40, 77]] = [np.nan, np.inf, -np.inf, np.nan]
    return make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=19), {"x": x}


@pytest.fixture
def picked(monkeypatch):
    """The pools that took the compiled kernel."""
    return spy_compiled(monkeypatch, pool_ops.Pool)


@pytest.mark.parametrize(("w", "shape"), list(itertools.product(range(len(WINDOWS)), range(len(SHAPES)))))
def test_max_pool_against_onnxruntime(rng, picked, w, shape):
    attrs = WINDOWS[w]
    if attrs.get("ceil_mode") and SHAPES[shape][2] < 3:
        pytest.skip("a window starting in the end padding (onnxruntime refuses it)")
    check(*_model(rng, "MaxPool", SHAPES[shape], attrs), **EXACT)
    assert len(picked) == 1


@pytest.mark.parametrize(("w", "shape", "include"), list(itertools.product(range(len(WINDOWS)), range(len(SHAPES)), (0, 1))))
def test_average_pool_against_onnxruntime(rng, picked, w, shape, include):
    attrs = WINDOWS[w]
    if "dilations" in attrs or (attrs.get("ceil_mode") and SHAPES[shape][2] < 3):
        pytest.skip("onnxruntime's AveragePool takes no dilations")
    check(*_model(rng, "AveragePool", SHAPES[shape], {**attrs, "count_include_pad": include}), **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("w", [0, 2, 4])
def test_nan_and_infinities_as_the_numpy_path(rng, monkeypatch, picked, op, w):
    """NaN propagates through MaxPool as in the NumPy path (``np.maximum``; the GPU backends
    are checked against it; onnxruntime skips NaN), infinities as in onnxruntime."""
    model, feeds = _model(rng, op, (2, 3, 13, 11), WINDOWS[w], special=True)
    compiled = _run(model, feeds)
    assert len(picked) == 1
    monkeypatch.setattr(pool_ops, "pool_kernel", lambda: None)
    np.testing.assert_allclose(compiled, _run(model, feeds), **(EXACT if op == "MaxPool" else ACCUMULATE))
    assert np.isnan(compiled).any() and np.isinf(compiled).any()


def _run(model, feeds):
    return next(iter(mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2).run(feeds).values()))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_large_split_over_the_pool(rng, picked, op):
    model, feeds = _model(rng, op, (1, 64, 57, 57), WINDOWS[0])
    check(model, feeds, **(EXACT if op == "MaxPool" else ACCUMULATE))
    assert len(picked) == 1


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 96, 80, 80), (1, 3, 5, 7), (2, 5, 9), (1, 1, 1, 1)])
def test_global_pools(rng, monkeypatch, op, shape, compiled):
    """Compiled row means (float64 sums) or NumPy, split over the pool from ``GLOBAL_PARALLEL`` inputs."""
    if not compiled:
        monkeypatch.setattr(pool_ops, "rows_mean_kernel", lambda: None)
    x = rand(rng, *shape, scale=3.0) + 1.0
    check(make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"]), {"x": x}, **ACCUMULATE)


def test_indices_and_other_ranks_keep_numpy(rng, picked):
    x = rand(rng, 2, 3, 13, 11)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **WINDOWS[0])
    check(make_model([node], {"x": x}, ["y", "i"], opset=19), {"x": x}, **EXACT)
    check(*_model(rng, "MaxPool", (2, 3, 13), {"kernel_shape": [3], "strides": [2]}), **EXACT)
    assert picked == []


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_numpy_fallback_where_numba_cannot_compile(rng, monkeypatch, picked, op):
    monkeypatch.setattr(pool_ops, "pool_kernel", lambda: None)
    for attrs in WINDOWS[:3]:
        check(*_model(rng, op, (2, 3, 13, 11), attrs), **(EXACT if op == "MaxPool" else ACCUMULATE))
    assert picked == []

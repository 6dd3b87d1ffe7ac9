"""OpenCL pooling (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool) against the CPU backend.

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


def _pool(rng, op, shape, attrs, opset=17, special=False, **kw):
    x = rand(rng, *shape)
    if special:
        x.flat[[0, 5, 40, 77]] = [np.nan, np.inf, -np.inf, np.nan]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


WINDOWS = [
    {"kernel_shape": [3, 3]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [2, 3], "strides": [2, 1], "pads": [1, 0, 0, 2]},  # asymmetric pads
    {"kernel_shape": [3, 2], "strides": [2, 3], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 2], "strides": [3, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [5, 4], "strides": [1, 2], "auto_pad": "VALID"},
    {"kernel_shape": [1, 1], "strides": [2, 2]},
    {"kernel_shape": [13, 17]},  # one window = the whole map: row reduction
]
IDS = [f"w{i}" for i in range(len(WINDOWS))]


@pytest.mark.parametrize("attrs", WINDOWS, ids=IDS)
def test_maxpool(rng, attrs):
    _pool(rng, "MaxPool", (2, 3, 13, 17), attrs)


@pytest.mark.parametrize("attrs", WINDOWS, ids=IDS)
@pytest.mark.parametrize("include", [0, 1])
def test_averagepool(rng, attrs, include):
    _pool(rng, "AveragePool", (2, 3, 13, 17), {**attrs, "count_include_pad": include})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_dilations(rng, op):
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [1, 2], "pads": [2, 1, 1, 3]}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    _pool(rng, op, (1, 5, 19, 23), attrs, opset=19)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_1d(rng, op):
    _pool(rng, op, (2, 5, 31), {"kernel_shape": [3], "strides": [2], "pads": [1, 2]})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_nan_inf(rng, op):
    _pool(rng, op, (1, 2, 9, 11), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, special=True)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7, 13), (1, 8, 160, 160), (1, 3, 31), (2, 3, 5, 3, 7), (1, 1, 1, 1)])
def test_global_pool(rng, op, shape):
    _pool(rng, op, shape, {})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_nan_inf(rng, op):
    _pool(rng, op, (2, 3, 9, 11), {}, special=True)


def test_global_pool_uses_work_group_reduction(rng):
    """A 160x160 map: one work-group of many items per (n, c) row, not one item looping."""
    s = _pool(rng, "GlobalAveragePool", (1, 4, 160, 160), {})
    (exe,) = s._plan.executions.values()
    (launch,) = exe.launches
    assert launch.local[0] >= 32 and launch.work[0] == launch.local[0]


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_split_rows(rng, op):
    """Few very long rows: two passes (fp32 partial results per chunk, then per row)."""
    s = _pool(rng, op, (1, 2, 301, 299), {})
    (exe,) = s._plan.executions.values()
    assert len(exe.launches) == 2


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 29, 31), (1, 2, 301, 299)])
def test_fp16(rng, op, shape):
    attrs = {} if op.startswith("Global") else {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    s = _pool(rng, op, shape, attrs, tol=HALF, precision="low")
    assert s.backends[0].storage == np.float16


def test_maxpool_3d_falls_back(rng):
    s = _pool(rng, "MaxPool", (1, 2, 5, 6, 7), {"kernel_shape": [2, 2, 2]}, on_device=False)
    assert "MaxPool with 3 spatial dims (OpenCL pools 1-D and 2-D)" in s.partitions()


def test_maxpool_indices_fall_back(rng):
    x = rand(rng, 1, 3, 9, 11)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2])
    s = compare(make_model([node], {"x": x}, ["y", "i"]), {"x": x}, ACCUMULATE, on_device=False)
    assert "MaxPool Indices output requested (OpenCL computes Y only)" in s.partitions()


def test_global_average_pool_of_nothing_falls_back(rng):
    s = _pool(rng, "GlobalAveragePool", (1, 3, 0, 4), {}, on_device=False)
    assert "GlobalAveragePool over empty spatial dims" in s.partitions()

"""Vulkan pooling (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool) against the CPU backend.

Skipped, with the reason, where Vulkan is unusable (CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)


def _compare(model, feeds, tol=ACCUMULATE, on_device=True, **options):
    return compare(model, feeds, tol, on_device, backend="vulkan", **options)


def _pool(rng, op, shape, attrs, opset=17, special=False, **kw):
    x = rand(rng, *shape)
    if special:
        x.flat[[0, 5, 40, 77]] = [np.nan, np.inf, -np.inf, np.nan]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)
    return _compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


def _only_execution(session):
    (exe,) = session._plan.executions.values()
    return exe


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
    {"kernel_shape": [2, 2], "strides": [2, 2]},  # ResNet/PP-OCR style
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


def test_whole_map_window_is_a_row_reduction(rng):
    s = _pool(rng, "AveragePool", (2, 3, 13, 17), {"kernel_shape": [13, 17]})
    exe = _only_execution(s)
    assert exe.passes == 1 and exe.group[1] >= 32  # a work group of many invocations per (n, c) row


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_dilations(rng, op):
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [1, 2], "pads": [2, 1, 1, 3]}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    _pool(rng, op, (1, 5, 19, 23), attrs, opset=19)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("ceil", [0, 1])
def test_pool_1d(rng, op, ceil):
    _pool(rng, op, (2, 5, 31), {"kernel_shape": [3], "strides": [2], "pads": [1, 2], "ceil_mode": ceil})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_3d(rng, op):
    attrs = {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 1]}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    _pool(rng, op, (1, 2, 5, 7, 6), attrs)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_nan_inf(rng, op):
    _pool(rng, op, (1, 2, 9, 11), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, special=True)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 5, 2, 3), (1, 67, 9, 9)])
def test_odd_sizes(rng, op, shape):
    """A single element, maps smaller than the window (padding only windows), a channel count past a work group."""
    _pool(rng, op, shape, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 7, 13), (1, 8, 40, 40), (1, 3, 31), (2, 3, 5, 3, 7), (1, 1, 1, 1), (3, 67, 2, 2)])
def test_global_pool(rng, op, shape):
    _pool(rng, op, shape, {})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_nan_inf(rng, op):
    _pool(rng, op, (2, 3, 9, 11), {}, special=True)


def test_global_pool_uses_work_group_reduction(rng):
    """A 40x40 map: one work group of many invocations per (n, c) row, not one invocation looping."""
    s = _pool(rng, "GlobalAveragePool", (1, 4, 40, 40), {})
    exe = _only_execution(s)
    lp, lr, _ = exe.group
    assert exe.passes == 1 and lr >= 32


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_split_rows(rng, op):
    """Few very long rows: two passes (float32 partial results per chunk, then per row)."""
    s = _pool(rng, op, (1, 2, 101, 99), {})
    assert _only_execution(s).passes == 2


def test_maxpool_4d_falls_back(rng):
    s = _pool(rng, "MaxPool", (1, 1, 3, 3, 3, 3), {"kernel_shape": [2, 2, 2, 2]}, on_device=False)
    assert "MaxPool with 4 spatial dims (Vulkan pools 1-D to 3-D)" in s.partitions()


def test_maxpool_indices_fall_back(rng):
    x = rand(rng, 1, 3, 9, 11)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2])
    s = _compare(make_model([node], {"x": x}, ["y", "i"]), {"x": x}, on_device=False)
    assert "MaxPool Indices output requested (Vulkan computes Y only)" in s.partitions()


def test_global_average_pool_of_nothing_falls_back(rng):
    s = _pool(rng, "GlobalAveragePool", (1, 3, 0, 4), {}, on_device=False)
    assert "GlobalAveragePool over empty spatial dims [0, 4]" in s.partitions()


def test_pool_chain(rng):
    """MaxPool -> AveragePool -> GlobalAveragePool in one partition (barriers between them)."""
    x = rand(rng, 2, 5, 23, 19)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["b"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["b"], ["y"]),
    ]
    _compare(make_model(nodes, {"x": x}, ["y"]), {"x": x})

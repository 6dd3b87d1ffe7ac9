"""Vulkan-only pooling checks: the whole-map window as a row reduction, 3-D pooling, odd sizes,
a chain of pools in one partition. What both GPU backends do is in tests/test_gpu_pool.py.

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


def test_whole_map_window_is_a_row_reduction(rng):
    s = _pool(rng, "AveragePool", (2, 3, 13, 17), {"kernel_shape": [13, 17]})
    exe = _only_execution(s)
    assert exe.passes == 1 and exe.group[1] >= 32  # a work group of many invocations per (n, c) row


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_3d(rng, op):
    attrs = {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 1]}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    _pool(rng, op, (1, 2, 5, 7, 6), attrs)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 5, 2, 3), (1, 67, 9, 9)])
def test_odd_sizes(rng, op, shape):
    """A single element, maps smaller than the window (padding only windows), a channel count past a work group."""
    _pool(rng, op, shape, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1})


def test_pool_chain(rng):
    """MaxPool -> AveragePool -> GlobalAveragePool in one partition (barriers between them)."""
    x = rand(rng, 2, 5, 23, 19)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["b"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["b"], ["y"]),
    ]
    _compare(make_model(nodes, {"x": x}, ["y"]), {"x": x})

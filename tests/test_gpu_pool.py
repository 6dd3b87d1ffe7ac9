"""Pooling (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool) on every GPU backend against
the CPU backend: windows, pads, ceil mode, dilations, 1-D, NaN/inf, work-group and split row
reductions, fallbacks with their reasons. Each backend is skipped, with the reason, where it is
unusable (CI: PoCL, lavapipe). Backend-only checks live in tests/test_opencl_pool.py and
tests/test_vulkan_pool.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import ACCUMULATE, GPU_API, compare, gpu_backends, gpu_cases
from tests.backend_compare import only_execution as _only_execution
from tests.backend_compare import passes as _passes
from tests.oracle import make_model, rand


def _pool(rng, backend, op, shape, attrs, opset=17, special=False, **kw):
    x = rand(rng, *shape)
    if special:
        x.flat[[0, 5, 40, 77]] = [np.nan, np.inf, -np.inf, np.nan]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), backend=backend, **kw)


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
@pytest.mark.parametrize("backend", gpu_backends())
def test_maxpool(rng, backend, attrs):
    _pool(rng, backend, "MaxPool", (2, 3, 13, 17), attrs)


@pytest.mark.parametrize("attrs", WINDOWS, ids=IDS)
@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("backend", gpu_backends())
def test_averagepool(rng, backend, attrs, include):
    _pool(rng, backend, "AveragePool", (2, 3, 13, 17), {**attrs, "count_include_pad": include})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_dilations(rng, backend, op):
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [1, 2], "pads": [2, 1, 1, 3]}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    _pool(rng, backend, op, (1, 5, 19, 23), attrs, opset=19)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("ceil", [0, 1])
@pytest.mark.parametrize("backend", gpu_backends())
def test_pool_1d(rng, backend, op, ceil):
    _pool(rng, backend, op, (2, 5, 31), {"kernel_shape": [3], "strides": [2], "pads": [1, 2], "ceil_mode": ceil})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_nan_inf(rng, backend, op):
    _pool(rng, backend, op, (1, 2, 9, 11), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, special=True)


GLOBAL_SHAPES = {
    "opencl": [(2, 3, 7, 13), (1, 8, 160, 160), (1, 3, 31), (2, 3, 5, 3, 7), (1, 1, 1, 1)],
    "vulkan": [(2, 3, 7, 13), (1, 8, 40, 40), (1, 3, 31), (2, 3, 5, 3, 7), (1, 1, 1, 1), (3, 67, 2, 2)],
}


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("backend,shape", gpu_cases({b: [(s,) for s in v] for b, v in GLOBAL_SHAPES.items()}, ids=str))
def test_global_pool(rng, backend, shape, op):
    _pool(rng, backend, op, shape, {})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_global_pool_nan_inf(rng, backend, op):
    _pool(rng, backend, op, (2, 3, 9, 11), {}, special=True)


ONE_GROUP_PER_ROW = {"opencl": (1, 4, 160, 160), "vulkan": (1, 4, 40, 40)}


@pytest.mark.parametrize("backend", gpu_backends())
def test_global_pool_uses_work_group_reduction(rng, backend):
    """A 160x160 (OpenCL) or 40x40 (Vulkan) map: one work group of many items per (n, c) row,
    not one item looping."""
    s = _pool(rng, backend, "GlobalAveragePool", ONE_GROUP_PER_ROW[backend], {})
    exe = _only_execution(s)
    if backend == "opencl":
        (launch,) = exe.launches
        assert launch.local[0] >= 32 and launch.work[0] == launch.local[0]
    else:
        lp, lr, _ = exe.group
        assert exe.passes == 1 and lr >= 32


SPLIT_ROWS = {"opencl": (1, 2, 301, 299), "vulkan": (1, 2, 101, 99)}


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_global_pool_split_rows(rng, backend, op):
    """Few very long rows: two passes (float32 partial results per chunk, then per row)."""
    s = _pool(rng, backend, op, SPLIT_ROWS[backend], {})
    assert _passes(s, backend) == 2


TOO_MANY_SPATIAL_DIMS = {
    "opencl": [((1, 2, 5, 6, 7), [2, 2, 2], "MaxPool with 3 spatial dims (OpenCL pools 1-D and 2-D)")],
    "vulkan": [((1, 1, 3, 3, 3, 3), [2, 2, 2, 2], "MaxPool with 4 spatial dims (Vulkan pools 1-D to 3-D)")],
}


@pytest.mark.parametrize("backend,shape,kernel,reason", gpu_cases(TOO_MANY_SPATIAL_DIMS, ids=lambda c: f"{len(c[1])}d"))
def test_maxpool_too_many_spatial_dims_falls_back(rng, backend, shape, kernel, reason):
    s = _pool(rng, backend, "MaxPool", shape, {"kernel_shape": kernel}, on_device=False)
    assert reason in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_maxpool_indices_fall_back(rng, backend):
    x = rand(rng, 1, 3, 9, 11)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2])
    s = compare(make_model([node], {"x": x}, ["y", "i"]), {"x": x}, ACCUMULATE, on_device=False, backend=backend)
    assert f"MaxPool Indices output requested ({GPU_API[backend]} computes Y only)" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_global_average_pool_of_nothing_falls_back(rng, backend):
    s = _pool(rng, backend, "GlobalAveragePool", (1, 3, 0, 4), {}, on_device=False)
    assert "GlobalAveragePool over empty spatial dims [0, 4]" in s.partitions()

"""Pooling on every backend: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (and, on the
CPU, MaxPool's Indices and LpPool). The CPU backend against onnxruntime, each GPU backend
against the CPU (``tests/backend_compare.py``), within ``ACCUMULATE`` (the CPU's MaxPool and
GlobalMaxPool: ``EXACT``; fp16 storage: ``HALF``). Tests without a ``backend`` parameter run
the CPU backend against onnxruntime.

Every backend: windows, pads, ceil mode, auto_pad, 1-D and 3-D, global pools. GPU (OpenCL,
Vulkan; skipped with the reason where the driver is missing): dilations, NaN/inf, work-group
and split row reductions, odd sizes, a chain of pools, fp16 storage, and the fallbacks with
their reasons.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import API, GPUS, backend_cases, check_backend, gpu_backends, only_execution, passes, storage_dtype
from tests.oracle import ACCUMULATE, EXACT, HALF, check, make_model, rand, run_ort


def _pool(rng, backend, op, shape, attrs, tol=ACCUMULATE, opset=17, special=False, outs=("y",), **kw):
    """``x -> op(attrs) -> outs`` on seeded data (``special``: NaN and +-inf at a few places),
    checked on ``backend`` within ``tol``; returns the session."""
    x = rand(rng, *shape)
    if special:
        x.flat[[0, 5, 40, 77]] = [np.nan, np.inf, -np.inf, np.nan]
    model = make_model([helper.make_node(op, ["x"], list(outs), **attrs)], {"x": x}, list(outs), opset=opset)
    return check_backend(model, {"x": x}, tol, backend, **kw)


CPU_WINDOWS = [
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1], "strides": [2, 3]},
    {"kernel_shape": [3, 3], "pads": [1, 0, 1, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [3, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 3], "dilations": [2, 1], "pads": [2, 1, 2, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"},
]
GPU_WINDOWS = [
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
CPU_POOL = ((2, 3, 13, 11), 19)  # (x shape, opset) of the CPU cases
GPU_POOL = ((2, 3, 13, 17), 17)


def _windows(cpu_windows, cpu_tol, extra=({},)):
    """Cases ``(x shape, attrs, opset, tol)`` per backend, each window with each ``extra``
    attribute dict: ``cpu_windows`` on the CPU (``CPU_POOL``, ``cpu_tol``), ``GPU_WINDOWS`` on
    each GPU (``GPU_POOL``, ``ACCUMULATE``)."""
    cpu = [(CPU_POOL[0], {**w, **e}, CPU_POOL[1], cpu_tol) for e in extra for w in cpu_windows]
    gpu = [(GPU_POOL[0], {**w, **e}, GPU_POOL[1], ACCUMULATE) for e in extra for w in GPU_WINDOWS]
    return {"cpu": cpu, "opencl": gpu, "vulkan": gpu}


MAX = _windows(CPU_WINDOWS, EXACT)
INCLUDE = [{"count_include_pad": 0}, {"count_include_pad": 1}]
AVERAGE = _windows([w for w in CPU_WINDOWS if "dilations" not in w], ACCUMULATE, extra=INCLUDE)


@pytest.mark.parametrize("backend,shape,attrs,opset,tol", backend_cases(MAX))
def test_max_pool(rng, backend, shape, attrs, opset, tol):
    _pool(rng, backend, "MaxPool", shape, attrs, tol, opset)


@pytest.mark.parametrize("backend,shape,attrs,opset,tol", backend_cases(AVERAGE))
def test_average_pool(rng, backend, shape, attrs, opset, tol):
    _pool(rng, backend, "AveragePool", shape, attrs, tol, opset)


@pytest.mark.parametrize("attrs", CPU_WINDOWS[:5])
@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(rng, attrs, storage_order):
    _pool(rng, "cpu", "MaxPool", CPU_POOL[0], {**attrs, "storage_order": storage_order}, EXACT, 19, outs=("y", "i"))


@pytest.mark.parametrize("backend", gpu_backends())
def test_maxpool_indices_fall_back(rng, backend):
    s = _pool(
        rng, backend, "MaxPool", (1, 3, 9, 11), {"kernel_shape": [3, 3], "strides": [2, 2]}, outs=("y", "i"), on_device=False
    )
    assert f"MaxPool Indices output requested ({API[backend]} computes Y only)" in s.partitions()


def test_max_pool_large_parallel(rng):
    _pool(rng, "cpu", "MaxPool", (1, 64, 57, 57), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}, EXACT, 19)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_dilations(rng, backend, op):
    attrs = {"kernel_shape": [3, 2], "dilations": [2, 3], "strides": [1, 2], "pads": [2, 1, 1, 3]}
    if op == "AveragePool":
        attrs["count_include_pad"] = 1
    _pool(rng, backend, op, (1, 5, 19, 23), attrs, opset=19)


WINDOW_1D = {"kernel_shape": [3], "strides": [2], "pads": [1, 2]}
# (op, x shape, attrs, opset)
POOL_1D_3D = {
    "cpu": [
        (op, shape, attrs, 19)
        for attrs, shape in [
            ({**WINDOW_1D, "ceil_mode": 1}, (2, 3, 13)),
            ({"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1]}, (1, 2, 5, 7, 9)),
        ]
        for op in ("MaxPool", "AveragePool")
    ],
    **{
        b: [(op, (2, 5, 31), {**WINDOW_1D, "ceil_mode": c}, 17) for c in (0, 1) for op in ("MaxPool", "AveragePool")]
        for b in GPUS
    },
}
WINDOW_3D = {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 1]}
POOL_1D_3D["vulkan"] += [
    ("MaxPool", (1, 2, 5, 7, 6), WINDOW_3D, 17),
    ("AveragePool", (1, 2, 5, 7, 6), {**WINDOW_3D, "count_include_pad": 1}, 17),
]


@pytest.mark.parametrize(
    "backend,op,shape,attrs,opset", backend_cases(POOL_1D_3D, ids=lambda c: f"{c[0]}-{len(c[1]) - 2}d-{c[2]}")
)
def test_pool_1d_3d(rng, backend, op, shape, attrs, opset):
    _pool(rng, backend, op, shape, attrs, opset=opset)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_nan_inf(rng, backend, op):
    _pool(rng, backend, op, (1, 2, 9, 11), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, special=True)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (3, 5, 2, 3), (1, 67, 9, 9)])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_odd_sizes(rng, backend, op, shape):
    """A single element, maps smaller than the window (padding only windows), a channel count past a work group."""
    _pool(rng, backend, op, shape, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1})


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_whole_map_window_is_a_row_reduction(rng, backend):
    s = _pool(rng, backend, "AveragePool", (2, 3, 13, 17), {"kernel_shape": [13, 17]})
    exe = only_execution(s)
    assert exe.passes == 1 and exe.group[1] >= 32  # a work group of many invocations per (n, c) row


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_pool_chain(rng, backend):
    """MaxPool -> AveragePool -> GlobalAveragePool in one partition (barriers between them)."""
    x = rand(rng, 2, 5, 23, 19)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["a"], ["b"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("GlobalAveragePool", ["b"], ["y"]),
    ]
    check_backend(make_model(nodes, {"x": x}, ["y"]), {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_maxpool_too_many_spatial_dims_falls_back(rng, backend):
    shape, kernel, reason = {
        "opencl": ((1, 2, 5, 6, 7), [2, 2, 2], "MaxPool with 3 spatial dims (OpenCL pools 1-D and 2-D)"),
        "vulkan": ((1, 1, 3, 3, 3, 3), [2, 2, 2, 2], "MaxPool with 4 spatial dims (Vulkan pools 1-D to 3-D)"),
    }[backend]
    s = _pool(rng, backend, "MaxPool", shape, {"kernel_shape": kernel}, on_device=False)
    assert reason in s.partitions()


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "ceil_mode": 1}),
        ("GlobalAveragePool", {}),
    ],
)
def test_pool_second_run_new_shape(rng, op, attrs):
    x1 = rand(rng, 1, 3, 13, 11)
    m = make_model(
        [helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x1}, ["y"], opset=19, input_shapes={"x": ["N", "C", "H", "W"]}
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 5, 8, 17)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)


# -- global pools ----------------------------------------------------------------------------

GLOBAL_SHAPES = {
    "opencl": [(2, 3, 7, 13), (1, 8, 160, 160), (1, 3, 31), (2, 3, 5, 3, 7), (1, 1, 1, 1)],
    "vulkan": [(2, 3, 7, 13), (1, 8, 40, 40), (1, 3, 31), (2, 3, 5, 3, 7), (1, 1, 1, 1), (3, 67, 2, 2)],
}
# (op, x shape, opset, tol)
GLOBAL = {
    "cpu": [("GlobalAveragePool", s, 19, ACCUMULATE) for s in [(2, 5, 13, 7), (1, 3, 127), (1, 2, 3, 5, 7)]]
    + [("GlobalMaxPool", s, 13, EXACT) for s in [(2, 3, 7), (1, 5, 4, 3), (1, 2, 3, 2, 4)]],
    **{
        b: [(op, s, 17, ACCUMULATE) for op in ("GlobalAveragePool", "GlobalMaxPool") for s in v] for b, v in GLOBAL_SHAPES.items()
    },
}


@pytest.mark.parametrize("backend,op,shape,opset,tol", backend_cases(GLOBAL, ids=lambda c: f"{c[0]}-{c[1]}"))
def test_global_pool(rng, backend, op, shape, opset, tol):
    _pool(rng, backend, op, shape, {}, tol, opset)


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
    exe = only_execution(s)
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
    assert passes(s, backend) == 2


@pytest.mark.parametrize("backend", gpu_backends())
def test_global_average_pool_of_nothing_falls_back(rng, backend):
    s = _pool(rng, backend, "GlobalAveragePool", (1, 3, 0, 4), {}, on_device=False)
    assert "GlobalAveragePool over empty spatial dims [0, 4]" in s.partitions()


# -- fp16 storage (precision="low") ----------------------------------------------------------

WINDOW_3X3 = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
OPS = ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"]
# (op, x shape, attrs)
FP16 = {
    "opencl": [(op, s, {} if op.startswith("Global") else WINDOW_3X3) for s in [(2, 3, 29, 31), (1, 2, 301, 299)] for op in OPS],
    "vulkan": [
        ("MaxPool", (2, 3, 9, 11), WINDOW_3X3),
        ("AveragePool", (2, 3, 9, 11), {"kernel_shape": [3, 2], "count_include_pad": 1, "pads": [1, 0, 1, 0]}),
        ("GlobalAveragePool", (2, 3, 9, 11), {}),
        ("GlobalMaxPool", (2, 3, 9, 11), {}),
    ],
}


@pytest.mark.parametrize("backend,op,shape,attrs", backend_cases(FP16, ids=lambda c: f"{c[0]}-{c[1]}", precision="low"))
def test_pool_fp16(rng, backend, op, shape, attrs):
    """Activations stored as fp16, the window arithmetic in fp32: within HALF of the CPU."""
    s = _pool(rng, backend, op, shape, attrs, HALF, precision="low")
    assert storage_dtype(s) == np.float16


# -- LpPool (CPU) ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs",
    [
        dict(kernel_shape=[3]),
        dict(kernel_shape=[2, 3], p=1),
        dict(kernel_shape=[3, 3], pads=[1, 0, 2, 1], p=3),
        dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER"),
        dict(kernel_shape=[3, 2], strides=[2, 1], auto_pad="SAME_LOWER"),
        dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="VALID"),
        dict(kernel_shape=[2, 2], dilations=[2, 1]),
        dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    ],
)
def test_lp_pool(rng, attrs):
    nd = len(attrs["kernel_shape"])
    x = rand(rng, 2, 3, *[9, 8][:nd]) if nd == 2 else rand(rng, 2, 3, 11)
    opset = 18 if "dilations" in attrs or "ceil_mode" in attrs else 11
    check(make_model([helper.make_node("LpPool", ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset), {"x": x}, **ACCUMULATE)

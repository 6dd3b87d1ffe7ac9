"""Reductions, Softmax/LogSoftmax and LayerNormalization on every GPU backend against the CPU
backend (seeded random inputs, odd sizes, long and split rows, NaN/inf, fallbacks with their
reasons). Each backend is skipped, with the reason, where it is unusable (CI: PoCL, lavapipe).
Backend-only checks live in tests/test_opencl_reduce.py and tests/test_vulkan_reduce.py."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from onnx import helper

from mnnpy.ops.reductions import REDUCTIONS
from tests.backend_compare import ACCUMULATE, GPU_API, compare, gpu_backends, gpu_cases
from tests.backend_compare import only_execution as _only_execution
from tests.backend_compare import passes as _passes
from tests.oracle import make_model, rand

OPS = ["ReduceMean", *REDUCTIONS]
SHAPE = (3, 5, 7, 13)


def _module(backend):
    """The backend's ``reduce`` module (``collapse_axes``, ``group_shape``, ``split_count``, limits)."""
    return importlib.import_module(f"mnnpy.backends.{backend}.reduce")


def _data(rng, op, shape, scale=1.0):
    x = rand(rng, *shape, scale=scale)
    if op == "ReduceLogSum":
        x = np.abs(x) + np.float32(0.25)  # log of a positive sum
    if op == "ReduceProd":
        x = (np.float32(1) + x * np.float32(0.05)).astype(np.float32)  # products stay near 1
    return x


def _reduce(rng, backend, op, shape, axes, keepdims=1, noop=0, x=None, **kw):
    x = _data(rng, op, shape) if x is None else x
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    node = helper.make_node(op, ["x", "axes" if axes is not None else ""], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    model = make_model([node], {"x": x}, ["y"], inits, opset=18)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), backend=backend, **kw)


AXES = [[1], [2, 3], [0], [-1], [0, 1], [1, 2], None]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", AXES, ids=[str(a) for a in AXES])
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce(rng, backend, op, axes):
    _reduce(rng, backend, op, SHAPE, axes, keepdims=int(axes is None or len(axes) != 2))


BOUNDED = [op for op in OPS if op != "ReduceProd"]  # a product of thousands of values under- or overflows

# rows longer than a work group (inner == 1) and a strided reduction (inner > 1)
LONG_ROWS = {
    "opencl": [((2, 3001), [1]), ((1031, 6), [0])],  # OpenCL: a full work-group
    "vulkan": [((2, 1001), [1]), ((331, 6), [0])],
}


@pytest.mark.parametrize("op", BOUNDED)
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_long_rows(rng, backend, op):
    """Rows long enough for a full work group (inner == 1) and a strided reduction (inner > 1)."""
    for shape, axes in LONG_ROWS[backend]:
        _reduce(rng, backend, op, shape, axes)


SPLITS = {
    "opencl": [((1, 3, 211, 199), None, "row"), ((70001, 3), [0], "column")],
    "vulkan": [((1, 2, 73, 71), None, "row"), ((9001, 3), [0], "column")],
}


@pytest.mark.parametrize("op", BOUNDED)
@pytest.mark.parametrize("backend,shape,axes,kind", gpu_cases(SPLITS, ids=lambda c: c[2]))
def test_reduce_split(rng, backend, shape, axes, kind, op):
    """Few (very) long rows: two passes through float32 partial results (LogSumExp: one pass)."""
    s = _reduce(rng, backend, op, shape, axes, x=_data(rng, op, shape, scale=0.5))
    assert _passes(s, backend) == (1 if op == "ReduceLogSumExp" else 2)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_noop_with_empty_axes(rng, backend, op):
    """Empty axes with noop_with_empty_axes: the elementwise part only (rows of one)."""
    _reduce(rng, backend, op, SHAPE, [], noop=1)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_empty_set(rng, backend, op):
    """An empty reduced axis gives the identity (0, 1, -inf, inf; the mean of nothing is 0)."""
    _reduce(rng, backend, op, (2, 0, 5), [1], x=np.zeros((2, 0, 5), np.float32))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_nan_inf(rng, backend, op):
    x = _data(rng, op, (4, 6, 9))
    x[0, 1, 2], x[1, 2, 3], x[2, 0, 0], x[3] = np.nan, np.inf, -np.inf, np.inf
    _reduce(rng, backend, op, x.shape, [2], x=x)
    _reduce(rng, backend, op, x.shape, [1], x=x)  # strided


@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_size_one_axes_merge(rng, backend):
    """Size-1 dims between reduced axes do not break the (outer, red, inner) view."""
    _reduce(rng, backend, "ReduceSum", (3, 1, 5, 1, 7), [0, 2])


@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_axes_not_contiguous_fall_back(rng, backend):
    s = _reduce(rng, backend, "ReduceMean", SHAPE, [1, 3], on_device=False)
    assert "ReduceMean axes [1, 3] of shape [3, 5, 7, 13] are not one contiguous block" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_axes_as_input(rng, backend):
    """``axes`` fed as a graph input: its value is known at resize, so the GPU runs it."""
    x, axes = rand(rng, *SHAPE), np.array([2, 3], np.int64)
    model = make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])], {"x": x, "axes": axes}, ["y"], opset=18)
    compare(model, {"x": x, "axes": axes}, ACCUMULATE, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_collapse_axes(backend):
    from mnnpy.backends.gpu.reduce_axes import collapse_axes  # both backends' (outer, red, inner) view
    assert collapse_axes((3, 5, 7, 13), (1, 2)) == (3, 35, 13)
    assert collapse_axes((3, 1, 5, 1, 7), (0, 2)) == (1, 15, 7)
    assert collapse_axes((3, 5, 7), ()) == (105, 1, 1)
    assert collapse_axes((3, 5, 7), (0, 2)) is None


GROUPS = [(1, 25600, 1), (96, 25600, 1), (40, 6625, 1), (1 << 20, 21, 1), (7, 3, 1), (0, 5, 1), (1024, 4096, 1024), (5, 7, 5)]
RUN = {"opencl": 8, "vulkan": 32}  # the shortest run of neighbouring reads (OpenCL: a 32-byte sector; Vulkan: coalesced)


@pytest.mark.parametrize("p,red,inner", GROUPS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_group_shape(backend, p, red, inner):
    m, run = _module(backend), RUN[backend]
    lp, lr = m.group_shape(p, red, inner)
    assert lp * lr <= m.GROUP_MAX and lr & (lr - 1) == 0 and lp & (lp - 1) == 0
    assert lr <= max(red, 1) and lp <= max(p, 1)
    if p <= 100 and red >= 1000:
        assert lr == m.GROUP_MAX  # few long rows: a whole group per row
    if inner == 1 and red >= run:
        assert lr >= run  # a row is read in runs
    if inner >= run and p >= run:
        assert lp >= run  # across p: neighbouring inner positions form the runs


ONE_PASS = {"opencl": (96, 25600), "vulkan": (8, 3000)}  # OpenCL: a 160x160 map per row; Vulkan: short rows


@pytest.mark.parametrize("backend", gpu_backends())
def test_split_count(backend):
    split_count = _module(backend).split_count
    assert split_count(1, 1228800) > 1 and split_count(3, 70001) > 1
    assert split_count(*ONE_PASS[backend]) == 1
    assert split_count(4096, 100000) == 1  # rows enough to fill the device


# -- Softmax / LogSoftmax ----------------------------------------------------------------


def _softmax(rng, backend, op, x, axis, opset=17, **kw):
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": x}, ["y"], opset=opset)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), backend=backend, **kw)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
@pytest.mark.parametrize("backend", gpu_backends())
def test_softmax(rng, backend, op, axis):
    _softmax(rng, backend, op, rand(rng, *SHAPE, scale=3), axis)


SOFTMAX_SHAPES = {
    "opencl": [(1, 40, 6625), (3, 4096), (3, 4097), (2049, 3), (1, 1), (5, 1)],
    "vulkan": [(1, 6625), (3, 4096), (3, 4097), (2, 4099), (513, 3), (1, 1), (5, 1), (3, 0)],
}


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("backend,shape", gpu_cases({b: [(s,) for s in v] for b, v in SOFTMAX_SHAPES.items()}, ids=str))
def test_softmax_shapes(rng, backend, shape, op):
    """PP-OCR's 6625-class rows and rows about the register-cache limit (three passes over x
    beyond it); many short rows (several rows per work group); single elements; empty rows."""
    s = _softmax(rng, backend, op, rand(rng, *shape, scale=4), -1)
    if backend == "opencl":  # Vulkan: tests/test_vulkan_reduce.py::test_register_cache_up_to_the_limit
        m = _module(backend)
        assert ("-D CACHE=" in _only_execution(s).launch.key) == (shape[-1] <= m.CACHE_MAX * m.GROUP_MAX)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_softmax_numerically_stable(rng, backend, op):
    x = rand(rng, 3, 17, scale=3) + np.float32(1000)
    x[1] -= np.float32(3000)
    _softmax(rng, backend, op, x, 1)
    _softmax(rng, backend, op, x.T.copy(), 0)  # strided rows


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_softmax_nan_inf(rng, backend, op):
    x = rand(rng, 5, 11)
    x[0, 3], x[1, 4], x[2, 5], x[3, :] = np.nan, np.inf, -np.inf, -np.inf
    _softmax(rng, backend, op, x, 1)


OPSET11_ON_DEVICE = {"opencl": True, "vulkan": False}  # OpenCL also runs the Flatten and Reshape


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_softmax_opset11(rng, backend, op):
    """Opset < 13 (coerce to 2-D at ``axis``): the converter rewrites it (Flatten -> Softmax ->
    Reshape); the softmax runs on the GPU."""
    x = rand(rng, 2, 3, 5, 7, scale=2)
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=1)], {"x": x}, ["y"], opset=11)
    s = compare(model, {"x": x}, ACCUMULATE, on_device=OPSET11_ON_DEVICE[backend], backend=backend)
    assert f"{op} '" in s.partitions()


# -- LayerNormalization ---------------------------------------------------------------------


def _layernorm(rng, backend, x, axis, scale_shape=None, bias=True, dynamic=(), outputs=("y",), **kw):
    """``dynamic``: names of Scale/B fed as graph inputs instead of constants."""
    shape = x.shape[axis:] if scale_shape is None else scale_shape
    params = {"s": rand(rng, *shape)}
    if bias:
        params["b"] = rand(rng, *shape)
    node = helper.make_node("LayerNormalization", ["x", *params], list(outputs), axis=axis, epsilon=1e-3)
    feeds = {"x": x, **{k: v for k, v in params.items() if k in dynamic}}
    inits = {k: v for k, v in params.items() if k not in dynamic}
    model = make_model([node], feeds, list(outputs), inits)
    return compare(model, feeds, kw.pop("tol", ACCUMULATE), backend=backend, **kw)


@pytest.mark.parametrize("axis", [-1, 1, 2, 0, -3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm(rng, backend, axis, bias):
    _layernorm(rng, backend, rand(rng, 3, 5, 7, 13, scale=2) + np.float32(3), axis, bias=bias)


LAYERNORM_SHAPES = {
    "opencl": [(1, 40, 120), (2, 25, 3001), (2, 3, 5003), (1031, 7)],
    "vulkan": [(1, 40, 120), (2, 3, 4099), (2, 5003), (301, 7), (4, 1)],
}


@pytest.mark.parametrize("backend,shape", gpu_cases({b: [(s,) for s in v] for b, v in LAYERNORM_SHAPES.items()}, ids=str))
def test_layernorm_shapes(rng, backend, shape):
    """PP-OCRv4 rec's (1, 40, 120) rows; long rows (with and without the register cache);
    many short rows (several per group); rows of one."""
    _layernorm(rng, backend, rand(rng, *shape), -1)


@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm_scale_broadcast(rng, backend):
    """Constant Scale/B of a smaller shape broadcast to X.shape[axis:] (expanded at resize)."""
    _layernorm(rng, backend, rand(rng, 2, 5, 7, 13), 1, scale_shape=(7, 1))


@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm_dynamic_params(rng, backend):
    _layernorm(rng, backend, rand(rng, 2, 7, 13), -2, dynamic=("s", "b"))


@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm_nan_inf(rng, backend):
    x = rand(rng, 4, 9)
    x[0, 1], x[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    _layernorm(rng, backend, x, -1)


@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm_dynamic_broadcast_falls_back(rng, backend):
    s = _layernorm(rng, backend, rand(rng, 2, 7, 13), -2, scale_shape=(1, 13), dynamic=("s",), on_device=False)
    want = f"LayerNormalization Scale [1, 13] broadcast at run time ({GPU_API[backend]} takes it full size)"
    assert want in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm_statistics_outputs_fall_back(rng, backend):
    s = _layernorm(rng, backend, rand(rng, 3, 11), -1, outputs=("y", "mean", "inv"), on_device=False)
    assert f"LayerNormalization Mean/InvStdDev outputs requested ({GPU_API[backend]} computes Y only)" in s.partitions()

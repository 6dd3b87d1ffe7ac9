"""Reductions on every backend: Reduce* (and, on the CPU, ArgMax/ArgMin and TopK). The CPU
backend against onnxruntime, each GPU backend against the CPU (``tests/backend_compare.py``),
within ``ACCUMULATE`` (integers, booleans, indices: ``EXACT``; fp16: ``HALF``). Tests without a
``backend`` parameter run the CPU backend against onnxruntime. Softmax, LogSoftmax and the
normalisations are in tests/test_norm.py.

CPU: every opset form of ``axes``, empty axes and empty sets, integer, boolean and fp16 data.
GPU (OpenCL, Vulkan; skipped with the reason where the driver is missing): every op over
several axes, long and split rows, NaN/inf, size-1 axes, axes as an input or attribute, the
work-group shape and split choices, fp16 storage, and the fallbacks with their reasons.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.ops.reductions import REDUCTIONS
from tests.backend_compare import backend_cases, backend_module, check_backend, gpu_backends, passes, storage_dtype
from tests.oracle import ACCUMULATE, EXACT, HALF, check, make_model, rand

OPS = ["ReduceMean", *REDUCTIONS]
SHAPE = (3, 5, 7, 13)


def _reduce_model(op, x, axes, opset, **attrs):
    """``x -> op -> y`` with ``axes`` as an attribute before the op's opset takes it as an input
    (ReduceSum: 13, the others: 18)."""
    since = 13 if op == "ReduceSum" else 18
    if opset < since:
        extra = {} if axes is None else {"axes": axes}
        return make_model([helper.make_node(op, ["x"], ["y"], **extra, **attrs)], {"x": x}, ["y"], opset=opset)
    ins, inits = ["x"], {}
    if axes is not None:
        ins, inits = ["x", "axes"], {"axes": np.array(axes, np.int64)}
    return make_model([helper.make_node(op, ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=opset)


def _cpu_data(rng, op, *shape):
    """Data inside ``op``'s domain for the onnxruntime cases: positive for ReduceLogSum, near 1 for ReduceProd."""
    x = rand(rng, *shape)
    if op == "ReduceLogSum":
        return np.abs(x) + 0.1
    if op == "ReduceProd":
        return (np.abs(x) * 0.5 + 0.75).astype(np.float32)
    return x


def _data(rng, op, shape, scale=1.0):
    """Data for the GPU cases: positive sums for ReduceLogSum, products that stay near 1."""
    x = rand(rng, *shape, scale=scale)
    if op == "ReduceLogSum":
        x = np.abs(x) + np.float32(0.25)  # log of a positive sum
    if op == "ReduceProd":
        x = (np.float32(1) + x * np.float32(0.05)).astype(np.float32)  # products stay near 1
    return x


def _reduce(rng, backend, op, shape, axes, keepdims=1, noop=0, x=None, **kw):
    """``op`` over ``axes`` (an input, opset 18) on ``backend`` within ACCUMULATE (``tol``); returns the session."""
    x = _data(rng, op, shape) if x is None else x
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    node = helper.make_node(op, ["x", "axes" if axes is not None else ""], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    model = make_model([node], {"x": x}, ["y"], inits, opset=18)
    return check_backend(model, {"x": x}, kw.pop("tol", ACCUMULATE), backend, **kw)


# -- ReduceMean (CPU) ------------------------------------------------------------------------


@pytest.mark.parametrize("axes", [None, [0], [1], [-1], [2, 3], [-1, -2], [0, 2], [0, 1, 2, 3]])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_mean(rng, axes, keepdims, opset):
    x = rand(rng, 2, 13, 7, 5)
    check(_reduce_model("ReduceMean", x, axes, opset, keepdims=keepdims), {"x": x}, **ACCUMULATE)


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
    check(_reduce_model("ReduceMean", x, [1], 13, keepdims=0), {"x": x}, **EXACT)


def test_reduce_mean_large(rng):
    """Global average over H, W (the SE-block / head pattern) at a size computed at run time."""
    x = rand(rng, 1, 96, 40, 41)
    check(_reduce_model("ReduceMean", x, [2, 3], 18, keepdims=1), {"x": x}, **ACCUMULATE)


# -- every reduction ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("axes", [None, [1], [-1, 0], [0, 2, 3]])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_opsets(rng, op, axes, opset):
    """``axes`` as an attribute and as an input, against onnxruntime."""
    x = _cpu_data(rng, op, 3, 7, 5, 2)
    check(_reduce_model(op, x, axes, opset, keepdims=int(axes != [1])), {"x": x}, **ACCUMULATE)


AXES = [[1], [2, 3], [0], [-1], [0, 1], [1, 2], None]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", AXES, ids=[str(a) for a in AXES])
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce(rng, backend, op, axes):
    _reduce(rng, backend, op, SHAPE, axes, keepdims=int(axes is None or len(axes) != 2))


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_empty_axes(rng, op, noop):
    x = _cpu_data(rng, op, 3, 5)
    node = helper.make_node(op, ["x", "axes"], ["y"], noop_with_empty_axes=noop, keepdims=0)
    m = make_model([node], {"x": x}, ["y"], {"axes": np.zeros(0, np.int64)}, opset=18)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_noop_with_empty_axes(rng, backend, op):
    """Empty axes with noop_with_empty_axes: the elementwise part only (rows of one)."""
    _reduce(rng, backend, op, SHAPE, [], noop=1)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_reduce_empty_axes_reduce_all(rng, backend, op):
    _reduce(rng, backend, op, (3, 5, 7), [], noop=0, keepdims=0)


# (ops, x shape, tol)
EMPTY_SET = {
    "cpu": [(("ReduceSum", "ReduceMax", "ReduceLogSumExp", "ReduceProd"), (2, 0, 4), EXACT)],
    **dict.fromkeys(("opencl", "vulkan"), [((op,), (2, 0, 5), ACCUMULATE) for op in OPS]),
}


@pytest.mark.parametrize("backend,ops,shape,tol", backend_cases(EMPTY_SET, ids=lambda c: "-".join(c[0])))
def test_reduce_empty_set(backend, ops, shape, tol):
    """An empty reduced axis gives the identity (0, 1, -inf, inf; the mean of nothing is 0)."""
    x = np.zeros(shape, np.float32)
    for op in ops:
        check_backend(_reduce_model(op, x, [1], 18, keepdims=1), {"x": x}, tol, backend)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_reduce_int(rng, op, dtype):
    x = rng.integers(-5, 6, (4, 7)).astype(dtype)
    check(_reduce_model(op, x, [1], 13, keepdims=0), {"x": x}, **EXACT)


def test_reduce_bool(rng):
    x = rng.random((3, 4)) > 0.5
    for op in ("ReduceMax", "ReduceMin"):
        check(_reduce_model(op, x, [1], 20, keepdims=0), {"x": x}, **EXACT)


def test_reduce_fp16(rng):
    """float16 data (not storage) against onnxruntime."""
    x = rand(rng, 4, 9, 3, dtype=np.float16)
    for op in ("ReduceSum", "ReduceL2", "ReduceLogSumExp"):
        check(_reduce_model(op, x, [1], 18, keepdims=0), {"x": x}, **HALF)


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
@pytest.mark.parametrize("backend,shape,axes,kind", backend_cases(SPLITS, ids=lambda c: c[2]))
def test_reduce_split(rng, backend, shape, axes, kind, op):
    """Few (very) long rows: two passes through float32 partial results (LogSumExp: one pass)."""
    s = _reduce(rng, backend, op, shape, axes, x=_data(rng, op, shape, scale=0.5))
    assert passes(s, backend) == (1 if op == "ReduceLogSumExp" else 2)


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
    check_backend(model, {"x": x, "axes": axes}, ACCUMULATE, backend)


@pytest.mark.parametrize("op,opset", [("ReduceSum", 11), ("ReduceMax", 13)])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_reduce_attribute_axes(rng, backend, op, opset):
    """Axes as an attribute (ReduceSum before opset 13, the others before 18): the converter
    turns it into a constant input."""
    x = rand(rng, *SHAPE)
    model = make_model([helper.make_node(op, ["x"], ["y"], axes=[1, 2], keepdims=0)], {"x": x}, ["y"], opset=opset)
    check_backend(model, {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_reduce_axes_fed_at_run_time(rng, backend):
    """``axes`` fed as a graph input: its value shapes the plan, so the session plans the
    reduction at ``run`` with the value known (the shape function's ``axes`` reach the
    check), and the reduction runs on the GPU; another value gives another plan."""
    x = rand(rng, 3, 5, 7)
    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)
    model = make_model([node], {"x": x, "axes": np.array([1], np.int64)}, ["y"], opset=18)
    for axes in ([1], [2]):
        s = check_backend(model, {"x": x, "axes": np.array(axes, np.int64)}, ACCUMULATE, backend)
        got = s.run({"x": x, "axes": np.array(axes, np.int64)})["y"]
        np.testing.assert_allclose(got, x.sum(axis=tuple(axes), keepdims=True), **ACCUMULATE)


# -- the GPU kernels' geometry -----------------------------------------------------------------


def test_collapse_axes():
    """Both GPU backends' ``(outer, red, inner)`` view of a reduction (backends/gpu/reduce_axes.py)."""
    from mnnpy.backends.gpu.reduce_axes import collapse_axes

    assert collapse_axes((3, 5, 7, 13), (1, 2)) == (3, 35, 13)
    assert collapse_axes((3, 1, 5, 1, 7), (0, 2)) == (1, 15, 7)
    assert collapse_axes((3, 5, 7), ()) == (105, 1, 1)
    assert collapse_axes((3, 5, 7), (0, 2)) is None


GROUPS = [(1, 25600, 1), (96, 25600, 1), (40, 6625, 1), (1 << 20, 21, 1), (7, 3, 1), (0, 5, 1), (1024, 4096, 1024), (5, 7, 5)]
RUN = {"opencl": 8, "vulkan": 32}  # the shortest run of neighbouring reads (OpenCL: a 32-byte sector; Vulkan: coalesced)


@pytest.mark.parametrize("p,red,inner", GROUPS)
@pytest.mark.parametrize("backend", gpu_backends())
def test_group_shape(backend, p, red, inner):
    m, run = backend_module(backend, "reduce"), RUN[backend]
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
    split_count = backend_module(backend, "reduce").split_count
    assert split_count(1, 1228800) > 1 and split_count(3, 70001) > 1
    assert split_count(*ONE_PASS[backend]) == 1
    assert split_count(4096, 100000) == 1  # rows enough to fill the device


# -- fp16 storage (precision="low") ----------------------------------------------------------

# (op, x shape, axes, keepdims, opset: axes an attribute before the op takes it as an input)
FP16 = {
    "opencl": [
        (op, shape, [2, 3], 1, 18)
        for shape in [(2, 3, 29, 31), (1, 1, 307, 293)]
        for op in ["ReduceMean", "ReduceMax", "ReduceLogSumExp", "ReduceL2"]
    ],
    "vulkan": [
        ("ReduceMean", (2, 5, 7, 9), [2, 3], 1, 17),
        ("ReduceMax", (2, 5, 7, 9), [1], 0, 17),
        ("ReduceSumSquare", (2, 5, 7, 9), [3], 1, 17),
        ("ReduceMean", (1, 3, 300, 301), [2, 3], 1, 17),  # two passes, float32 scratch between them
    ],
}


@pytest.mark.parametrize(
    "backend,op,shape,axes,keepdims,opset", backend_cases(FP16, ids=lambda c: f"{c[0]}-{c[1]}", precision="low")
)
def test_reduce_fp16_storage(rng, backend, op, shape, axes, keepdims, opset):
    """Activations stored as fp16, the sums in fp32: within HALF of the CPU."""
    x = rand(rng, *shape)
    s = check_backend(_reduce_model(op, x, axes, opset, keepdims=keepdims), {"x": x}, HALF, backend, precision="low")
    assert storage_dtype(s) == np.float16


# -- ArgMax, ArgMin, TopK (CPU) ------------------------------------------------------------------


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg(rng, op, axis, keepdims, last):
    x = rng.integers(0, 4, (5, 7, 3)).astype(np.float32)  # many ties
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    check(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, **EXACT)


def test_arg_opset11(rng):
    x = rand(rng, 4, 9)
    node = helper.make_node("ArgMax", ["x"], ["y"], axis=1)
    check(make_model([node], {"x": x}, ["y"], opset=11), {"x": x}, **EXACT)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("k", [0, 1, 3, 5])
def test_topk(rng, largest, axis, k):
    x = rng.integers(0, 3, (5, 6, 7)).astype(np.float32)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    m = make_model([node], {"x": x}, ["v", "i"], {"k": np.array([k], np.int64)}, opset=11)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64])
def test_topk_dtypes(rng, dtype):
    x = rng.integers(0, 50, (3, 11)).astype(dtype)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    m = make_model([node], {"x": x}, ["v", "i"], {"k": np.array([4], np.int64)}, opset=11)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("opset", [7, 10])
def test_topk_old(rng, opset):
    x = rand(rng, 4, 9)
    if opset < 10:
        node = helper.make_node("TopK", ["x"], ["v", "i"], k=3, axis=1)
        m = make_model([node], {"x": x}, ["v", "i"], opset=opset)
    else:
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
        m = make_model([node], {"x": x}, ["v", "i"], {"k": np.array([3], np.int64)}, opset=opset)
    check(m, {"x": x}, **EXACT)


def test_topk_k_graph_input(rng):
    """K fed as a graph input: the plan depends on its value."""
    x, k = rand(rng, 10), np.array([4], np.int64)
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    check(make_model([node], {"x": x, "k": k}, ["v", "i"], opset=11), {"x": x, "k": k}, **EXACT)

"""Vulkan reductions, Softmax/LogSoftmax, LayerNormalization and BatchNormalization against
the CPU backend (seeded random inputs, odd sizes, every shader variant, fallbacks).

Skipped, with the reason, where Vulkan is unusable (CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from mnnpy.ops.reductions import REDUCTIONS
from tests.backend_compare import ACCUMULATE, ELEMENTWISE, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)

from mnnpy.backends.vulkan.reduce import CACHE_MAX, GROUP_MAX, collapse_axes, group_shape, split_count  # noqa: E402

OPS = ["ReduceMean", *REDUCTIONS]
SHAPE = (3, 5, 7, 13)


def _compare(model, feeds, tol=ACCUMULATE, on_device=True, **options):
    return compare(model, feeds, tol, on_device, backend="vulkan", **options)


def _only_execution(session):
    (exe,) = session._plan.executions.values()
    return exe


def _data(rng, op, shape, scale=1.0):
    x = rand(rng, *shape, scale=scale)
    if op == "ReduceLogSum":
        x = np.abs(x) + np.float32(0.25)  # log of a positive sum
    if op == "ReduceProd":
        x = (np.float32(1) + x * np.float32(0.05)).astype(np.float32)  # products stay near 1
    return x


def _reduce(rng, op, shape, axes, keepdims=1, noop=0, x=None, **kw):
    x = _data(rng, op, shape) if x is None else x
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    node = helper.make_node(op, ["x", "axes" if axes is not None else ""], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    model = make_model([node], {"x": x}, ["y"], inits, opset=18)
    return _compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


AXES = [[1], [2, 3], [0], [-1], [0, 1], [1, 2], None]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", AXES, ids=[str(a) for a in AXES])
def test_reduce(rng, op, axes):
    _reduce(rng, op, SHAPE, axes, keepdims=int(axes is None or len(axes) != 2))


BOUNDED = [op for op in OPS if op != "ReduceProd"]  # a product of thousands of values under- or overflows


@pytest.mark.parametrize("op", BOUNDED)
def test_reduce_long_rows(rng, op):
    """Rows longer than a work group (inner == 1) and a strided reduction (inner > 1)."""
    _reduce(rng, op, (2, 1001), [1])
    _reduce(rng, op, (331, 6), [0])


@pytest.mark.parametrize("op", BOUNDED)
@pytest.mark.parametrize("shape,axes", [((1, 2, 73, 71), None), ((9001, 3), [0])], ids=["row", "column"])
def test_reduce_split(rng, op, shape, axes):
    """Few long rows: two passes through float32 partial results (LogSumExp: one pass)."""
    s = _reduce(rng, op, shape, axes, x=_data(rng, op, shape, scale=0.5))
    assert _only_execution(s).passes == (1 if op == "ReduceLogSumExp" else 2)


@pytest.mark.parametrize("op", OPS)
def test_reduce_noop_with_empty_axes(rng, op):
    """Empty axes with noop_with_empty_axes: the elementwise part only (rows of one)."""
    _reduce(rng, op, SHAPE, [], noop=1)


@pytest.mark.parametrize("op", OPS)
def test_reduce_empty_axes_reduce_all(rng, op):
    _reduce(rng, op, (3, 5, 7), [], noop=0, keepdims=0)


@pytest.mark.parametrize("op", OPS)
def test_reduce_empty_set(rng, op):
    """An empty reduced axis gives the identity (0, 1, -inf, inf; the mean of nothing is 0)."""
    _reduce(rng, op, (2, 0, 5), [1], x=np.zeros((2, 0, 5), np.float32))


@pytest.mark.parametrize("op", OPS)
def test_reduce_nan_inf(rng, op):
    x = _data(rng, op, (4, 6, 9))
    x[0, 1, 2], x[1, 2, 3], x[2, 0, 0], x[3] = np.nan, np.inf, -np.inf, np.inf
    _reduce(rng, op, x.shape, [2], x=x)
    _reduce(rng, op, x.shape, [1], x=x)  # strided


def test_reduce_size_one_axes_merge(rng):
    """Size-1 dims between reduced axes do not break the (outer, red, inner) view."""
    _reduce(rng, "ReduceSum", (3, 1, 5, 1, 7), [0, 2])


def test_reduce_axes_not_contiguous_fall_back(rng):
    s = _reduce(rng, "ReduceMean", SHAPE, [1, 3], on_device=False)
    assert "ReduceMean axes [1, 3] of shape [3, 5, 7, 13] are not one contiguous block" in s.partitions()


def test_reduce_axes_as_input(rng):
    """``axes`` fed as a graph input: its value is known at resize, so Vulkan runs it."""
    x, axes = rand(rng, *SHAPE), np.array([2, 3], np.int64)
    model = make_model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])], {"x": x, "axes": axes}, ["y"], opset=18)
    _compare(model, {"x": x, "axes": axes})


def test_reduce_axes_unknown_at_resize_fall_back():
    """``axes`` whose value is not known at resize: check() declines with the reason."""
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.reduce import Reduce
    from mnnpy.ir import Op

    op = Op("ReduceSum", "r", [0, 1], [2])
    infos = [TensorInfo(0, "x", (3, 5), np.dtype(np.float32)), TensorInfo(1, "axes", (1,), np.dtype(np.int64))]
    ok, why = Reduce.check(op, infos, {"keepdims": 1, "noop_with_empty_axes": 0})
    assert not ok and why == "ReduceSum axes computed at run time (Vulkan takes axes known at resize)"


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax"])
def test_reduce_opset13_attribute_axes(rng, op):
    """Axes as an attribute (opset 13): the converter turns it into a constant input."""
    x = rand(rng, *SHAPE)
    model = make_model([helper.make_node(op, ["x"], ["y"], axes=[1, 2], keepdims=0)], {"x": x}, ["y"], opset=13)
    _compare(model, {"x": x})


def test_collapse_axes():
    assert collapse_axes((3, 5, 7, 13), (1, 2)) == (3, 35, 13)
    assert collapse_axes((3, 1, 5, 1, 7), (0, 2)) == (1, 15, 7)
    assert collapse_axes((3, 5, 7), ()) == (105, 1, 1)
    assert collapse_axes((3, 5, 7), (0, 2)) is None


GROUPS = [(1, 25600, 1), (96, 25600, 1), (40, 6625, 1), (1 << 20, 21, 1), (7, 3, 1), (0, 5, 1), (1024, 4096, 1024), (5, 7, 5)]


@pytest.mark.parametrize("p,red,inner", GROUPS)
def test_group_shape(p, red, inner):
    lp, lr = group_shape(p, red, inner)
    assert lp * lr <= GROUP_MAX and lr & (lr - 1) == 0 and lp & (lp - 1) == 0
    assert lr <= max(red, 1) and lp <= max(p, 1)
    if p <= 100 and red >= 1000:
        assert lr == GROUP_MAX  # few long rows: a whole group per row
    if inner == 1 and red >= 32:
        assert lr >= 32  # a row is read in coalesced runs
    if inner >= 32 and p >= 32:
        assert lp >= 32  # across p: neighbouring inner positions form the runs


def test_every_execution_names_existing_variants():
    import json
    from pathlib import Path

    from mnnpy.backends.vulkan import norm, pool, reduce

    here = Path(__file__).resolve().parents[1] / "shaders" / "vulkan"
    names = set(json.loads((here / "manifest_reduce.json").read_text())["variants"])
    classes = [reduce.Reduce, reduce.Softmax, pool.Pool, pool.GlobalPool, norm.LayerNormalization, norm.BatchNormalization]
    used = {v for cls in classes for v in cls.variants}
    assert used == names and all((here / f"{v}.spv").is_file() for v in used)


def test_split_count():
    assert split_count(1, 1228800) > 1 and split_count(3, 70001) > 1
    assert split_count(8, 3000) == 1  # short rows: one pass
    assert split_count(4096, 100000) == 1  # rows enough to fill the device


# -- Softmax / LogSoftmax ----------------------------------------------------------------


def _softmax(rng, op, x, axis, opset=17, **kw):
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": x}, ["y"], opset=opset)
    return _compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_softmax(rng, op, axis):
    _softmax(rng, op, rand(rng, *SHAPE, scale=3), axis)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(1, 6625), (3, 4096), (3, 4097), (2, 4099), (513, 3), (1, 1), (5, 1), (3, 0)])
def test_softmax_shapes(rng, op, shape):
    """A PP-OCR-sized class row and rows about the register-cache limit (three passes over x
    beyond it); many short rows (several rows per work group); single elements; empty rows."""
    _softmax(rng, op, rand(rng, *shape, scale=4), -1)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_numerically_stable(rng, op):
    x = rand(rng, 3, 17, scale=3) + np.float32(1000)
    x[1] -= np.float32(3000)
    _softmax(rng, op, x, 1)
    _softmax(rng, op, x.T.copy(), 0)  # strided rows


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_nan_inf(rng, op):
    x = rand(rng, 5, 11)
    x[0, 3], x[1, 4], x[2, 5], x[3, :] = np.nan, np.inf, -np.inf, -np.inf
    _softmax(rng, op, x, 1)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_opset11(rng, op):
    """Opset < 13 (coerce to 2-D at ``axis``): the converter rewrites it; the softmax runs on Vulkan."""
    x = rand(rng, 2, 3, 5, 7, scale=2)
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=1)], {"x": x}, ["y"], opset=11)
    s = compare(model, {"x": x}, ACCUMULATE, on_device=False, backend="vulkan")
    assert f"{op} '" in s.partitions()


# -- LayerNormalization ---------------------------------------------------------------------


def _layernorm(rng, x, axis, scale_shape=None, bias=True, dynamic=(), outputs=("y",), **kw):
    """``dynamic``: names of Scale/B fed as graph inputs instead of constants."""
    shape = x.shape[axis:] if scale_shape is None else scale_shape
    params = {"s": rand(rng, *shape)}
    if bias:
        params["b"] = rand(rng, *shape)
    node = helper.make_node("LayerNormalization", ["x", *params], list(outputs), axis=axis, epsilon=1e-3)
    feeds = {"x": x, **{k: v for k, v in params.items() if k in dynamic}}
    inits = {k: v for k, v in params.items() if k not in dynamic}
    model = make_model([node], feeds, list(outputs), inits)
    return _compare(model, feeds, kw.pop("tol", ACCUMULATE), **kw)


@pytest.mark.parametrize("axis", [-1, 1, 2, 0, -3])
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm(rng, axis, bias):
    _layernorm(rng, rand(rng, 3, 5, 7, 13, scale=2) + np.float32(3), axis, bias=bias)


@pytest.mark.parametrize("shape", [(1, 40, 120), (2, 3, 4099), (2, 5003), (301, 7), (4, 1)])
def test_layernorm_shapes(rng, shape):
    """PP-OCRv4 rec's (1, 40, 120) rows; long rows (with and without the register cache);
    many short rows (several per group); rows of one."""
    _layernorm(rng, rand(rng, *shape), -1)


def test_layernorm_scale_broadcast(rng):
    """Constant Scale/B of a smaller shape broadcast to X.shape[axis:] (expanded at resize)."""
    _layernorm(rng, rand(rng, 2, 5, 7, 13), 1, scale_shape=(7, 1))


def test_layernorm_dynamic_params(rng):
    _layernorm(rng, rand(rng, 2, 7, 13), -2, dynamic=("s", "b"))


def test_layernorm_nan_inf(rng):
    x = rand(rng, 4, 9)
    x[0, 1], x[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    _layernorm(rng, x, -1)


def test_layernorm_dynamic_broadcast_falls_back(rng):
    s = _layernorm(rng, rand(rng, 2, 7, 13), -2, scale_shape=(1, 13), dynamic=("s",), on_device=False)
    assert "LayerNormalization Scale [1, 13] broadcast at run time (Vulkan takes it full size)" in s.partitions()


def test_layernorm_statistics_outputs_fall_back(rng):
    s = _layernorm(rng, rand(rng, 3, 11), -1, outputs=("y", "mean", "inv"), on_device=False)
    assert "LayerNormalization Mean/InvStdDev outputs requested (Vulkan computes Y only)" in s.partitions()


@pytest.mark.parametrize("op", ["Softmax", "LayerNormalization"])
def test_register_cache_up_to_the_limit(rng, op):
    """Rows up to CACHE_MAX * GROUP_MAX are read once (kept in registers), longer ones in three passes."""
    for red, cached in ((CACHE_MAX * GROUP_MAX, True), (CACHE_MAX * GROUP_MAX + 1, False)):
        x = rand(rng, 2, red)
        s = _softmax(rng, op, x, -1) if op == "Softmax" else _layernorm(rng, x, -1)
        lp, lr, use_cache = _only_execution(s).group
        assert use_cache == cached and lr == GROUP_MAX


# -- BatchNormalization ---------------------------------------------------------------------


def _batchnorm(rng, shape, epsilon=1e-5, training=None, dynamic=False, **kw):
    c = shape[1] if len(shape) > 1 else 1
    x = rand(rng, *shape)
    params = {
        "scale": rand(rng, c),
        "bias": rand(rng, c),
        "mean": rand(rng, c),
        "var": np.abs(rand(rng, c)) + np.float32(0.1),
    }
    attrs = {"epsilon": epsilon} if training is None else {"epsilon": epsilon, "training_mode": training}
    node = helper.make_node("BatchNormalization", ["x", *params], ["y"], **attrs)
    feeds = {"x": x, **(params if dynamic else {})}
    model = make_model([node], feeds, ["y"], {} if dynamic else params, opset=15 if training is not None else 14)
    return _compare(model, feeds, kw.pop("tol", ELEMENTWISE), **kw)


@pytest.mark.parametrize("shape", [(2, 3, 13, 7), (1, 5, 31), (3, 7), (1, 1, 1, 1), (2, 3, 4, 5, 3), (1, 130, 1, 1)])
def test_batchnorm(rng, shape):
    _batchnorm(rng, shape)


def test_batchnorm_epsilon(rng):
    _batchnorm(rng, (2, 4, 5, 5), epsilon=0.5)


def test_batchnorm_run_time_params_fall_back(rng):
    s = _batchnorm(rng, (2, 3, 5, 5), dynamic=True, on_device=False)
    assert "BatchNormalization scale/B/mean/var computed at run time (Vulkan folds constants)" in s.partitions()


def test_batchnorm_training_mode_falls_back(rng):
    s = _batchnorm(rng, (2, 3, 5, 5), training=1, on_device=False, tol=ACCUMULATE)
    assert "BatchNormalization training_mode=1 (Vulkan runs inference only)" in s.partitions()


def test_batchnorm_folds_to_one_affine_dispatch(rng):
    s = _batchnorm(rng, (2, 3, 5, 5))
    (exe,) = s._plan.executions.values()
    (d,) = exe.partition.dispatches
    assert d.pipeline.name == "norm_affine" and exe.st.shape == (6,)


def test_rows_longer_than_the_limit_fall_back(monkeypatch):
    """Softmax/LayerNorm rows past MAX_ROW run on the CPU with the reason (the limit is
    lowered here so that the test stays small)."""
    from mnnpy.backends.vulkan import reduce as vreduce

    monkeypatch.setattr(vreduce, "MAX_ROW", 64)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 65)).astype(np.float32)
    for node, inits in (
        (helper.make_node("Softmax", ["x"], ["y"], axis=1), {}),
        (helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=1), {"s": np.ones(65, np.float32)}),
    ):
        s = _compare(make_model([node], {"x": x}, ["y"], inits, opset=17), {"x": x}, on_device=False)
        assert "row of 65 elements (Vulkan takes up to 64)" in s.partitions()

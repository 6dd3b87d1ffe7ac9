"""Vulkan-only checks of reductions, Softmax/LogSoftmax, LayerNormalization and
BatchNormalization: reductions of every axis, attribute axes (opset 13), check() reasons,
the shader manifest, the register cache, the folded BatchNorm dispatch, the row limit. What
both GPU backends do is in tests/test_gpu_reduce.py (BatchNormalization: tests/test_gpu_misc.py).

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
from tests.test_gpu_reduce import _data
from tests.test_gpu_reduce import _layernorm as gpu_layernorm

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)

from mnnpy.backends.vulkan.reduce import CACHE_MAX, GROUP_MAX  # noqa: E402

OPS = ["ReduceMean", *REDUCTIONS]
SHAPE = (3, 5, 7, 13)


def _compare(model, feeds, tol=ACCUMULATE, on_device=True, **options):
    return compare(model, feeds, tol, on_device, backend="vulkan", **options)


def _only_execution(session):
    (exe,) = session._plan.executions.values()
    return exe


def _reduce(rng, op, shape, axes, keepdims=1, noop=0, x=None, **kw):
    x = _data(rng, op, shape) if x is None else x
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    node = helper.make_node(op, ["x", "axes" if axes is not None else ""], ["y"], keepdims=keepdims, noop_with_empty_axes=noop)
    model = make_model([node], {"x": x}, ["y"], inits, opset=18)
    return _compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


@pytest.mark.parametrize("op", OPS)
def test_reduce_empty_axes_reduce_all(rng, op):
    _reduce(rng, op, (3, 5, 7), [], noop=0, keepdims=0)


def test_reduce_axes_unknown_at_resize_fall_back():
    """``axes`` whose value is not known at resize: check() declines with the reason."""
    from mnnpy.backend import OpInfo, TensorInfo
    from mnnpy.backends.vulkan.reduce import Reduce
    from mnnpy.ir import Op

    op = Op("ReduceSum", "r", [0, 1], [2])
    infos = [TensorInfo(0, "x", (3, 5), np.dtype(np.float32)), TensorInfo(1, "axes", (1,), np.dtype(np.int64))]
    ok, why = Reduce.check(OpInfo(0, op, {"keepdims": 1, "noop_with_empty_axes": 0}, tuple(infos), (None,)))
    assert not ok and why == "ReduceSum axes computed at run time (Vulkan takes axes known at resize)"


@pytest.mark.parametrize("op,opset", [("ReduceSum", 11), ("ReduceMax", 13)])
def test_reduce_attribute_axes(rng, op, opset):
    """Axes as an attribute (ReduceSum before opset 13, the others before 18): the converter
    turns it into a constant input."""
    x = rand(rng, *SHAPE)
    model = make_model([helper.make_node(op, ["x"], ["y"], axes=[1, 2], keepdims=0)], {"x": x}, ["y"], opset=opset)
    _compare(model, {"x": x})


def test_every_execution_names_existing_variants():
    import json
    from pathlib import Path

    from mnnpy.backends.vulkan import norm, pool, reduce

    here = Path(__file__).resolve().parents[1] / "shaders" / "vulkan"
    names = set(json.loads((here / "manifest_reduce.json").read_text())["variants"])
    classes = [reduce.Reduce, reduce.Softmax, pool.Pool, pool.GlobalPool, norm.LayerNormalization, norm.BatchNormalization]
    used = {v for cls in classes for v in cls.variants}
    assert used == names and all((here / f"{v}.spv").is_file() for v in used)


# -- Softmax / LayerNormalization: the register cache, the row limit -----------------------


def _softmax(rng, op, x, axis, opset=17, **kw):
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": x}, ["y"], opset=opset)
    return _compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


def _layernorm(rng, x, axis, **kw):
    return gpu_layernorm(rng, "vulkan", x, axis, **kw)


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


def test_batchnorm_folds_to_one_affine_dispatch(rng):
    s = _batchnorm(rng, (2, 3, 5, 5))
    (exe,) = s._plan.executions.values()
    (d,) = exe.dispatches
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

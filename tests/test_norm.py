"""Softmax and the normalisations on every backend: Softmax, LogSoftmax, LayerNormalization,
BatchNormalization (and, on the CPU, Hardmax, Instance/Group/Lp normalisation, LRN, MVN). The
CPU backend against onnxruntime, each GPU backend against the CPU (``tests/backend_compare.py``),
within ``ACCUMULATE`` (the GPUs' BatchNormalization, one affine pass: ``ELEMENTWISE``; Hardmax:
``EXACT``; fp16: ``HALF``). Tests without a ``backend`` parameter run the CPU backend against
onnxruntime.

GPU (OpenCL, Vulkan; skipped with the reason where the driver is missing): odd sizes, long
rows (the register cache and its limit), many short rows, NaN/inf, numerical stability, the
opset-11 rewrite, constant and run-time parameters, fp16 storage, and the fallbacks with their
reasons.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import (
    API,
    backend_cases,
    backend_module,
    check_backend,
    gpu_backends,
    launch_key,
    only_execution,
    recorded_dispatches,
    storage_dtype,
)
from tests.oracle import ACCUMULATE, ELEMENTWISE, EXACT, HALF, check, make_model, rand, run_mnnpy


def _one(op, x, opset, inits=None, inputs=None, outputs=("y",), **attrs):
    """A one-node model ``op(x, *inputs) -> outputs``; ``inputs`` name constants of ``inits``."""
    node = helper.make_node(op, ["x", *(inputs or [])], list(outputs), **attrs)
    return make_model([node], {"x": x}, list(outputs), inits, opset=opset)


# -- Softmax, LogSoftmax, Hardmax -----------------------------------------------------------

SHAPE = (3, 5, 7, 13)


def _softmax(rng, backend, op, x, axis, opset=17, **kw):
    """``op`` (Softmax or LogSoftmax) of ``x`` over ``axis`` on ``backend`` within ACCUMULATE (``tol``); returns the session."""
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], {"x": x}, ["y"], opset=opset)
    return check_backend(model, {"x": x}, kw.pop("tol", ACCUMULATE), backend, **kw)


# (op, x shape, input scale, axis, opset)
SOFTMAX = {
    "cpu": [("Softmax", (2, 13, 7, 5), 10.0, axis, 13) for axis in [-1, 0, 1, 2, -3, 3]],
    **dict.fromkeys(
        ("opencl", "vulkan"), [(op, SHAPE, 3.0, axis, 17) for op in ["Softmax", "LogSoftmax"] for axis in [0, 1, 2, 3, -1, -3]]
    ),
}


@pytest.mark.parametrize("backend,op,shape,scale,axis,opset", backend_cases(SOFTMAX, ids=lambda c: f"{c[0]}-axis{c[3]}"))
def test_softmax(rng, backend, op, shape, scale, axis, opset):
    _softmax(rng, backend, op, rand(rng, *shape, scale=scale), axis, opset)


def test_softmax_large_values(rng):
    """Numerically stable: huge logits give no inf/nan."""
    x = (rand(rng, 3, 127) * 1e4).astype(np.float32)
    node = helper.make_node("Softmax", ["x"], ["y"])
    y = check(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, **ACCUMULATE)[0]
    assert np.isfinite(y).all()


@pytest.mark.parametrize("op", ["LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_like(rng, op, axis, opset):
    x = rand(rng, 3, 5, 7, scale=3)
    if op == "Hardmax":
        x = np.round(x)  # ties: the first maximum wins
    attrs = {} if axis is None else {"axis": axis}
    check(_one(op, x, opset, **attrs), {"x": x}, **(ACCUMULATE if op == "LogSoftmax" else EXACT))


SOFTMAX_SHAPES = {
    "opencl": [(1, 40, 6625), (3, 4096), (3, 4097), (2049, 3), (1, 1), (5, 1)],
    "vulkan": [(1, 6625), (3, 4096), (3, 4097), (2, 4099), (513, 3), (1, 1), (5, 1), (3, 0)],
}


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("backend,shape", backend_cases({b: [(s,) for s in v] for b, v in SOFTMAX_SHAPES.items()}, ids=str))
def test_softmax_shapes(rng, backend, shape, op):
    """PP-OCR's 6625-class rows and rows about the register-cache limit (three passes over x
    beyond it); many short rows (several rows per work group); single elements; empty rows."""
    s = _softmax(rng, backend, op, rand(rng, *shape, scale=4), -1)
    if backend == "opencl":  # Vulkan: test_register_cache_up_to_the_limit
        m = backend_module(backend, "reduce")
        assert ("-D CACHE=" in launch_key(s)) == (shape[-1] <= m.CACHE_MAX * m.GROUP_MAX)


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
    s = check_backend(model, {"x": x}, ACCUMULATE, backend, on_device=OPSET11_ON_DEVICE[backend])
    assert f"{op} '" in s.partitions()


# (op, x shape, input scale, axis)
SOFTMAX_FP16 = {
    "opencl": [(op, (3, 29, 257), 3.0, -1) for op in ["Softmax", "LogSoftmax"]],
    "vulkan": [("Softmax", (2, 5, 7, 9), 1.0, -1), ("LogSoftmax", (2, 5, 7, 9), 1.0, 1)],
}


@pytest.mark.parametrize("backend,op,shape,scale,axis", backend_cases(SOFTMAX_FP16, ids=lambda c: c[0], precision="low"))
def test_softmax_fp16_storage(rng, backend, op, shape, scale, axis):
    """Activations stored as fp16, the row sums in fp32: within HALF of the CPU."""
    s = _softmax(rng, backend, op, rand(rng, *shape, scale=scale), axis, tol=HALF, precision="low")
    assert storage_dtype(s) == np.float16


# -- LayerNormalization ---------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("bias", [False, True])
def test_layer_norm(rng, axis, bias):
    """With the Mean and InvStdDev outputs."""
    x = rand(rng, 2, 5, 7)
    shape = x.shape[axis:]
    inits = {"s": rand(rng, *shape), **({"b": rand(rng, *shape)} if bias else {})}
    ins = ["s", "b"] if bias else ["s"]
    m = _one("LayerNormalization", x, 17, inits, ins, ("y", "mean", "inv"), axis=axis, epsilon=1e-3)
    check(m, {"x": x}, **ACCUMULATE)


def test_layer_norm_broadcast_scale_fp16(rng):
    x = rand(rng, 3, 4, 6, dtype=np.float16)
    m = _one("LayerNormalization", x, 17, {"s": rand(rng, 6, dtype=np.float16)}, ["s"], axis=1)
    check(m, {"x": x}, **HALF)


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
    return check_backend(model, feeds, kw.pop("tol", ACCUMULATE), backend, **kw)


@pytest.mark.parametrize("axis", [-1, 1, 2, 0, -3])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm(rng, backend, axis, bias):
    _layernorm(rng, backend, rand(rng, 3, 5, 7, 13, scale=2) + np.float32(3), axis, bias=bias)


LAYERNORM_SHAPES = {
    "opencl": [(1, 40, 120), (2, 25, 3001), (2, 3, 5003), (1031, 7)],
    "vulkan": [(1, 40, 120), (2, 3, 4099), (2, 5003), (301, 7), (4, 1)],
}


@pytest.mark.parametrize("backend,shape", backend_cases({b: [(s,) for s in v] for b, v in LAYERNORM_SHAPES.items()}, ids=str))
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
    want = f"LayerNormalization Scale [1, 13] broadcast at run time ({API[backend]} takes it full size)"
    assert want in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_layernorm_statistics_outputs_fall_back(rng, backend):
    s = _layernorm(rng, backend, rand(rng, 3, 11), -1, outputs=("y", "mean", "inv"), on_device=False)
    assert f"LayerNormalization Mean/InvStdDev outputs requested ({API[backend]} computes Y only)" in s.partitions()


# -- the Vulkan row kernels: register cache and row limit -------------------------------------


@pytest.mark.parametrize("op", ["Softmax", "LayerNormalization"])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_register_cache_up_to_the_limit(rng, backend, op):
    """Rows up to CACHE_MAX * GROUP_MAX are read once (kept in registers), longer ones in three passes."""
    m = backend_module(backend, "reduce")
    for red, cached in ((m.CACHE_MAX * m.GROUP_MAX, True), (m.CACHE_MAX * m.GROUP_MAX + 1, False)):
        x = rand(rng, 2, red)
        s = _softmax(rng, backend, op, x, -1) if op == "Softmax" else _layernorm(rng, backend, x, -1)
        lp, lr, use_cache = only_execution(s).group
        assert use_cache == cached and lr == m.GROUP_MAX


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_rows_longer_than_the_limit_fall_back(monkeypatch, backend):
    """Softmax/LayerNorm rows past MAX_ROW run on the CPU with the reason (the limit is
    lowered here so that the test stays small)."""
    monkeypatch.setattr(backend_module(backend, "reduce"), "MAX_ROW", 64)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 65)).astype(np.float32)
    for node, inits in (
        (helper.make_node("Softmax", ["x"], ["y"], axis=1), {}),
        (helper.make_node("LayerNormalization", ["x", "s"], ["y"], axis=1), {"s": np.ones(65, np.float32)}),
    ):
        s = check_backend(make_model([node], {"x": x}, ["y"], inits, opset=17), {"x": x}, ACCUMULATE, backend, on_device=False)
        assert "row of 65 elements (Vulkan takes up to 64)" in s.partitions()


# -- BatchNormalization ---------------------------------------------------------------------


def _batchnorm(rng, backend, shape, dynamic=(), tol=ELEMENTWISE, on_device=True, opset=None, scale=1.0, **attrs):
    """``x`` (N(0, scale²)) -> BatchNormalization -> y on ``backend`` within ``tol``; ``dynamic``:
    names of scale/B/mean/var (``s``, ``b``, ``m``, ``v``) fed as graph inputs. Returns the session."""
    c = shape[1] if len(shape) > 1 else 1
    x = rand(rng, *shape, scale=scale)
    params = {"s": rand(rng, c), "b": rand(rng, c), "m": rand(rng, c), "v": np.abs(rand(rng, c)) + np.float32(0.1)}
    node = helper.make_node("BatchNormalization", ["x", *params], ["y"], **attrs)
    feeds = {"x": x, **{k: v for k, v in params.items() if k in dynamic}}
    inits = {k: v for k, v in params.items() if k not in dynamic}
    model = make_model([node], feeds, ["y"], inits, opset=opset or BN_OPSET[backend])
    return check_backend(model, feeds, tol, backend, on_device=on_device)


BN_OPSET = {"opencl": 17, "vulkan": 14}  # the opsets each GPU backend's tests were written for
TRAINING_OPSET = {"opencl": 17, "vulkan": 15}
# (x shape, epsilon, opset, tol, input scale)
BATCHNORMS = {
    "cpu": [
        (s, 1e-3, opset, ACCUMULATE, 3.0) for opset in [7, 9, 14, 15] for s in [(2, 13, 7, 5), (3, 5), (1, 4, 9), (2, 3, 2, 3, 4)]
    ],
    "opencl": [(s, 1e-3, 17, ELEMENTWISE, 1.0) for s in [(2, 7, 13, 5), (3, 11), (1, 5, 3, 4, 7), (2, 3, 17)]],
    "vulkan": [
        *(
            (s, 1e-5, 14, ELEMENTWISE, 1.0)
            for s in [(2, 3, 13, 7), (1, 5, 31), (3, 7), (1, 1, 1, 1), (2, 3, 4, 5, 3), (1, 130, 1, 1)]
        ),
        ((2, 4, 5, 5), 0.5, 14, ELEMENTWISE, 1.0),
    ],
}


@pytest.mark.parametrize(
    "backend,shape,epsilon,opset,tol,scale", backend_cases(BATCHNORMS, ids=lambda c: f"{c[0]}-eps{c[1]}-opset{c[2]}")
)
def test_batchnorm(rng, backend, shape, epsilon, opset, tol, scale):
    _batchnorm(rng, backend, shape, tol=tol, opset=opset, scale=scale, epsilon=epsilon)


def test_batchnorm_dynamic_params(rng):
    """CPU: parameters fed as graph inputs: computed per run, not at resize."""
    _batchnorm(rng, "cpu", (2, 6, 3, 3), dynamic=("s", "b", "m", "v"), tol=ACCUMULATE, opset=17)


RUN_TIME_PARAMS = {"opencl": ("m",), "vulkan": ("s", "b", "m", "v")}  # OpenCL: the mean alone; Vulkan: all four


@pytest.mark.parametrize("backend", gpu_backends())
def test_batchnorm_run_time_params_fall_back(rng, backend):
    s = _batchnorm(rng, backend, (2, 3, 5, 5), dynamic=RUN_TIME_PARAMS[backend], on_device=False)
    want = f"BatchNormalization scale/B/mean/var computed at run time ({API[backend]} folds constants)"
    assert want in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_batchnorm_training_mode_falls_back(rng, backend):
    s = _batchnorm(rng, backend, (2, 3, 5, 5), tol=ACCUMULATE, on_device=False, opset=TRAINING_OPSET[backend], training_mode=1)
    assert f"BatchNormalization training_mode=1 ({API[backend]} runs inference only)" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_batchnorm_folds_to_one_affine_dispatch(rng, backend):
    s = _batchnorm(rng, backend, (2, 3, 5, 5), epsilon=1e-5)
    exe = only_execution(s)
    (d,) = recorded_dispatches(s, exe)
    assert d.pipeline.name == "norm_affine" and exe.st.shape == (6,)


# -- fp16 storage (precision="low") ----------------------------------------------------------


def _norms_fp16_opencl_layernorm(rng):
    """LayerNormalization over rows of 120 (PP-OCRv4 rec)."""
    x = rand(rng, 2, 31, 120)
    params = {"s": rand(rng, 120), "b": rand(rng, 120)}
    node = helper.make_node("LayerNormalization", ["x", *params], ["y"], axis=-1, epsilon=1e-3)
    yield make_model([node], {"x": x}, ["y"], params), {"x": x}


def _norms_fp16_opencl_batchnorm(rng):
    """BatchNormalization of 24 channels."""
    x, c = rand(rng, 1, 24, 13, 7), 24
    inits = {"s": rand(rng, c), "b": rand(rng, c), "m": rand(rng, c), "v": np.abs(rand(rng, c)) + np.float32(0.1)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    yield make_model([node], {"x": x}, ["y"], inits), {"x": x}


def _norms_fp16_vulkan(rng):
    """LayerNormalization over rows of 33, then BatchNormalization of 5 channels."""
    x, g, b = rand(rng, 2, 7, 33), rand(rng, 33), rand(rng, 33)
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)
    yield make_model([node], {"x": x}, ["y"], {"g": g, "b": b}), {"x": x}
    x = rand(rng, 2, 5, 6, 7)
    s, t, mu = rand(rng, 5), rand(rng, 5), rand(rng, 5)
    var = (np.abs(rand(rng, 5)) + 0.5).astype(np.float32)
    node = helper.make_node("BatchNormalization", ["x", "s", "t", "mu", "var"], ["y"])
    yield make_model([node], {"x": x}, ["y"], {"s": s, "t": t, "mu": mu, "var": var}), {"x": x}


NORMS_FP16 = {
    "opencl": [_norms_fp16_opencl_layernorm, _norms_fp16_opencl_batchnorm],
    "vulkan": [_norms_fp16_vulkan],
}


@pytest.mark.parametrize("backend,models", backend_cases(NORMS_FP16, ids=lambda f: f.__name__.split("fp16_")[1], precision="low"))
def test_norm_fp16_storage(rng, backend, models):
    """LayerNormalization and BatchNormalization on fp16 storage: within HALF of the CPU."""
    for model, feeds in models(rng):
        s = check_backend(model, feeds, HALF, backend, precision="low")
        assert storage_dtype(s) == np.float16


# -- further normalisations (CPU) --------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 5), (2, 2, 2, 3, 3)])
def test_instance_norm(rng, shape):
    x = rand(rng, *shape)
    c = shape[1]
    m = _one("InstanceNormalization", x, 11, {"s": rand(rng, c), "b": rand(rng, c)}, ["s", "b"], epsilon=1e-4)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm(rng, groups):
    x = rand(rng, 2, 6, 5, 3)
    m = _one("GroupNormalization", x, 21, {"s": rand(rng, 6), "b": rand(rng, 6)}, ["s", "b"], num_groups=groups)
    check(m, {"x": x}, **ACCUMULATE)


def test_group_norm_18(rng):
    """Opset 18: one scale/bias per group (checked against a numpy reference)."""
    x, s, b = rand(rng, 2, 6, 4), rand(rng, 3), rand(rng, 3)
    m = _one("GroupNormalization", x, 18, {"s": s, "b": b}, ["s", "b"], num_groups=3)
    xg = x.reshape(2, 3, -1)
    ref = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)
    ref = ref * s[None, :, None] + b[None, :, None]
    np.testing.assert_allclose(run_mnnpy(m, {"x": x})[0], ref.reshape(x.shape), **ACCUMULATE)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, -1, 1])
def test_lp_norm(rng, p, axis):
    x = rand(rng, 3, 4, 5)
    check(_one("LpNormalization", x, 13, p=p, axis=axis), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("size", [1, 3, 5, 9])  # onnxruntime takes odd sizes only
def test_lrn(rng, size):
    x = rand(rng, 2, 7, 4, 3)
    check(_one("LRN", x, 13, size=size, alpha=0.02, beta=0.6, bias=1.5), {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("axes", [None, [1], [0, 2, 3], [2, 3]])
def test_mvn(rng, axes):
    x = rand(rng, 2, 3, 4, 5)
    attrs = {} if axes is None else {"axes": axes}
    check(_one("MeanVarianceNormalization", x, 13, **attrs), {"x": x}, **ACCUMULATE)


def test_lrn_size_beyond_the_channels_is_clamped(rng):
    """A window far wider than the channels (``size=2**40 + 1`` from a hostile model) covers
    every channel; preparing it loops over the channels only (it looped over the window
    positions: hours). Compared with the formula (onnxruntime takes such sizes as well)."""
    x = rand(rng, 1, 5, 2, 2)
    size = 2**40 + 1
    got = run_mnnpy(_one("LRN", x, 13, size=size, alpha=0.5, beta=0.75, bias=1.0), {"x": x})[0]
    ss = (x.astype(np.float64) ** 2).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, x / (1.0 + 0.5 / size * ss) ** 0.75, **ACCUMULATE)

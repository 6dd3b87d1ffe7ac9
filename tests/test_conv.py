"""Conv and ConvTranspose on every backend: the CPU backend against onnxruntime, each GPU
backend against the CPU (``tests/backend_compare.py``), within ``ACCUMULATE`` (fp16 storage:
``HALF``). Tests without a ``backend`` parameter run the CPU backend against onnxruntime.

CPU: im2col, pointwise, depthwise and kn2row kernels on odd sizes, every auto_pad, fused
activations, a second input shape, the channels-innermost depthwise kernel for short maps.
GPU (OpenCL, Vulkan; skipped with the reason where the driver is missing): the general
(register-blocked), depthwise and 1x1-GEMM kernels/shaders on odd channel counts, the kernel
each Execution picks, fused activations, the channel split over a work group, split-K, fp16
storage, blocks modelled on MobileNetV2/ResNet-18/PP-OCR, and the CPU fallbacks with their
reasons.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.ir import Graph, Net, Op, TensorDesc
from tests.backend_compare import (
    API,
    backend_cases,
    check_backend,
    conv_model,
    deconv_model,
    executions,
    gpu_backends,
    he_weights,
    kernel_name,
    launch_key,
    record_dispatches,
    sessions,
    storage_dtype,
)
from tests.oracle import ACCUMULATE, HALF, check, make_model, rand, run_ort

# the weights and biases each backend's cases were written with: the CPU's N(0, 0.5²) weights
# and N(0, 1) biases; the GPUs' He-scaled weights and N(0, 0.5²) biases
SCALES = {"cpu": {"w_scale": 0.5, "b_scale": 1.0}, "opencl": {}, "vulkan": {}}


def _picked(monkeypatch, backend, model, feeds, on_device=True, **options):
    """``check_backend`` (ACCUMULATE); returns (session, kernels picked): OpenCL: the kernel of
    the first Execution; Vulkan: the SPIR-V variant of every dispatch described at resize, in
    order; the CPU: none."""
    seen = record_dispatches(monkeypatch) if backend == "vulkan" else []
    s = check_backend(model, feeds, ACCUMULATE, backend, on_device, **options)
    return s, [kernel_name(s)] if backend == "opencl" else [d.shader for d in seen]


# -- Conv: shapes, pads, strides, dilations, groups, bias; the kernel each backend picks ---

CPU_CASES = [
    # (x shape, w shape, attrs); odd sizes throughout
    ((1, 8, 13, 11), (6, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 5, 13, 11), (7, 5, 3, 3), {}),
    ((1, 8, 13, 11), (6, 8, 3, 5), {"pads": [1, 0, 2, 3], "strides": [2, 3]}),
    ((1, 4, 17, 13), (3, 4, 3, 3), {"dilations": [2, 3], "pads": [2, 1, 2, 3]}),
    ((2, 8, 13, 11), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ((1, 12, 9, 7), (8, 3, 1, 1), {"group": 4}),
    ((1, 7, 13, 11), (5, 7, 1, 1), {}),
    ((2, 7, 13, 11), (5, 7, 1, 1), {}),
    ((1, 7, 13, 11), (5, 7, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 31, 29), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 5, 7, 9), (4, 5, 5, 5), {"pads": [4, 4, 4, 4]}),
    ((1, 5, 13), (4, 5, 3), {"strides": [2], "pads": [1, 2]}),
    ((2, 3, 5, 6, 7), (4, 3, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 2]}),
    # kn2row (stride 1, M <= C/2): pads, asymmetric pads, dilations, batch, 1xK kernels
    ((1, 16, 13, 11), (5, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 12, 13, 11), (6, 12, 3, 3), {"pads": [0, 2, 1, 0]}),
    ((1, 14, 17, 13), (7, 14, 3, 5), {"dilations": [2, 1], "pads": [2, 2, 1, 0]}),
    ((1, 9, 7, 9), (3, 9, 1, 3), {"pads": [0, 1, 0, 1]}),
    ((1, 10, 6, 5), (4, 10, 3, 3), {}),
]
# (x shape, w shape, attrs, kernel/shader the Execution picks)
GPU_CASES = {
    "opencl": [
        ((2, 5, 13, 11), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}, "conv2d"),
        ((1, 3, 31, 29), (13, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}, "conv2d"),  # ResNet stem
        ((1, 8, 12, 13), (17, 8, 1, 1), {"strides": [2, 2]}, "conv2d"),  # ResNet downsample
        ((2, 6, 9, 10), (9, 2, 3, 3), {"group": 3, "pads": [1, 0, 2, 1], "dilations": [2, 1]}, "conv2d"),
        ((1, 6, 12, 12), (10, 3, 1, 1), {"group": 2}, "conv2d"),  # grouped 1x1: not the GEMM
        ((1, 5, 7, 9), (6, 5, 2, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 1]}, "conv2d"),
        ((1, 5, 7, 9), (6, 5, 3, 2), {"auto_pad": "SAME_LOWER", "strides": [1, 2]}, "conv2d"),
        ((1, 5, 9, 9), (3, 5, 3, 3), {"auto_pad": "VALID", "dilations": [2, 2]}, "conv2d"),
        ((1, 4, 5, 23), (4, 4, 1, 5), {"pads": [0, 2, 0, 2]}, "conv2d"),  # 1x5 kernel
        ((1, 7, 9, 11), (14, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}, "conv2d"),  # channel multiplier 2
        ((2, 7, 13, 11), (9, 7, 1, 1), {}, "gemm"),
        ((1, 33, 10, 10), (70, 33, 1, 1), {}, "gemm"),  # more than one 64x64 tile
        ((1, 16, 3, 3), (3, 16, 1, 1), {}, "gemm"),  # M <= 4: the thin tile
        ((1, 8, 13, 11), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}, "depthwise"),
        ((2, 9, 14, 15), (9, 1, 5, 5), {"group": 9, "strides": [2, 2], "auto_pad": "SAME_UPPER"}, "depthwise"),
        ((1, 5, 16, 17), (5, 1, 3, 3), {"group": 5, "dilations": [2, 3], "pads": [2, 3, 2, 3]}, "depthwise"),
        ((1, 3, 8, 40), (3, 1, 3, 3), {"group": 3, "dilations": [1, 15], "pads": [1, 15, 1, 15]}, "conv2d"),  # row too long
    ],
    "vulkan": [
        ((2, 5, 13, 11), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}, "conv_general"),
        ((1, 3, 19, 17), (13, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}, "conv_general"),  # ResNet stem
        ((1, 6, 12, 13), (9, 6, 1, 1), {"strides": [2, 2]}, "conv_general"),  # ResNet downsample
        ((2, 6, 9, 10), (9, 2, 3, 3), {"group": 3, "pads": [1, 0, 2, 1], "dilations": [2, 1]}, "conv_general"),
        ((1, 6, 7, 9), (10, 3, 1, 1), {"group": 2}, "conv_general"),  # grouped 1x1: not the GEMM
        ((1, 5, 7, 9), (6, 5, 2, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 1]}, "conv_general"),
        ((1, 5, 7, 9), (6, 5, 3, 2), {"auto_pad": "SAME_LOWER", "strides": [1, 2]}, "conv_general"),
        ((1, 5, 9, 9), (3, 5, 3, 3), {"auto_pad": "VALID", "dilations": [2, 2]}, "conv_general"),
        ((1, 3, 5, 23), (5, 3, 1, 5), {"pads": [0, 2, 0, 2]}, "conv_general"),  # 1x5 kernel
        ((1, 7, 9, 11), (14, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}, "conv_general"),  # channel multiplier 2
        ((1, 3, 6, 40), (3, 1, 1, 9), {"group": 3, "dilations": [1, 4]}, "conv_general"),  # depthwise, row too long
        ((2, 7, 13, 11), (9, 7, 1, 1), {}, "gemm_nn"),
        ((1, 33, 10, 10), (70, 33, 1, 1), {}, "gemm_nn"),  # more than one 64x64 tile, K across two TK steps
        ((1, 17, 3, 3), (3, 17, 1, 1), {}, "gemm_nn"),  # M <= 8: the thin tile
        ((2, 9, 5, 5), (11, 9, 1, 1), {"auto_pad": "SAME_UPPER"}, "gemm_nn"),  # SAME pads of a 1x1 are 0
        ((2, 7, 13, 11), (7, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}, "conv_depthwise"),
        ((1, 5, 14, 15), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]}, "conv_depthwise"),
        ((1, 3, 11, 12), (3, 1, 5, 5), {"group": 3, "pads": [2, 2, 2, 2]}, "conv_depthwise"),
        ((1, 3, 11, 12), (3, 1, 3, 3), {"group": 3, "dilations": [2, 3], "pads": [0, 1, 2, 0]}, "conv_depthwise"),
        ((1, 6, 9, 9), (6, 1, 3, 3), {"group": 6, "auto_pad": "SAME_UPPER", "strides": [2, 2]}, "conv_depthwise"),
        ((1, 6, 9, 9), (6, 1, 2, 2), {"group": 6, "auto_pad": "SAME_LOWER"}, "conv_depthwise"),
    ],
}
GPU_IDS = {
    "opencl": [f"{c[3]}-{'x'.join(map(str, c[1]))}-{i}" for i, c in enumerate(GPU_CASES["opencl"])],
    "vulkan": [f"{c[3]}-{c[0]}-{c[1]}-{'-'.join(c[2])}" for c in GPU_CASES["vulkan"]],
}
GPU_NO_BIAS = {"opencl": [0, 10, 13], "vulkan": list(range(len(GPU_CASES["vulkan"])))[::3]}  # also run without bias
# (x shape, w shape, attrs, bias, kernel picked or None)
CONV = {
    "cpu": [(*c, bias, None) for bias in (True, False) for c in CPU_CASES],
    **{
        b: [(*c[:3], True, c[3]) for c in GPU_CASES[b]]
        + [(*GPU_CASES[b][i][:3], False, GPU_CASES[b][i][3]) for i in GPU_NO_BIAS[b]]
        for b in GPU_CASES
    },
}
CONV_IDS = {
    "cpu": [f"{'bias' if bias else 'nobias'}-{i}" for bias in (True, False) for i in range(len(CPU_CASES))],
    **{b: GPU_IDS[b] + [f"nobias-{GPU_IDS[b][i]}" for i in GPU_NO_BIAS[b]] for b in GPU_CASES},
}


@pytest.mark.parametrize("backend,xs,ws,attrs,bias,kernel", backend_cases(CONV, CONV_IDS))
def test_conv(rng, monkeypatch, backend, xs, ws, attrs, bias, kernel):
    model, feeds = conv_model(rng, xs, ws, attrs, bias, **SCALES[backend])
    _, picked = _picked(monkeypatch, backend, model, feeds)
    assert picked == ([] if kernel is None else [kernel])


AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("k,s", [(3, 1), (3, 2), (4, 3), (2, 2)])
def test_conv_auto_pad(rng, auto_pad, k, s):
    model, feeds = conv_model(rng, (1, 3, 13, 10), (4, 3, k, k), {"strides": [s, s], "auto_pad": auto_pad}, **SCALES["cpu"])
    check_backend(model, feeds, ACCUMULATE, "cpu")


@pytest.mark.parametrize(
    "xs,k,attrs",
    [
        ((1, 16, 13, 11), 3, {"pads": [1, 1, 1, 1]}),
        ((2, 8, 13, 11), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 8, 14, 15), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 8, 13, 11), 5, {"pads": [2, 1, 0, 2], "strides": [1, 2], "dilations": [2, 1]}),
        ((1, 9, 7, 7), 3, {"auto_pad": "SAME_UPPER", "strides": [3, 2]}),
        ((1, 9, 7, 7), 3, {"auto_pad": "VALID"}),
        ((1, 40, 57, 61), 3, {"pads": [1, 1, 1, 1]}),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_depthwise(rng, xs, k, attrs, bias):
    c = xs[1]
    model, feeds = conv_model(rng, xs, (c, 1, k, k), {"group": c, **attrs}, bias, **SCALES["cpu"])
    check_backend(model, feeds, ACCUMULATE, "cpu")


def test_conv_depthwise_multiplier(rng):
    model, feeds = conv_model(rng, (1, 6, 13, 11), (12, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, **SCALES["cpu"])
    check_backend(model, feeds, ACCUMULATE, "cpu")


def test_conv_dynamic_weights(rng):
    x, w, b = rand(rng, 1, 4, 9, 7), rand(rng, 6, 4, 3, 3), rand(rng, 6)
    m = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], {"x": x, "w": w, "b": b}, ["y"])
    check(m, {"x": x, "w": w, "b": b}, **ACCUMULATE)


RUN_TIME_WEIGHTS = {"opencl": ((1, 4, 9, 9), (5, 4, 3, 3)), "vulkan": ((1, 3, 7, 7), (4, 3, 3, 3))}


@pytest.mark.parametrize("backend", gpu_backends())
def test_weights_at_run_time_fall_back(rng, backend):
    xs, ws = RUN_TIME_WEIGHTS[backend]
    x, w = rand(rng, *xs), he_weights(rng, *ws)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = check_backend(model, {"x": x, "w": w}, ACCUMULATE, backend, on_device=False)
    assert "Conv weights computed at run time" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_bias_at_run_time_falls_back(rng, backend):
    x, w, b = rand(rng, 1, 3, 7, 7), he_weights(rng, 4, 3, 3, 3), rand(rng, 4)
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"])], {"x": x, "b": b}, ["y"], {"w": w})
    s = check_backend(model, {"x": x, "b": b}, ACCUMULATE, backend, on_device=False)
    assert "Conv bias computed at run time" in s.partitions()


CONV1D = {"opencl": ((1, 4, 17), (5, 4, 3), {"pads": [1, 1]}), "vulkan": ((1, 3, 17), (4, 3, 3), {})}


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv1d_falls_back(rng, backend):
    xs, ws, attrs = CONV1D[backend]
    model, feeds = conv_model(rng, xs, ws, attrs, bias=backend == "vulkan")
    s = check_backend(model, feeds, ACCUMULATE, backend, on_device=False)
    assert f"Conv with 1 spatial dims ({API[backend]} runs 2-D)" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_conv3d_falls_back(rng, backend):
    model, feeds = conv_model(rng, (1, 2, 5, 6, 7), (3, 2, 3, 3, 3), {})
    s = check_backend(model, feeds, ACCUMULATE, backend, on_device=False)
    assert "Conv with 3 spatial dims (Vulkan runs 2-D)" in s.partitions()


# -- fused activations ---------------------------------------------------------------------

ACTIVATIONS = [
    ("Relu", [], {}),
    ("Clip", [0.0, 6.0], {}),
    ("HardSwish", [1.5, -0.25], {}),  # mnnpy's scale and shift: HardSwish, Mul, Add in ONNX
    ("Sigmoid", [], {}),
    ("Tanh", [], {}),
    ("HardSigmoid", [0.2, 0.5], {"alpha": 0.2, "beta": 0.5}),
    ("LeakyRelu", [0.1], {"alpha": 0.1}),
]


def fused_conv_net(x_shape, w, b, conv_attrs, act, params) -> Net:
    """A Net of one Conv with a fused activation, built directly in the IR."""
    g = Graph()
    tx = g.add_tensor(TensorDesc("x", np.dtype(np.float32), x_shape))
    tw = g.add_tensor(TensorDesc("w", np.dtype(np.float32), w.shape, w))
    tb = g.add_tensor(TensorDesc("b", np.dtype(np.float32), b.shape, b))
    ty = g.add_tensor(TensorDesc("y", np.dtype(np.float32), None))
    attrs = dict(conv_attrs, activation=act, activation_params=list(params))
    g.ops.append(Op("Conv", "conv", [tx, tw, tb], [ty], attrs))
    g.inputs, g.outputs = [tx], [ty]
    return Net(graphs=[g])


@pytest.mark.parametrize("act,params,onnx_attrs", ACTIVATIONS)
@pytest.mark.parametrize("kind", ["im2col", "pointwise", "depthwise"])
def test_conv_fused_activation(rng, act, params, onnx_attrs, kind):
    """CPU: a Conv carrying the activation in the IR, against Conv -> activation in onnxruntime."""
    c = 6
    ws, attrs = {
        "im2col": ((5, c, 3, 3), {"pads": [1, 1, 1, 1]}),
        "pointwise": ((5, c, 1, 1), {}),
        "depthwise": ((c, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": c, "strides": [2, 2]}),
    }[kind]
    x, w, b = rand(rng, 1, c, 13, 11, scale=3), rand(rng, *ws), rand(rng, ws[0])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], **attrs)]
    inits = {"w": w, "b": b}
    if act == "Clip":
        nodes.append(helper.make_node("Clip", ["t", "lo", "hi"], ["y"]))
        inits.update(lo=np.array(params[0], np.float32), hi=np.array(params[1], np.float32))
    elif act == "HardSwish":
        nodes += [helper.make_node("HardSwish", ["t"], ["h"]), helper.make_node("Mul", ["h", "s"], ["m"])]
        nodes.append(helper.make_node("Add", ["m", "t0"], ["y"]))
        inits.update(s=np.array(params[0], np.float32), t0=np.array(params[1], np.float32))
    else:
        nodes.append(helper.make_node(act, ["t"], ["y"], **onnx_attrs))
    (expected,) = run_ort(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    actual = mnnpy.Interpreter(fused_conv_net(x.shape, w, b, attrs, act, params)).create_session().run({"x": x})["y"]
    np.testing.assert_allclose(actual, expected, **ACCUMULATE)


# (activation op, attrs, constant inputs)
GPU_ACTS = {
    "opencl": [
        ("Relu", {}, ()),
        ("Clip", {}, (0.0, 6.0)),
        ("HardSwish", {}, ()),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, ()),
        ("Sigmoid", {}, ()),
        ("LeakyRelu", {"alpha": 0.1}, ()),
        ("Tanh", {}, ()),
    ],
    "vulkan": [
        ("Relu", {}, []),
        ("Clip", {}, [-0.25, 0.5]),
        ("Clip", {}, [0.0]),  # min only: max stays +FLT_MAX
        ("LeakyRelu", {"alpha": 0.07}, []),
        ("Sigmoid", {}, []),
        ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []),
        ("HardSwish", {}, []),
        ("Tanh", {}, []),
    ],
}
ACT_CASES = {"opencl": [0, 10, 13], "vulkan": [0, 3, 11, 13, 15, 16]}  # rows of GPU_CASES: one per kernel
ACT_CASE_IDS = {
    "opencl": ["conv2d", "gemm", "depthwise"],
    "vulkan": [f"{GPU_CASES['vulkan'][i][3]}-{GPU_CASES['vulkan'][i][0]}" for i in ACT_CASES["vulkan"]],
}
ACT_IDS = {"opencl": [a[0] for a in GPU_ACTS["opencl"]], "vulkan": [f"{a[0]}{len(a[2])}" for a in GPU_ACTS["vulkan"]]}


@pytest.mark.parametrize(
    "backend,act,case",
    backend_cases(
        {b: [(a, GPU_CASES[b][c]) for a in GPU_ACTS[b] for c in ACT_CASES[b]] for b in GPU_ACTS},
        {b: [f"{a}-{c}" for a in ACT_IDS[b] for c in ACT_CASE_IDS[b]] for b in GPU_ACTS},
    ),
)
def test_fused_activation(rng, monkeypatch, backend, act, case):
    """The converter fuses the activation into Conv; the kernel applies it (one op, one launch)."""
    xs, ws, attrs, kernel = case
    s, picked = _picked(monkeypatch, backend, *conv_model(rng, xs, ws, attrs, after=[act]))
    desc = s.partitions()
    assert f"1 ops on {backend}" in desc and act[0] + " '" not in desc, desc  # fused into the Conv
    assert desc.count("\n  ") == 1, desc  # Conv alone
    assert picked == [kernel]


# -- a second input shape ------------------------------------------------------------------


@pytest.mark.parametrize(
    "ws,attrs",
    [
        ((6, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((6, 6, 1, 1), {}),
        ((6, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 6}),
    ],
)
def test_conv_second_run_new_shape(rng, ws, attrs):
    cin = 6 if attrs.get("group") or ws[1] == 6 else ws[1]
    w, b = rand(rng, *ws), rand(rng, ws[0])
    x1 = rand(rng, 1, cin, 13, 11)
    m = make_model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)],
        {"x": x1},
        ["y"],
        {"w": w, "b": b},
        input_shapes={"x": ["N", cin, "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, cin, 7, 17), x1):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)


# (x shape, w shape, attrs, activation after, dims named, shapes in order)
DYNAMIC = {
    "opencl": ((1, 6, 10, 10), (11, 6, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, [("Relu", {}, ())], "nhw"),
    "vulkan": ((1, 4, 9, 7), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}, [], "hw"),
}
DYNAMIC_SHAPES = {
    "opencl": [(1, 6, 10, 10), (2, 6, 17, 9), (1, 6, 10, 10)],
    "vulkan": [(1, 4, 9, 7), (1, 4, 12, 17), (1, 4, 9, 7)],
}


@pytest.mark.parametrize("backend", gpu_backends())
def test_dynamic_shapes_resize(rng, backend):
    """One session, three input sizes: a second shape re-runs the resize (new geometry, weights
    re-laid, launches rebuilt), then the first again."""
    xs, ws, attrs, after, dynamic = DYNAMIC[backend]
    model, _ = conv_model(rng, xs, ws, attrs, after=after)
    for i, name in enumerate("nchw"):
        if name in dynamic:
            model.graph.input[0].type.tensor_type.shape.dim[i].dim_param = name
    out = model.graph.output[0].name
    dev, cpu = sessions(model, backend=backend)
    for shape in DYNAMIC_SHAPES[backend]:
        x = rand(rng, *shape)
        np.testing.assert_allclose(dev.run({"x": x})[out], cpu.run({"x": x})[out], **ACCUMULATE)


# -- kernel variants: work-group channel split, local-memory tiles, split-K ------------------

# (x shape, w shape, attrs, activation after, precision, Vulkan: channels split over local z)
CHANNEL_SPLIT = {
    "opencl": [
        (*c, [GPU_ACTS["opencl"][0]], precision, None)
        for precision in ("normal", "low")
        for c in [
            ((1, 64, 7, 7), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}),  # ResNet's 7x7 stage, smaller
            ((2, 37, 6, 5), (9, 37, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),  # channels not a multiple of the split
            ((1, 48, 5, 5), (30, 16, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
        ]
    ],
    "vulkan": [
        (*c[:3], [("HardSwish", {}, [])], "normal", c[3])
        for c in [
            ((1, 9, 5, 7), (5, 9, 3, 3), {"pads": [1, 1, 1, 1]}, 2),
            ((2, 24, 7, 5), (7, 24, 3, 3), {"pads": [1, 0, 1, 2], "strides": [1, 2]}, 4),
            ((1, 70, 3, 9), (6, 70, 1, 3), {"dilations": [1, 2]}, 16),  # 70 channels: 16 sums of 4 or 5
            ((1, 36, 5, 5), (10, 18, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, 4),
        ]
    ],
}
CHANNEL_SPLIT_IDS = {
    "opencl": [f"{name}-{p}" for p in ("normal", "low") for name in ("resnet", "odd", "grouped")],
    "vulkan": [f"{c[0][1]}-{c[1][0]}-split{c[5]}" for c in CHANNEL_SPLIT["vulkan"]],
}


@pytest.mark.parametrize("backend,xs,ws,attrs,after,precision,split", backend_cases(CHANNEL_SPLIT, CHANNEL_SPLIT_IDS))
def test_channel_split(rng, monkeypatch, backend, xs, ws, attrs, after, precision, split):
    """Small outputs split the input channels over a work group, sums in local (shared) memory:
    OpenCL conv2d with ``-D SPLIT`` (as on a GPU: local-memory tiles), Vulkan's conv_general
    over local z."""
    seen = record_dispatches(monkeypatch) if backend == "vulkan" else []
    if backend == "opencl":
        from mnnpy.backends.opencl import gemm

        monkeypatch.setattr(gemm, "LOCAL_TILES", True)  # as on a GPU
    model, feeds = conv_model(rng, xs, ws, attrs, after=after)
    s = check_backend(model, feeds, ACCUMULATE if precision == "normal" else HALF, backend, precision=precision)
    if backend == "opencl":
        assert "-D SPLIT=" in launch_key(s)
    else:
        assert seen[0].shader == "conv_general" and seen[0].local[2] == split


@pytest.mark.parametrize("tiles", [True, False], ids=["local-tiles", "direct"])
@pytest.mark.parametrize("case", [10, 11, 12], ids=["odd", "tiles", "thin"])
@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_pointwise_gemm_variants(rng, monkeypatch, backend, tiles, case):
    """OpenCL's 1x1 GEMM with local-memory tiles (GPUs) and with direct loads (CPU devices)."""
    from mnnpy.backends.opencl import gemm

    monkeypatch.setattr(gemm, "LOCAL_TILES", tiles)
    xs, ws, attrs, _ = GPU_CASES["opencl"][case]
    model, feeds = conv_model(rng, xs, ws, attrs, after=[GPU_ACTS["opencl"][2]])
    check_backend(model, feeds, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_pointwise_conv_on_a_small_map_splits_k(rng, monkeypatch, backend):
    """MobileNetV2's 1x1 convolutions on 7x7 maps: few work groups over K = 960, so split-K;
    the fused ReLU6 and the bias are applied once, in the second pass."""
    model, feeds = conv_model(rng, (1, 960, 7, 7), (320, 960, 1, 1), {}, after=[("Clip", {}, (0.0, 6.0))])
    _, picked = _picked(monkeypatch, backend, model, feeds)
    assert picked == ["gemm_nn", "gemm_splitk"]


# -- fp16 storage (precision="low") --------------------------------------------------------

# (x shape, w shape, attrs, activation after)
FP16 = {
    "opencl": [(*GPU_CASES["opencl"][i][:3], [("Clip", {}, (0.0, 6.0))]) for i in (0, 1, 3, 10, 11, 14)],
    "vulkan": [
        (*c, [("Relu", {}, ())])
        for c in [
            ((2, 5, 9, 11), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}),  # general
            ((1, 6, 10, 9), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),  # depthwise
            ((1, 9, 7, 5), (11, 9, 1, 1), {}),  # 1x1: the GEMM shader
            ((1, 6, 8, 7), (10, 3, 3, 3), {"group": 2, "pads": [1, 0, 1, 0]}),  # grouped
            ((1, 16, 9, 10), (32, 16, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),  # wider, strided
        ]
    ],
}
FP16_IDS = {
    "opencl": ["conv2d", "stem", "grouped", "gemm", "gemm-tiles", "depthwise"],
    "vulkan": ["general", "depthwise", "gemm", "grouped", "wide"],
}


@pytest.mark.parametrize("backend,xs,ws,attrs,after", backend_cases(FP16, FP16_IDS, precision="low"))
def test_fp16_storage(rng, backend, xs, ws, attrs, after):
    """Activations stored as fp16, arithmetic in fp32, weights fp32: within HALF of the CPU."""
    model, feeds = conv_model(rng, xs, ws, attrs, after=after)
    s = check_backend(model, feeds, HALF, backend, precision="low")
    assert storage_dtype(s) == np.float16


# -- ConvTranspose -------------------------------------------------------------------------

CPU_DECONVS = [
    ((1, 4, 7, 5), (4, 3, 3, 3), {}),
    ((2, 4, 7, 5), (4, 3, 2, 2), {"strides": [2, 2]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 4, 7, 5), (4, 3, 3, 2), {"strides": [2, 2], "dilations": [2, 3]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [3, 2], "output_padding": [2, 1]}),
    ((1, 6, 7, 5), (6, 2, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "output_shape": [14, 10]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 4, 7, 5), (4, 3, 4, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 4, 13), (4, 3, 4), {"strides": [3], "pads": [1, 2]}),
    ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2), {"strides": [2, 1, 2]}),
]
# (x shape, W shape (C, M/G, KH, KW), attrs, with bias): the GPUs' 2-D gather form
GPU_DECONVS = [
    ((1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}, True),  # PP-OCRv4 det
    ((1, 24, 13, 7), (24, 1, 2, 2), {"strides": [2, 2]}, True),  # PP-OCRv4 det, M=1
    ((2, 5, 7, 9), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),  # stride 1
    ((1, 4, 7, 6), (4, 13, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 1]}, False),
    ((1, 3, 5, 7), (3, 2, 3, 2), {"strides": [3, 2], "dilations": [2, 3]}, True),
    ((2, 6, 5, 5), (6, 2, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    ((1, 8, 7, 5), (8, 1, 4, 4), {"group": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]}, False),  # depthwise
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, True),
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}, True),
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "output_shape": [11, 13]}, True),
    ((1, 2, 9, 11), (2, 9, 5, 1), {"strides": [1, 3], "pads": [2, 0, 2, 0]}, True),
    ((1, 3, 4, 150), (3, 2, 3, 3), {}, True),  # a row of more than 64 invocations
    ((1, 2, 3, 3), (2, 3, 5, 5), {"strides": [1, 1], "pads": [3, 4, 3, 2]}, True),  # pads beyond the kernel reach
    ((3, 9, 2, 1), (9, 6, 1, 1), {"group": 3, "strides": [4, 5]}, False),  # 1x1, outputs reading no input
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [9, 8]}, True),  # negative pads
]
DECONVS = {"cpu": [(*c, bias) for bias in (True, False) for c in CPU_DECONVS], "opencl": GPU_DECONVS, "vulkan": GPU_DECONVS}
DECONV_IDS = {
    "cpu": [f"{'bias' if bias else 'nobias'}-{i}" for bias in (True, False) for i in range(len(CPU_DECONVS))],
    "opencl": [str(i) for i in range(len(GPU_DECONVS))],
    "vulkan": [str(i) for i in range(len(GPU_DECONVS))],
}
DECONV_W_SCALE = {"cpu": 0.5, "opencl": 1.0, "vulkan": 1.0}  # the weights each backend's cases were written with


@pytest.mark.parametrize("backend,xs,ws,attrs,bias", backend_cases(DECONVS, DECONV_IDS))
def test_conv_transpose(rng, backend, xs, ws, attrs, bias):
    model, x = deconv_model(rng, xs, ws, attrs, bias, DECONV_W_SCALE[backend])
    check_backend(model, {"x": x}, ACCUMULATE, backend)


def test_conv_transpose_second_run_new_shape(rng):
    w, b = rand(rng, 4, 3, 2, 2), rand(rng, 3)
    x1 = rand(rng, 1, 4, 7, 5)
    m = make_model(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2])],
        {"x": x1},
        ["y"],
        {"w": w, "b": b},
        input_shapes={"x": ["N", 4, "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 4, 9, 13)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv_transpose_weights_at_run_time_fall_back(rng, backend):
    x, w = rand(rng, 1, 3, 5, 5), rand(rng, 3, 2, 3, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = check_backend(model, {"x": x, "w": w}, ACCUMULATE, backend, on_device=False)
    assert f"fell back: {backend}: ConvTranspose weights/bias computed at run time" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv_transpose_1d_falls_back(rng, backend):
    x, w = rand(rng, 1, 3, 11), rand(rng, 3, 2, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2])], {"x": x}, ["y"], {"w": w})
    s = check_backend(model, {"x": x}, ACCUMULATE, backend, on_device=False)
    assert f"fell back: {backend}: ConvTranspose on rank 3" in s.partitions()


def _deconv_fp16_opencl(rng):
    """``(model, feeds)``: PP-OCRv4 det's 2x2 stride-2 ConvTranspose, inputs scaled by 1/4."""
    model, x = deconv_model(rng, (1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}, True)
    return model, {"x": x * np.float32(0.25)}


def _deconv_fp16_vulkan(rng):
    """``(model, feeds)``: a 3x3 stride-2 padded ConvTranspose with bias."""
    x, w, b = rand(rng, 1, 5, 6, 7), rand(rng, 5, 3, 3, 3, scale=0.3), rand(rng, 3)
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])
    return make_model([node], {"x": x}, ["y"], {"w": w, "b": b}), {"x": x}


@pytest.mark.parametrize(
    "backend,build", backend_cases({"opencl": [_deconv_fp16_opencl], "vulkan": [_deconv_fp16_vulkan]}, precision="low")
)
def test_conv_transpose_fp16(rng, backend, build):
    check_backend(*build(rng), HALF, backend, precision="low")


# -- several convolutions: shared temporaries, chains, real-model blocks --------------------


def test_chained_convs_share_temporaries_correctly(rng):
    """CPU: Executions share one workspace: every run must rewrite the padding zeros and bias ones."""
    x = rand(rng, 1, 8, 15, 13)
    inits = {
        "w1": rand(rng, 12, 8, 3, 3, scale=0.3),
        "b1": rand(rng, 12),
        "w2": rand(rng, 12, 1, 5, 5, scale=0.3),
        "b2": rand(rng, 12),
        "w3": rand(rng, 5, 12, 3, 3, scale=0.3),
        "b3": rand(rng, 5),
        "w4": rand(rng, 6, 5, 7, 7, scale=0.3),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["a"], ["a2"]),
        helper.make_node("Conv", ["a2", "w2", "b2"], ["b"], pads=[2, 2, 2, 2], group=12),
        helper.make_node("Conv", ["b", "w3", "b3"], ["c"], pads=[1, 0, 1, 2]),
        helper.make_node("Conv", ["c", "w4"], ["y"], pads=[3, 3, 3, 3], strides=[2, 2]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], inits)
    session = mnnpy.Interpreter(convert(model)).create_session()
    for _ in range(3):
        xk = rand(rng, 1, 8, 15, 13)
        np.testing.assert_allclose(session.run({"x": xk})["y"], run_ort(model, {"x": xk})[0], **ACCUMULATE)


@pytest.mark.parametrize(
    "xs,k,attrs,act",
    [
        ((1, 24, 5, 19), 5, {"pads": [2, 2, 2, 2]}, None),
        ((2, 7, 3, 13), 3, {"pads": [1, 0, 1, 2]}, None),
        ((1, 8, 4, 11), 3, {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, "Relu"),
        ((1, 5, 2, 9), 5, {"pads": [2, 2, 2, 2]}, "HardSwish"),
    ],
)
def test_depthwise_on_short_maps_channels_innermost(rng, monkeypatch, xs, k, attrs, act):
    """CPU without numba: short, wide maps (PP-OCR rec) take the channels-innermost NumPy
    depthwise kernel (with numba, ``tests/test_depthwise_numba.py``)."""
    from mnnpy.backends.cpu.ops import depthwise

    monkeypatch.setattr(depthwise, "depthwise_kernels", lambda: None)
    c = xs[1]
    x, w, b = rand(rng, *xs), rand(rng, c, 1, k, k, scale=0.5), rand(rng, c)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t" if act else "y"], group=c, **attrs)]
    if act:
        nodes.append(helper.make_node(act, ["t"], ["y"]))
    model = make_model(nodes, {"x": x}, ["y"], {"w": w, "b": b})
    session = mnnpy.Interpreter(convert(model)).create_session()
    assert type(executions(session)[0].kernel).__name__ == "_DepthwiseRows"
    check(model, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_chain_of_convs(rng, monkeypatch, backend):
    """1x1 expand -> depthwise -> 1x1 project + residual (MobileNetV2's block): the three
    shaders one after another in one command buffer, barriers between them."""
    x = rand(rng, 1, 6, 11, 9)
    inits = {
        "w1": he_weights(rng, 18, 6, 1, 1),
        "b1": rand(rng, 18),
        "w2": he_weights(rng, 18, 1, 3, 3),
        "b2": rand(rng, 18),
        "w3": he_weights(rng, 6, 18, 1, 1),
        "b3": rand(rng, 6),
        "lo": np.float32(0),
        "hi": np.float32(6),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=18, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "x"], ["y"]),
    ]
    _, picked = _picked(monkeypatch, backend, make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    assert picked == ["gemm_nn", "conv_depthwise", "gemm_nn", "binary_add"]


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_mobilenetv2_block(rng, backend):
    """Inverted residual: 1x1 expand + Clip(0, 6), depthwise 3x3 + Clip, 1x1 project, residual
    Add; then GlobalAveragePool, Flatten and the classifier Gemm (transB)."""
    c, e = 12, 36
    x = rand(rng, 2, c, 15, 15)
    inits = {
        "w1": he_weights(rng, e, c, 1, 1),
        "b1": rand(rng, e, scale=0.1),
        "w2": he_weights(rng, e, 1, 3, 3),
        "b2": rand(rng, e, scale=0.1),
        "w3": he_weights(rng, c, e, 1, 1),
        "b3": rand(rng, c, scale=0.1),
        "lo": np.float32(0),
        "hi": np.float32(6),
        "fc": he_weights(rng, 10, c),
        "fb": rand(rng, 10, scale=0.1),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"]),
        helper.make_node("Clip", ["a", "lo", "hi"], ["a6"]),
        helper.make_node("Conv", ["a6", "w2", "b2"], ["d"], group=e, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]),
        helper.make_node("Conv", ["d6", "w3", "b3"], ["p"]),
        helper.make_node("Add", ["p", "x"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1),
    ]
    desc = check_backend(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, ACCUMULATE, backend).partitions()
    assert "Clip '" not in desc  # both Clips fused


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_resnet_block(rng, backend):
    """Stem (7x7 stride 2 + BatchNorm + Relu) and a basic block with a 1x1 stride-2 shortcut."""
    x = rand(rng, 1, 3, 32, 32)
    bn = {f"bn_{k}": v for k, v in zip(("s", "b", "m", "v"), (rand(rng, 16) * 0.2 + 1, rand(rng, 16) * 0.1, rand(rng, 16) * 0.1))}
    bn["bn_v"] = np.abs(rand(rng, 16)) + 0.5
    inits = {
        "w0": he_weights(rng, 16, 3, 7, 7),
        **bn,
        "w1": he_weights(rng, 24, 16, 3, 3),
        "w2": he_weights(rng, 24, 24, 3, 3),
        "ws": he_weights(rng, 24, 16, 1, 1),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["s0"], pads=[3, 3, 3, 3], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["s0", "bn_s", "bn_b", "bn_m", "bn_v"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["s"]),
        helper.make_node("Conv", ["s", "w1"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["a"], ["ar"]),
        helper.make_node("Conv", ["ar", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["s", "ws"], ["sc"], strides=[2, 2]),
        helper.make_node("Add", ["b", "sc"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    desc = check_backend(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, ACCUMULATE, backend).partitions()
    assert "BatchNormalization '" not in desc  # folded into the stem Conv, its Relu fused


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_ppocr_block(rng, backend):
    """PP-OCR style: depthwise 5x5 stride 2 with HardSwish, 1x1 with HardSwish, odd channels."""
    x = rand(rng, 1, 9, 24, 40)
    inits = {"w1": he_weights(rng, 9, 1, 5, 5), "w2": he_weights(rng, 27, 9, 1, 1), "b2": rand(rng, 27, scale=0.1)}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["d"], group=9, pads=[2, 2, 2, 2], strides=[2, 2]),
        helper.make_node("HardSwish", ["d"], ["dh"]),
        helper.make_node("Conv", ["dh", "w2", "b2"], ["p"]),
        helper.make_node("HardSwish", ["p"], ["y"]),
    ]
    check_backend(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_deconv_batchnorm_chain(rng, backend):
    """PP-OCRv4 det's head: ConvTranspose -> BatchNormalization -> Relu -> ConvTranspose -> Sigmoid."""
    x = rand(rng, 1, 24, 9, 7)
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w0", "b0"], ["d0"], strides=[2, 2], kernel_shape=[2, 2]),
        helper.make_node("BatchNormalization", ["d0", "s", "b", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("ConvTranspose", ["r", "w1", "b1"], ["d1"], strides=[2, 2], kernel_shape=[2, 2]),
        helper.make_node("Sigmoid", ["d1"], ["y"]),
    ]
    c = 24
    inits = {
        "w0": rand(rng, c, c, 2, 2, scale=0.3),
        "b0": rand(rng, c),
        "s": rand(rng, c),
        "b": rand(rng, c),
        "m": rand(rng, c),
        "v": np.abs(rand(rng, c)) + np.float32(0.5),
        "w1": rand(rng, c, 1, 2, 2, scale=0.3),
        "b1": rand(rng, 1),
    }
    check_backend(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_deconv_resize_chain(rng, backend):
    """PP-OCRv4 det's neck and head: nearest upsample -> Concat -> ConvTranspose -> Sigmoid."""
    a, b = rand(rng, 1, 4, 5, 7), rand(rng, 1, 4, 10, 14)
    nodes = [
        helper.make_node(
            "Resize", ["a", "", "sc"], ["u"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
        ),
        helper.make_node("Concat", ["u", "b"], ["c"], axis=1),
        helper.make_node("ConvTranspose", ["c", "w", "bias"], ["d"], strides=[2, 2], kernel_shape=[2, 2]),
        helper.make_node("Sigmoid", ["d"], ["y"]),
    ]
    inits = {"sc": np.array([1, 1, 2, 2], np.float32), "w": rand(rng, 8, 3, 2, 2), "bias": rand(rng, 3)}
    check_backend(make_model(nodes, {"a": a, "b": b}, ["y"], inits), {"a": a, "b": b}, ACCUMULATE, backend)


# -- large kernels: no Python loop over taps (issue 12 defect 3) ---------------------------

WINDOWED_CASES = [
    # more than MAX_TAP_LOOP taps: pads, strides, dilations, groups, batch, 1-D and 3-D
    ((1, 3, 40, 37), (4, 3, 17, 17), {"pads": [8, 3, 8, 5]}),
    ((2, 4, 41, 45), (6, 2, 9, 31), {"group": 2, "strides": [2, 3], "dilations": [2, 1], "pads": [1, 2, 3, 4]}),
    ((1, 4, 30, 30), (4, 1, 20, 20), {"group": 4, "pads": [2, 2, 2, 2]}),
    ((1, 2, 700), (3, 2, 300), {"strides": [7], "pads": [5, 9]}),
    ((1, 2, 9, 10, 11), (3, 2, 7, 7, 7), {"pads": [1, 2, 3, 3, 2, 1], "strides": [1, 2, 1]}),
]


@pytest.mark.parametrize("xs,ws,attrs", WINDOWED_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_large_kernel_windowed(rng, monkeypatch, xs, ws, attrs, bias):
    from mnnpy.backends.cpu.ops import conv, depthwise

    monkeypatch.setattr(conv, "CHUNK_BYTES", 4096)  # several chunks of output rows
    monkeypatch.setattr(depthwise, "depthwise_kernels", lambda: None)  # depthwise: NumPy as without numba
    model, feeds = conv_model(rng, xs, ws, attrs, bias, **SCALES["cpu"])
    s = check_backend(model, feeds, ACCUMULATE, "cpu")
    assert [type(e.kernel).__name__ for e in executions(s, "Conv")] == ["_Windowed"]


def test_conv_huge_kernel_is_fast(rng):
    """A valid 2000x2000 kernel (4 million taps) on a 2000x2000 map: one output, under 1 s
    (milliseconds now; the loop over taps took 4.8 s here, a 4000x4000 kernel 99 s)."""
    import time

    x, w = rand(rng, 1, 1, 2000, 2000), rand(rng, 2, 1, 2000, 2000)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": w})
    s = mnnpy.Interpreter(convert(model)).create_session(backend="cpu")
    s.run({"x": x})
    t0 = time.perf_counter()
    (y,) = s.run({"x": x}).values()
    assert time.perf_counter() - t0 < 1.0
    np.testing.assert_allclose(y.reshape(2), (w[:, 0] * x[0, 0]).sum(axis=(1, 2)), rtol=1e-3, atol=1e-2)

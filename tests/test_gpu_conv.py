"""Conv on every GPU backend against the CPU: the general (register-blocked), depthwise and
1x1-GEMM kernels/shaders on small odd shapes (channel counts not multiples of 4), batch 2,
pads/strides/dilations/auto_pad, groups, each fused activation, bias or none, a second input
shape, and the CPU fallbacks with their reasons. Each backend is skipped, with the reason, where
it is unusable (CI: PoCL, lavapipe). Backend-only checks live in tests/test_opencl_conv.py and
tests/test_vulkan_conv.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import ACCUMULATE, GPU_API, compare, gpu_backends, gpu_cases, sessions
from tests.backend_compare import conv_model as _conv
from tests.backend_compare import he_weights as _weights
from tests.oracle import make_model, rand


def _compare_kernels(monkeypatch, backend, model, feeds, on_device=True, **options):
    """``compare`` (ACCUMULATE); returns (device session, kernels picked): OpenCL: the kernel
    of the first execution; Vulkan: the SPIR-V variant of every dispatch described at resize,
    in order."""
    picked: list[str] = []
    if backend == "vulkan":
        from mnnpy.backends.vulkan.execution import VulkanExecution

        real = VulkanExecution.dispatch

        def spy(self, shader, *args, **kwargs):
            picked.append(shader)
            return real(self, shader, *args, **kwargs)

        monkeypatch.setattr(VulkanExecution, "dispatch", spy)
    s = compare(model, feeds, ACCUMULATE, on_device, backend=backend, **options)
    if backend == "opencl":
        picked.append(next(iter(s._plan.executions.values())).launch.kernel.function_name)
    return s, picked


# (x shape, w shape, attrs, kernel/shader the Execution picks)
CASES = {
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
IDS = {
    "opencl": [f"{c[3]}-{'x'.join(map(str, c[1]))}-{i}" for i, c in enumerate(CASES["opencl"])],
    "vulkan": [f"{c[3]}-{c[0]}-{c[1]}-{'-'.join(c[2])}" for c in CASES["vulkan"]],
}


@pytest.mark.parametrize("backend,xs,ws,attrs,kernel", gpu_cases(CASES, IDS))
def test_conv(rng, monkeypatch, backend, xs, ws, attrs, kernel):
    _, picked = _compare_kernels(monkeypatch, backend, *_conv(rng, xs, ws, attrs))
    assert picked == [kernel]


NO_BIAS = {"opencl": [0, 10, 13], "vulkan": list(range(len(CASES["vulkan"])))[::3]}


@pytest.mark.parametrize(
    "backend,xs,ws,attrs,kernel",
    gpu_cases({b: [CASES[b][i] for i in v] for b, v in NO_BIAS.items()}, {b: [IDS[b][i] for i in v] for b, v in NO_BIAS.items()}),
)
def test_conv_no_bias(rng, monkeypatch, backend, xs, ws, attrs, kernel):
    _, picked = _compare_kernels(monkeypatch, backend, *_conv(rng, xs, ws, attrs, bias=False))
    assert picked == [kernel]


ACTS = {
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
ACT_CASES = {"opencl": [0, 10, 13], "vulkan": [0, 3, 11, 13, 15, 16]}
ACT_CASE_IDS = {
    "opencl": ["conv2d", "gemm", "depthwise"],
    "vulkan": [f"{CASES['vulkan'][i][3]}-{CASES['vulkan'][i][0]}" for i in ACT_CASES["vulkan"]],
}
ACT_IDS = {"opencl": [a[0] for a in ACTS["opencl"]], "vulkan": [f"{a[0]}{len(a[2])}" for a in ACTS["vulkan"]]}


@pytest.mark.parametrize(
    "backend,act,case",
    gpu_cases(
        {b: [(a, CASES[b][c]) for a in ACTS[b] for c in ACT_CASES[b]] for b in ACTS},
        {b: [f"{a}-{c}" for a in ACT_IDS[b] for c in ACT_CASE_IDS[b]] for b in ACTS},
    ),
)
def test_fused_activation(rng, monkeypatch, backend, act, case):
    """The converter fuses the activation into Conv; the kernel applies it (one op, one launch)."""
    xs, ws, attrs, kernel = case
    s, picked = _compare_kernels(monkeypatch, backend, *_conv(rng, xs, ws, attrs, after=[act]))
    desc = s.partitions()
    assert f"1 ops on {backend}" in desc and act[0] + " '" not in desc, desc  # fused into the Conv
    assert desc.count("\n  ") == 1, desc  # Conv alone
    assert picked == [kernel]


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
    model, _ = _conv(rng, xs, ws, attrs, after=after)
    for i, name in enumerate("nchw"):
        if name in dynamic:
            model.graph.input[0].type.tensor_type.shape.dim[i].dim_param = name
    out = model.graph.output[0].name
    dev, cpu = sessions(model, backend=backend)
    for shape in DYNAMIC_SHAPES[backend]:
        x = rand(rng, *shape)
        np.testing.assert_allclose(dev.run({"x": x})[out], cpu.run({"x": x})[out], atol=ACCUMULATE[0], rtol=ACCUMULATE[1])


CONV1D = {"opencl": ((1, 4, 17), (5, 4, 3), {"pads": [1, 1]}), "vulkan": ((1, 3, 17), (4, 3, 3), {})}


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv1d_falls_back(rng, backend):
    xs, ws, attrs = CONV1D[backend]
    model, feeds = _conv(rng, xs, ws, attrs, bias=backend == "vulkan")
    s = compare(model, feeds, ACCUMULATE, on_device=False, backend=backend)
    assert f"Conv with 1 spatial dims ({GPU_API[backend]} runs 2-D)" in s.partitions()


RUN_TIME_WEIGHTS = {"opencl": ((1, 4, 9, 9), (5, 4, 3, 3)), "vulkan": ((1, 3, 7, 7), (4, 3, 3, 3))}


@pytest.mark.parametrize("backend", gpu_backends())
def test_weights_at_run_time_fall_back(rng, backend):
    xs, ws = RUN_TIME_WEIGHTS[backend]
    x, w = rand(rng, *xs), _weights(rng, *ws)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = compare(model, {"x": x, "w": w}, ACCUMULATE, on_device=False, backend=backend)
    assert "Conv weights computed at run time" in s.partitions()

"""ConvTranspose (2-D, gather form) and BatchNormalization (inference, folded to one affine
pass) on every GPU backend against the CPU backend; fallbacks with their reasons. Each backend is
skipped, with the reason, where it is unusable (CI: PoCL, lavapipe). Backend-only checks live in
tests/test_opencl_misc.py, tests/test_vulkan_misc.py and tests/test_vulkan_reduce.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import ACCUMULATE, ELEMENTWISE, GPU_API, compare, gpu_backends, gpu_cases
from tests.backend_compare import deconv_model as _deconv_model
from tests.oracle import make_model, rand

# (x shape, W shape (C, M/G, KH, KW), attrs, with bias)
DECONVS = [
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


@pytest.mark.parametrize("xs,ws,attrs,bias", DECONVS, ids=[str(i) for i in range(len(DECONVS))])
@pytest.mark.parametrize("backend", gpu_backends())
def test_conv_transpose(rng, backend, xs, ws, attrs, bias):
    model, x = _deconv_model(rng, xs, ws, attrs, bias)
    compare(model, {"x": x}, ACCUMULATE, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv_transpose_weights_at_run_time_fall_back(rng, backend):
    x, w = rand(rng, 1, 3, 5, 5), rand(rng, 3, 2, 3, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = compare(model, {"x": x, "w": w}, ACCUMULATE, on_device=False, backend=backend)
    assert f"fell back: {backend}: ConvTranspose weights/bias computed at run time" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv_transpose_1d_falls_back(rng, backend):
    x, w = rand(rng, 1, 3, 11), rand(rng, 3, 2, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2])], {"x": x}, ["y"], {"w": w})
    s = compare(model, {"x": x}, ACCUMULATE, on_device=False, backend=backend)
    assert f"fell back: {backend}: ConvTranspose on rank 3" in s.partitions()


# -- BatchNormalization ---------------------------------------------------------------------


BN_OPSET = {"opencl": 17, "vulkan": 14}  # the opsets each backend's tests were written for
TRAINING_OPSET = {"opencl": 17, "vulkan": 15}


def _batchnorm(rng, backend, shape, dynamic=(), tol=ELEMENTWISE, on_device=True, opset=None, **attrs):
    """``dynamic``: names of scale/B/mean/var (``s``, ``b``, ``m``, ``v``) fed as graph inputs."""
    c = shape[1] if len(shape) > 1 else 1
    x = rand(rng, *shape)
    params = {"s": rand(rng, c), "b": rand(rng, c), "m": rand(rng, c), "v": np.abs(rand(rng, c)) + np.float32(0.1)}
    node = helper.make_node("BatchNormalization", ["x", *params], ["y"], **attrs)
    feeds = {"x": x, **{k: v for k, v in params.items() if k in dynamic}}
    inits = {k: v for k, v in params.items() if k not in dynamic}
    model = make_model([node], feeds, ["y"], inits, opset=opset or BN_OPSET[backend])
    return compare(model, feeds, tol, on_device=on_device, backend=backend)


# (x shape, epsilon)
BATCHNORMS = {
    "opencl": [((2, 7, 13, 5), 1e-3), ((3, 11), 1e-3), ((1, 5, 3, 4, 7), 1e-3), ((2, 3, 17), 1e-3)],
    "vulkan": [
        *((s, 1e-5) for s in [(2, 3, 13, 7), (1, 5, 31), (3, 7), (1, 1, 1, 1), (2, 3, 4, 5, 3), (1, 130, 1, 1)]),
        ((2, 4, 5, 5), 0.5),
    ],
}


@pytest.mark.parametrize("backend,shape,epsilon", gpu_cases(BATCHNORMS, ids=lambda c: f"{c[0]}-eps{c[1]}"))
def test_batchnorm(rng, backend, shape, epsilon):
    _batchnorm(rng, backend, shape, epsilon=epsilon)


RUN_TIME_PARAMS = {"opencl": ("m",), "vulkan": ("s", "b", "m", "v")}  # OpenCL: the mean alone; Vulkan: all four


@pytest.mark.parametrize("backend", gpu_backends())
def test_batchnorm_run_time_params_fall_back(rng, backend):
    s = _batchnorm(rng, backend, (2, 3, 5, 5), dynamic=RUN_TIME_PARAMS[backend], on_device=False)
    want = f"BatchNormalization scale/B/mean/var computed at run time ({GPU_API[backend]} folds constants)"
    assert want in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_batchnorm_training_mode_falls_back(rng, backend):
    s = _batchnorm(rng, backend, (2, 3, 5, 5), tol=ACCUMULATE, on_device=False, opset=TRAINING_OPSET[backend], training_mode=1)
    assert f"BatchNormalization training_mode=1 ({GPU_API[backend]} runs inference only)" in s.partitions()

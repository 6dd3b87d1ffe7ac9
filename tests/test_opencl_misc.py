"""OpenCL ConvTranspose (2-D, gather form) and BatchNormalization (inference, folded to the
``affine`` kernel) against the CPU backend; fp16; fallbacks with reasons. Skipped, with the
reason, where no OpenCL device is usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, ELEMENTWISE, HALF, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)

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
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "output_shape": [11, 13]}, True),
    ((1, 2, 9, 11), (2, 9, 5, 1), {"strides": [1, 3], "pads": [2, 0, 2, 0]}, True),
]


def _deconv_model(rng, xs, ws, attrs, bias):
    x, w = rand(rng, *xs), rand(rng, *ws)
    m = ws[1] * attrs.get("group", 1)
    inits, names = {"w": w}, ["x", "w"]
    if bias:
        inits["b"] = rand(rng, m)
        names.append("b")
    return make_model([helper.make_node("ConvTranspose", names, ["y"], **attrs)], {"x": x}, ["y"], inits), x


@pytest.mark.parametrize("xs,ws,attrs,bias", DECONVS, ids=[str(i) for i in range(len(DECONVS))])
def test_conv_transpose(rng, xs, ws, attrs, bias):
    model, x = _deconv_model(rng, xs, ws, attrs, bias)
    compare(model, {"x": x}, ACCUMULATE)


def test_conv_transpose_fp16(rng):
    model, x = _deconv_model(rng, (1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}, True)
    compare(model, {"x": x * np.float32(0.25)}, HALF, precision="low")


def test_conv_transpose_weights_at_run_time_fall_back(rng):
    x, w = rand(rng, 1, 3, 5, 5), rand(rng, 3, 2, 3, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = compare(model, {"x": x, "w": w}, ACCUMULATE, on_device=False)
    assert "fell back: opencl: ConvTranspose weights/bias computed at run time" in s.partitions()


def test_conv_transpose_1d_falls_back(rng):
    x, w = rand(rng, 1, 3, 11), rand(rng, 3, 2, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2])], {"x": x}, ["y"], {"w": w})
    s = compare(model, {"x": x}, ACCUMULATE, on_device=False)
    assert "fell back: opencl: ConvTranspose on rank 3" in s.partitions()


def _bn_model(rng, shape, c, **attrs):
    x = rand(rng, *shape)
    inits = {"s": rand(rng, c), "b": rand(rng, c), "m": rand(rng, c), "v": np.abs(rand(rng, c)) + np.float32(0.1)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], **attrs)
    return make_model([node], {"x": x}, ["y"], inits), x


@pytest.mark.parametrize("shape", [(2, 7, 13, 5), (3, 11), (1, 5, 3, 4, 7), (2, 3, 17)])
def test_batchnorm(rng, shape):
    model, x = _bn_model(rng, shape, shape[1], epsilon=1e-3)
    compare(model, {"x": x}, ELEMENTWISE)


def test_batchnorm_fp16(rng):
    model, x = _bn_model(rng, (1, 24, 13, 7), 24)
    compare(model, {"x": x}, HALF, precision="low")


def test_batchnorm_statistics_at_run_time_fall_back(rng):
    x, m = rand(rng, 2, 3, 5, 5), rand(rng, 3)
    inits = {"s": rand(rng, 3), "b": rand(rng, 3), "v": np.abs(rand(rng, 3)) + np.float32(0.1)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])
    s = compare(make_model([node], {"x": x, "m": m}, ["y"], inits), {"x": x, "m": m}, ACCUMULATE, on_device=False)
    assert "BatchNormalization scale/B/mean/var computed at run time" in s.partitions()


def test_batchnorm_training_mode_falls_back(rng):
    model, x = _bn_model(rng, (2, 3, 5, 5), 3, training_mode=1)
    s = compare(model, {"x": x}, ACCUMULATE, on_device=False)
    assert "BatchNormalization training_mode=1" in s.partitions()


def test_deconv_batchnorm_chain(rng):
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
    compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, ACCUMULATE)

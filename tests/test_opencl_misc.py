"""OpenCL-only ConvTranspose and BatchNormalization checks: fp16 storage (``precision="low"``) and
PP-OCRv4 det's ConvTranspose/BatchNormalization head. What both GPU backends do is in
tests/test_gpu_misc.py. Skipped, with the reason, where no OpenCL device is usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, HALF, compare
from tests.backend_compare import deconv_model as _deconv_model
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def test_conv_transpose_fp16(rng):
    model, x = _deconv_model(rng, (1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}, True)
    compare(model, {"x": x * np.float32(0.25)}, HALF, precision="low")


def _bn_model(rng, shape, c, **attrs):
    x = rand(rng, *shape)
    inits = {"s": rand(rng, c), "b": rand(rng, c), "m": rand(rng, c), "v": np.abs(rand(rng, c)) + np.float32(0.1)}
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], **attrs)
    return make_model([node], {"x": x}, ["y"], inits), x


def test_batchnorm_fp16(rng):
    model, x = _bn_model(rng, (1, 24, 13, 7), 24)
    compare(model, {"x": x}, HALF, precision="low")


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

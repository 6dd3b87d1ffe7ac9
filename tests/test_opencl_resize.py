"""OpenCL-only Resize checks: fp16 storage (``precision="low"``), nearest and bilinear. What both
GPU backends do is in tests/test_gpu_resize.py. Skipped, with the reason, where no OpenCL
device is usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import HALF, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def _model(x, scales=None, sizes=None, **attrs):
    inits = {}
    names = ["x", ""]
    if scales is not None:
        inits["sc"] = np.array(scales, np.float32)
        names.append("sc")
    else:
        inits["sz"] = np.array(sizes, np.int64)
        names += ["", "sz"]
    return make_model([helper.make_node("Resize", names, ["y"], **attrs)], {"x": x}, ["y"], inits)


def test_nearest_fp16(rng):
    x = rand(rng, 1, 4, 13, 7)
    model = _model(x, scales=[1, 1, 2, 2], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    compare(model, {"x": x}, HALF, precision="low")


def test_linear_fp16(rng):
    x = rand(rng, 1, 4, 13, 7)
    compare(_model(x, sizes=[1, 4, 20, 31], mode="linear"), {"x": x}, HALF, precision="low")

"""OpenCL-only Resize checks: fp16 storage (``precision="low"``), nearest and bilinear. What both
GPU backends do is in tests/test_gpu_resize.py. Skipped, with the reason, where no OpenCL
device is usable."""

from __future__ import annotations

import pytest

from mnnpy.backend import backend_availability
from tests.backend_compare import HALF, compare
from tests.backend_compare import resize_model as _model
from tests.oracle import rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def test_nearest_fp16(rng):
    x = rand(rng, 1, 4, 13, 7)
    model = _model(x, scales=[1, 1, 2, 2], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    compare(model, {"x": x}, HALF, precision="low")


def test_linear_fp16(rng):
    x = rand(rng, 1, 4, 13, 7)
    compare(_model(x, sizes=[1, 4, 20, 31], mode="linear"), {"x": x}, HALF, precision="low")

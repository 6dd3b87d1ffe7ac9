"""OpenCL-only pooling checks: fp16 storage (``precision="low"``) for every pooling op. What both
GPU backends do is in tests/test_gpu_pool.py.

Skipped, with the reason, where no OpenCL device is usable.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, HALF, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def _pool(rng, op, shape, attrs, opset=17, special=False, **kw):
    x = rand(rng, *shape)
    if special:
        x.flat[[0, 5, 40, 77]] = [np.nan, np.inf, -np.inf, np.nan]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)
    return compare(model, {"x": x}, kw.pop("tol", ACCUMULATE), **kw)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 29, 31), (1, 2, 301, 299)])
def test_fp16(rng, op, shape):
    attrs = {} if op.startswith("Global") else {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    s = _pool(rng, op, shape, attrs, tol=HALF, precision="low")
    assert s.backends[0].storage == np.float16

"""OpenCL fp16 storage (``precision="low"``), the feature itself: tensors are stored as fp16
(vstore_half) with arithmetic in fp32, so rounding is visible; values beyond fp16's range
upload as inf without a NumPy warning; partition borders cross as float32 with a cast kernel
on the device. Each op family's fp16 kernels are checked against the CPU within ``HALF`` in
its module (``test_<family>.py``, the ``*fp16*`` tests).

Skipped, with the reason, where no OpenCL device is usable (CI installs PoCL).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability
from mnnpy.converter import convert
from tests.backend_compare import compare, device_backend, partitioned_model, sessions, storage_dtype
from tests.oracle import HALF, make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def test_fp16_storage(rng):
    """precision="low": tensors stored as fp16 (vstore_half), arithmetic in fp32."""
    a, b = rand(rng, 5, 9, 31, scale=3), rand(rng, 9, 1)
    model = make_model(
        [helper.make_node("Mul", ["a", "w"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])], {"a": a}, ["y"], {"w": b}
    )
    dev = compare(model, {"a": a}, HALF, precision="low")
    assert storage_dtype(dev) == np.float16
    # fp16 storage really rounds: the result differs from fp32 somewhere, but within HALF
    full = sessions(model)[0].run({"a": a})["y"]
    assert not np.array_equal(dev.run({"a": a})["y"], full)


def test_fp16_upload_beyond_half_range_is_inf_without_warning(rng):
    import warnings

    x = np.array([1e5, -7e4, 6e4, 1.0], np.float32)
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    s = mnnpy.Interpreter(convert(model)).create_session(backend="opencl", precision="low")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = s.run({"x": x})["y"]
    np.testing.assert_array_equal(y, [np.inf, 0.0, float(np.float16(6e4)), 1.0])


def test_fp16_partition_borders_cross_as_float32(rng):
    """precision="low": each border tensor has a float32 device buffer and a cast kernel
    (the host converts nothing); GPU -> CPU -> GPU partitions over two input shapes."""
    model = partitioned_model(rng)
    interp = mnnpy.Interpreter(convert(model))
    s, cpu = interp.create_session(backend=["opencl", "cpu"], precision="low"), interp.create_session(backend="cpu")
    z = rand(rng, 3, 1, 1)
    for shape in [(1, 3, 13, 7), (1, 3, 5, 9)]:
        x = rand(rng, *shape)
        got, want = s.run({"x": x, "z": z})["y"], cpu.run({"x": x, "z": z})["y"]
        np.testing.assert_allclose(got, want, **HALF)
    borders = device_backend(s)._borders
    kinds = sorted(k for d in borders.values() for k in d)
    assert kinds.count(True) >= 2 and kinds.count(False) >= 2, kinds  # uploads and downloads of both shapes

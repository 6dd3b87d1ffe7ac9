"""Vulkan fp16 storage (``precision="low"``), the feature itself: activations are stored as
float16 (storageBuffer16BitAccess; rounding to fp16 is visible, values beyond its range become
inf), a device without the feature falls back to fp32 storage with a warning, and partition
borders cross as float32 with a cast on the device.

Each shader family's ``_f16`` twin is checked against the CPU within ``HALF`` in its op
family's module (``test_<family>.py``, the ``*fp16*`` tests); the real models with fp16
storage in ``test_real_models.py``. Skipped, with the reason, where Vulkan is unusable or the
device has no 16-bit storage (lavapipe has it; CI installs lavapipe).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability, get_runtime
from mnnpy.converter import convert
from tests.backend_compare import device_backend, partitioned_model
from tests.oracle import HALF, make_model, rand

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)
if not get_runtime("vulkan").storage16:
    pytest.skip("this Vulkan device has no storageBuffer16BitAccess", allow_module_level=True)


def test_storage_is_float16(rng):
    """Activations are stored as float16: 1 + 2^-12 reads back as 1 after a copy (fp32 keeps it);
    values beyond fp16's range become inf without a NumPy warning."""
    x = np.array([[1 + 2**-12, 3.0, 70000.0, -1e6]], np.float32)
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    interp = mnnpy.Interpreter(convert(m))
    low = interp.create_session(backend="vulkan", precision="low")
    high = interp.create_session(backend="vulkan", precision="high")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = low.run({"x": x})["y"]
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [[1.0, 3.0, np.inf, 0.0]])
    np.testing.assert_array_equal(high.run({"x": x})["y"], np.maximum(x, 0))
    vk = device_backend(low)
    assert vk.name == "vulkan" and vk.half and vk.storage == np.float16


def test_without_16bit_storage_says_so_and_stores_fp32(rng, monkeypatch):
    rt = get_runtime("vulkan")
    monkeypatch.setattr(rt, "storage16", False)
    x = np.array([[1 + 2**-12, -2.0]], np.float32)
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    with pytest.warns(RuntimeWarning, match="storageBuffer16BitAccess"):
        s = mnnpy.Interpreter(convert(m)).create_session(backend="vulkan", precision="low")
    np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(x, 0))


def test_partition_borders_cross_as_float32(rng):
    """GPU -> CPU -> GPU partitions: each border tensor is staged as float32 and cast on the
    device (the host converts nothing), over two input shapes."""
    model = partitioned_model(rng)
    interp = mnnpy.Interpreter(convert(model))
    s = interp.create_session(backend=["vulkan", "cpu"], precision="low")
    cpu = interp.create_session(backend="cpu")
    z = rand(rng, 3, 1, 1)
    for shape in [(1, 3, 13, 7), (1, 3, 5, 9)]:
        x = rand(rng, *shape)
        got, want = s.run({"x": x, "z": z})["y"], cpu.run({"x": x, "z": z})["y"]
        np.testing.assert_allclose(got, want, **HALF)
    assert s.partitions().splitlines()[0].startswith("3 partitions"), s.partitions()
    staged = [t for part in device_backend(s)._last_parts for t in part.uploads + part.downloads]
    assert staged and all(t.dtype == np.float32 for t in staged)
    casts = [d.label for part in device_backend(s)._last_parts for d in part.dispatches if d.label == "Cast"]
    assert len(casts) == len(staged)

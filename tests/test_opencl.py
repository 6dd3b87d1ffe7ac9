"""OpenCL backend: device choice, ``auto``, fp16 storage and uploads, border casts, allocation
and index limits. The elementwise ops on every GPU backend are in tests/test_gpu_elementwise.py.

Skipped, with the reason, where no OpenCL device is usable (CI installs PoCL).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability
from mnnpy.converter import convert
from tests.backend_compare import ELEMENTWISE, HALF, compare, partitioned_model, sessions
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def test_auto_picks_opencl_on_a_gpu_only(rng, monkeypatch):
    """``auto`` takes OpenCL when its device is a GPU or accelerator, not on a CPU device
    (PoCL), where the NumPy backend is faster; by name it is always used."""
    import pyopencl as cl

    from mnnpy.backends import opencl
    from mnnpy.backends.opencl.device import find_device
    from mnnpy.backends.vulkan.runtime import VulkanRuntime

    interp = mnnpy.Interpreter(convert(partitioned_model(rng)))
    device = find_device(None)[0]
    on_gpu = not device.type & cl.device_type.CPU
    names = [b.name for b in interp.create_session(backend="auto").backends]
    assert ("opencl" in names) == on_gpu and names[-1] == "cpu"  # on a GPU Vulkan may come first
    monkeypatch.setattr(opencl.OpenCLRuntime, "in_auto", classmethod(lambda cls: True))  # as on a GPU
    monkeypatch.setattr(VulkanRuntime, "in_auto", classmethod(lambda cls: False))  # OpenCL alone
    s = interp.create_session(backend="auto")
    assert [b.name for b in s.backends] == ["opencl", "cpu"] and "partition 0 on opencl" in s.partitions()


def test_unavailable_reasons(monkeypatch):
    from mnnpy.backends import opencl
    from mnnpy.backends.opencl.device import find_device

    monkeypatch.setenv(opencl.DEVICE_ENV, "no-such-device-xyz")
    ok, why = opencl.OpenCLRuntime.availability()
    assert not ok and "no-such-device-xyz" in why
    monkeypatch.setitem(sys.modules, "pyopencl", None)  # import fails as if not installed
    device, why = find_device(None)
    assert device is None and "pyopencl is not importable" in why


def test_device_choice_by_type_or_platform():
    """``MNNPY_OPENCL_DEVICE``: a type (gpu, cpu, accelerator), or part of the platform or
    device name, case-insensitive; no match says what was looked for."""
    import pyopencl as cl

    from mnnpy.backends.opencl.device import find_device

    dev, _ = find_device(None)
    assert find_device(dev.name[:6])[0] == dev
    assert find_device(dev.platform.name[:8].upper())[0] == dev
    for kind in ("gpu", "cpu", "accelerator"):
        found, why = find_device(kind)
        if found is None:
            assert "a type gpu/cpu/accelerator" in why
        else:
            assert found.type & getattr(cl.device_type, kind.upper())
    assert any(find_device(kind)[0] == dev for kind in ("gpu", "cpu", "accelerator"))


def test_fp16_storage(rng):
    """precision="low": tensors stored as fp16 (vstore_half), arithmetic in fp32."""
    a, b = rand(rng, 5, 9, 31, scale=3), rand(rng, 9, 1)
    model = make_model(
        [helper.make_node("Mul", ["a", "w"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])], {"a": a}, ["y"], {"w": b}
    )
    dev = compare(model, {"a": a}, HALF, precision="low")
    assert dev.backends[0].storage == np.float16
    # fp16 storage really rounds: the result differs from fp32 somewhere, but within HALF
    full = sessions(model)[0].run({"a": a})["y"]
    assert not np.array_equal(dev.run({"a": a})["y"], full)


def test_empty_constant_weights(rng):
    """Conv with no output channels, MatMul with an empty constant operand (fp32 and fp16)."""
    x = rand(rng, 1, 3, 5, 5)
    conv = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x}, ["y"], {"w": np.zeros((0, 3, 3, 3), np.float32)})
    a = rand(rng, 3, 4)
    mm = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": np.zeros((4, 0), np.float32)})
    for precision in ("high", "low"):
        for model, feeds in ((conv, {"x": x}), (mm, {"a": a})):
            dev = compare(model, feeds, HALF, on_device=False, precision=precision)
            assert next(iter(dev.run(feeds).values())).size == 0


def test_plan_larger_than_one_device_allocation(rng, monkeypatch):
    """A memory plan over the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE is a ShapeError naming it."""
    from mnnpy.backend import get_runtime
    from mnnpy.errors import ShapeError

    monkeypatch.setattr(get_runtime("opencl"), "max_alloc", 1000)
    x = rand(rng, 20, 30)
    with pytest.raises(ShapeError, match=r"needs one buffer of \d+ bytes .* than the 1000 bytes .* in one allocation"):
        sessions(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"]))


def test_outputs_beyond_32_bit_indices_fall_back(rng, monkeypatch):
    """An op whose output has more elements than the kernels' indices reach runs on the CPU
    with the reason, though its inputs are small (the limit lowered here to test it)."""
    from mnnpy.backends.opencl.backend import OpenCLBackend

    monkeypatch.setattr(OpenCLBackend, "max_elements", 1000)
    a, b = rand(rng, 100, 1), rand(rng, 1, 100)
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = compare(m, {"a": a, "b": b}, ELEMENTWISE, on_device=False)
    assert "an output has more than 1000 elements" in s.partitions()


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
        np.testing.assert_allclose(got, want, atol=HALF[0], rtol=HALF[1])
    borders = s.backends[0]._borders
    kinds = sorted(k for d in borders.values() for k in d)
    assert kinds.count(True) >= 2 and kinds.count(False) >= 2, kinds  # uploads and downloads of both shapes

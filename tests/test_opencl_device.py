"""The OpenCL backend's device handling: which device (``MNNPY_OPENCL_DEVICE``: a type or part
of the platform or device name), ``auto`` (a GPU only), why it is unavailable, and the device's
limits (one allocation, 32-bit indices, empty constants). The ops on OpenCL are checked in
their op family's module (``test_<family>.py``); fp16 storage in tests/test_opencl_fp16.py.

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
from tests.backend_compare import compare, partitioned_model, sessions
from tests.oracle import ELEMENTWISE, HALF, make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def test_auto_picks_opencl_on_a_gpu_only(rng, monkeypatch):
    """``auto`` takes OpenCL when its device is a GPU or accelerator, not on a CPU device
    (PoCL), where the NumPy backend is faster; by name it is always used."""
    import pyopencl as cl

    from mnnpy import auto_devices
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
    monkeypatch.setattr(auto_devices, "cached_capabilities", lambda device: (None, ""))  # in_auto decides
    s = interp.create_session(backend="auto")
    assert [b.name for b in s.backends] == ["opencl", "cpu"]
    # a 1x3x13x7 model: its OpenCL partitions would not pay for their copies (AUTO placement)
    assert s.placement.backends == ["cpu"] and "the opencl:0 partition of 1 op would move" in str(s.placement)
    assert "partition 0 on opencl" in interp.create_session(backend="opencl").partitions()


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

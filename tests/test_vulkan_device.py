"""The Vulkan backend's device handling: which device (``MNNPY_VULKAN_DEVICE``: a type or part
of the name), ``auto`` (a GPU only), the devices listed with their capabilities, why it is
unavailable (no package, loader, driver or device), and the device's limits (storage-buffer
range, allocation size). The ops on Vulkan are checked in their op family's module
(``test_<family>.py``).

Skipped, with the reason, where Vulkan is unusable (CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability
from mnnpy.converter import convert
from tests.backend_compare import compare, partitioned_model
from tests.oracle import ELEMENTWISE, make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")


def test_auto_takes_vulkan_only_on_a_gpu(rng, monkeypatch):
    """``auto`` leaves a CPU device (lavapipe) out, takes a discrete or integrated GPU first;
    asked for by name, Vulkan runs on any device."""
    from mnnpy import auto_devices
    from mnnpy.backends.vulkan import device as vk_device
    from mnnpy.backends.vulkan import runtime as vk_runtime
    from mnnpy.backends.vulkan.runtime import VulkanRuntime

    interp = mnnpy.Interpreter(convert(partitioned_model(rng)))
    chosen, _ = vk_device.choose(vk_device.probe().devices, None)
    on_gpu = chosen.type in ("discrete", "integrated")
    assert VulkanRuntime.in_auto() == on_gpu
    assert ("vulkan" in [b.name for b in interp.create_session(backend="auto").backends]) == on_gpu
    assert [b.name for b in interp.create_session(backend="vulkan").backends] == ["vulkan", "cpu"]
    assert [b.name for b in interp.create_session(backend="vulkan,cpu").backends] == ["vulkan", "cpu"]
    for kind, expected in (("discrete", True), ("integrated", True), ("cpu", False), ("virtual", False)):
        monkeypatch.setattr(vk_runtime, "choose", lambda devices, wanted, kind=kind: (replace(chosen, type=kind), ""))
        assert VulkanRuntime.in_auto() is expected, kind
    monkeypatch.setattr(vk_runtime, "choose", lambda devices, wanted: (replace(chosen, type="discrete"), ""))
    monkeypatch.setattr(auto_devices, "cached_capabilities", lambda device: (None, ""))  # unmeasured: in_auto decides
    assert mnnpy.interpreter.resolve_backends("auto")[0] == "vulkan"


def test_device_choice_by_type_or_name(monkeypatch):
    from mnnpy.backends.vulkan import device

    devices = device.probe().devices
    chosen, _ = device.choose(devices, None)
    assert chosen is not None
    assert device.choose(devices, chosen.name[:6].upper())[0] is chosen
    assert device.choose(devices, chosen.type)[0] is chosen
    found, why = device.choose(devices, "no-such-device-xyz")
    assert found is None and "no-such-device-xyz" in why and "discrete/integrated" in why
    monkeypatch.setenv(device.DEVICE_ENV, "no-such-device-xyz")
    from mnnpy.backends.vulkan import VulkanRuntime

    ok, why = VulkanRuntime.availability()
    assert not ok and "MNNPY_VULKAN_DEVICE='no-such-device-xyz'" in why


def test_list_devices_describe_capabilities():
    from mnnpy.backends.vulkan import VulkanRuntime

    lines = VulkanRuntime.list_devices()
    assert lines and all("Vulkan 1." in s and "MiB" in s and "subgroup" in s and "16-bit storage" in s for s in lines)


def test_cli_devices_lists_vulkan(capsys):
    from mnnpy.backends.vulkan import VulkanRuntime
    from mnnpy.cli import main

    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert "vulkan: available" in out
    assert f"  {VulkanRuntime.list_devices()[0]}" in out


def test_unavailable_reasons(monkeypatch):
    """No package, no loader, no driver (ICD) and no device are told apart; a failing probe
    makes availability() say so instead of raising."""
    import types

    from mnnpy.backends.vulkan import device, runtime

    monkeypatch.setitem(sys.modules, "vulkan", None)  # import fails as if not installed
    vk, why = device._import_vulkan()
    assert vk is None and "'vulkan' package is not installed" in why

    class NoLoader:
        def find_spec(self, name, path=None, target=None):
            if name == "vulkan":
                raise OSError("Cannot find Vulkan SDK version")
            return None

    monkeypatch.delitem(sys.modules, "vulkan")
    monkeypatch.setattr(sys, "meta_path", [NoLoader(), *sys.meta_path])
    vk, why = device._import_vulkan()
    assert vk is None and "no Vulkan loader" in why

    def fake_vk(create_instance, physical_devices=()):
        return types.SimpleNamespace(
            VK_STRUCTURE_TYPE_APPLICATION_INFO=0,
            VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO=1,
            VK_MAKE_VERSION=lambda *v: 0,
            VkApplicationInfo=lambda **k: k,
            VkInstanceCreateInfo=lambda **k: k,
            vkCreateInstance=create_instance,
            vkEnumeratePhysicalDevices=lambda instance: list(physical_devices),
        )

    def incompatible(info, allocator):
        raise RuntimeError("VkErrorIncompatibleDriver")

    monkeypatch.setattr(device, "_import_vulkan", lambda: (fake_vk(incompatible), ""))
    assert "no Vulkan driver (ICD)" in device.probe.__wrapped__().reason
    monkeypatch.setattr(device, "_import_vulkan", lambda: (fake_vk(lambda info, allocator: object()), ""))
    assert device.probe.__wrapped__().reason == "no Vulkan physical device"

    monkeypatch.setattr(runtime, "probe", lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert runtime.VulkanRuntime.availability() == (False, "Vulkan probe failed: RuntimeError boom")


def test_outputs_beyond_the_storage_buffer_range_fall_back(rng, monkeypatch):
    """An op whose output would not fit one descriptor (``maxStorageBufferRange``) runs on the
    CPU with the reason, though its inputs fit."""
    from mnnpy.backend import get_runtime

    monkeypatch.setitem(get_runtime("vulkan").limits, "maxStorageBufferRange", 16384)
    a, b = rand(rng, 100, 1), rand(rng, 1, 100)  # 400-byte inputs, a 40000-byte output
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = compare(m, {"a": a, "b": b}, ELEMENTWISE, on_device=False, backend="vulkan")
    assert "an output is larger than the device's storage-buffer range" in s.partitions()


def test_allocation_beyond_the_device_limit_is_a_shape_error(rng, monkeypatch):
    """A memory plan larger than one allocation may be (``maxMemoryAllocationSize``, the heap):
    ``ShapeError`` with the sizes, before anything is allocated; smaller shapes still run."""
    from mnnpy.backend import get_runtime

    monkeypatch.setitem(get_runtime("vulkan").limits, "maxMemoryAllocationSize", 1 << 20)
    x = rand(rng, 1, 64, 64, 64)  # 1 MiB per tensor: the plan holds two
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], input_shapes={"x": [1, 64, "h", 64]})
    s = mnnpy.Interpreter(convert(model)).create_session(backend="vulkan")
    with pytest.raises(mnnpy.ShapeError, match=r"needs one allocation of \d+ bytes .* more than the 1048576 bytes"):
        s.run({"x": x})
    small = x[:, :, :8]
    np.testing.assert_allclose(s.run({"x": small})["y"], 1 / (1 + np.exp(-np.maximum(small, 0))), rtol=1e-6)

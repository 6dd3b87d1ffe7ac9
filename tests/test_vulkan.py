"""Vulkan backend: recording and allocating once at resize, plans and their Vulkan objects,
availability reasons and device choice, ``auto``, timeouts, profiling, device limits. The
elementwise ops on every GPU backend are in tests/test_gpu_elementwise.py.

Skipped, with the reason, where Vulkan is unusable (CI installs Mesa's lavapipe); the
SPIR-V freshness test needs only glslangValidator.
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
from tests.backend_compare import ELEMENTWISE, compare, partitioned_model, sessions
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
needs_vulkan = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")
pytestmark = needs_vulkan

ATOL, RTOL = ELEMENTWISE


def _compare(model, feeds, tol=ELEMENTWISE, on_device=True, **options):
    return compare(model, feeds, tol, on_device, backend="vulkan", **options)


def _sessions(model):
    return sessions(model, backend="vulkan")


def test_second_run_records_and_allocates_nothing(rng, monkeypatch):
    """Every vkCreate*/vkAllocate*/vkCmd*/vkBegin*/vkUpdate*/vkMap* call happens at resize;
    a run (after the first, and the first after resize) makes none of them and submits the
    command buffers recorded at resize."""
    import vulkan as vk

    counts: dict[str, int] = {}
    prefixes = ("vkCreate", "vkAllocate", "vkCmd", "vkBegin", "vkEnd", "vkUpdate", "vkMap", "vkFree", "vkDestroy")
    for name in dir(vk):
        if name.startswith(prefixes) and callable(getattr(vk, name)):
            real = getattr(vk, name)

            def counted(*a, _real=real, _name=name, **k):
                counts[_name] = counts.get(_name, 0) + 1
                return _real(*a, **k)

            monkeypatch.setattr(vk, name, counted)
    vk_s, cpu_s = _sessions(partitioned_model(rng))
    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    vk_s.resize({"x": x.shape, "z": z.shape})
    at_resize = dict(counts)
    for name in ("vkAllocateMemory", "vkAllocateCommandBuffers", "vkCmdDispatch", "vkCmdPipelineBarrier", "vkCmdCopyBuffer"):
        assert at_resize.get(name, 0) > 0, (name, at_resize)
    backend = vk_s.backends[0]
    submitted = []
    real_submit = backend.submit
    monkeypatch.setattr(backend, "submit", lambda part: (submitted.append(part), real_submit(part)))
    want = cpu_s.run({"x": x, "z": z})["y"]
    for _ in range(3):
        counts.clear()
        np.testing.assert_allclose(vk_s.run({"x": x, "z": z})["y"], want, atol=ATOL, rtol=RTOL)
        assert counts == {}, counts
    assert len(submitted) == 6 and len({id(p.command) for p in submitted}) == 2  # the same two command buffers


def test_plans_keep_their_recordings(rng):
    """Two input shapes alternating: each plan keeps its own device memory and command
    buffers (the session caches plans), and results stay right."""
    vk_s, cpu_s = _sessions(partitioned_model(rng))
    z = rand(rng, 3, 1, 1)
    xs = [rand(rng, 1, 3, 5, 4), rand(rng, 1, 3, 9, 11)]
    for k in range(4):
        x = xs[k % 2]
        np.testing.assert_allclose(vk_s.run({"x": x, "z": z})["y"], cpu_s.run({"x": x, "z": z})["y"], atol=ATOL, rtol=RTOL)
    assert vk_s.resize_count == 2


def test_auto_takes_vulkan_only_on_a_gpu(rng, monkeypatch):
    """``auto`` leaves a CPU device (lavapipe) out, takes a discrete or integrated GPU first;
    asked for by name, Vulkan runs on any device."""
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


def test_evicted_plans_free_their_vulkan_objects(rng):
    """The session keeps the last few plans; an evicted plan's device memory, staging,
    pools and command buffers are destroyed once nothing refers to them."""
    import gc
    import weakref

    from mnnpy.session import RESIZE_CACHE

    vk_s, _ = _sessions(partitioned_model(rng))
    z = rand(rng, 3, 1, 1)
    vk_s.run({"x": rand(rng, 1, 3, 2, 2), "z": z})
    memory = next(iter(vk_s._plan.handles[0].values())).memory
    owned, ref = memory.owned, weakref.ref(memory)
    assert owned and memory.buffer is not None
    del memory
    for k in range(RESIZE_CACHE):
        vk_s.run({"x": rand(rng, 1, 3, 3 + k, 2), "z": z})
    gc.collect()
    assert ref() is None and owned == []


def test_unannounced_transfers_are_errors(rng):
    """A handle the session did not announce (``on_resize_partition``) has no staging slot:
    upload/download say so with an MnnpyError instead of touching memory."""
    vk_s, _ = _sessions(partitioned_model(rng))
    vk_s.run({"x": rand(rng, 1, 3, 4, 4), "z": rand(rng, 3, 1, 1)})
    backend = vk_s.backends[0]
    handles = vk_s._plan.handles[0]
    unstaged = next(h for h in handles.values() if h.host is None and h.nbytes)
    with pytest.raises(mnnpy.MnnpyError, match="no staging slot"):
        backend.upload(np.zeros(unstaged.shape, np.float32), unstaged)
    with pytest.raises(mnnpy.MnnpyError, match="no staging slot"):
        backend.download(unstaged)


def test_timed_out_submission_is_waited_for_not_read_stale(rng, monkeypatch):
    """A submission past the fence timeout raises; the next run waits for it first and
    returns the right outputs for its own input (never the stale buffers)."""
    from mnnpy.backends.vulkan import commands

    a, b = rand(rng, 256, 256), rand(rng, 256, 256)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    dev, cpu = sessions(model, backend="vulkan")
    dev.run({"a": a, "b": b})  # prepared
    monkeypatch.setattr(commands, "FENCE_TIMEOUT_NS", 0)
    timed_out = False
    for _ in range(20):  # a zero timeout almost always expires before the device finishes
        try:
            dev.run({"a": a, "b": b})
        except commands.VulkanError as e:
            assert "did not finish within" in str(e)
            timed_out = True
            break
    monkeypatch.setattr(commands, "FENCE_TIMEOUT_NS", 60 * 10**9)
    a2 = rand(rng, 256, 256)
    np.testing.assert_allclose(dev.run({"a": a2, "b": b})["c"], cpu.run({"a": a2, "b": b})["c"], atol=1e-4, rtol=1e-4)
    assert timed_out


def test_profile_times_each_dispatch_by_op_type(rng, monkeypatch):
    """``MNNPY_VULKAN_PROFILE=1``: timestamp queries after each dispatch, summed per op type;
    off by default (no query pool, empty profile)."""
    from mnnpy.backends.vulkan import profile

    x = rand(rng, 1, 3, 16, 16)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"])
    interp = mnnpy.Interpreter(convert(model))
    plain = interp.create_session(backend="vulkan")
    plain.run({"x": x})
    assert plain.backends[0].profile == {} and not plain.backends[0].profiling
    monkeypatch.setenv(profile.PROFILE_ENV, "1")
    s = interp.create_session(backend="vulkan")
    if not s.backends[0].profiling:
        pytest.skip("this device's compute queue has no timestamps")
    for _ in range(2):
        y = s.run({"x": x})["y"]
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)
    prof = s.backends[0].profile
    assert set(prof) == {"Relu", "Sigmoid"} and all(v >= 0 for v in prof.values()) and sum(prof.values()) > 0, prof


def test_outputs_beyond_the_storage_buffer_range_fall_back(rng, monkeypatch):
    """An op whose output would not fit one descriptor (``maxStorageBufferRange``) runs on the
    CPU with the reason, though its inputs fit."""
    from mnnpy.backend import get_runtime

    monkeypatch.setitem(get_runtime("vulkan").limits, "maxStorageBufferRange", 16384)
    a, b = rand(rng, 100, 1), rand(rng, 1, 100)  # 400-byte inputs, a 40000-byte output
    m = make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = _compare(m, {"a": a, "b": b}, on_device=False)
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

"""The Vulkan backend's command recording: every Vulkan object is created and every command
recorded at resize, a run only submits; each cached plan keeps its recordings and frees its
objects when evicted; transfers the session did not announce are errors; a submission past
the fence time-out is waited for, never read stale; ``MNNPY_VULKAN_PROFILE`` times each
dispatch.

Skipped, with the reason, where Vulkan is unusable (CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability
from tests.backend_compare import device_backend, partitioned_model, sessions, tensor_handles
from tests.oracle import ACCUMULATE, ELEMENTWISE, make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")


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

    class CountedLib:  # the loader's entry points, which recording calls straight (commands.py)
        def __init__(self, real):
            self._real = real

        def __getattr__(self, name):
            fn = getattr(self._real, name)
            if not name.startswith(prefixes):
                return fn

            def counted(*a):
                counts[name] = counts.get(name, 0) + 1
                return fn(*a)

            return counted

    monkeypatch.setattr(vk, "lib", CountedLib(vk.lib))
    vk_s, cpu_s = sessions(partitioned_model(rng), backend="vulkan")
    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    vk_s.resize({"x": x.shape, "z": z.shape})
    at_resize = dict(counts)
    for name in ("vkAllocateMemory", "vkAllocateCommandBuffers", "vkCmdDispatch", "vkCmdPipelineBarrier", "vkCmdCopyBuffer"):
        assert at_resize.get(name, 0) > 0, (name, at_resize)
    backend = device_backend(vk_s)
    submitted = []
    real_submit = backend.submit
    monkeypatch.setattr(backend, "submit", lambda part: (submitted.append(part), real_submit(part)))
    want = cpu_s.run({"x": x, "z": z})["y"]
    for _ in range(3):
        counts.clear()
        np.testing.assert_allclose(vk_s.run({"x": x, "z": z})["y"], want, **ELEMENTWISE)
        assert counts == {}, counts
    assert len(submitted) == 6 and len({id(p.command) for p in submitted}) == 2  # the same two command buffers


def test_plans_keep_their_recordings(rng):
    """Two input shapes alternating: each plan keeps its own device memory and command
    buffers (the session caches plans), and results stay right."""
    vk_s, cpu_s = sessions(partitioned_model(rng), backend="vulkan")
    z = rand(rng, 3, 1, 1)
    xs = [rand(rng, 1, 3, 5, 4), rand(rng, 1, 3, 9, 11)]
    for k in range(4):
        x = xs[k % 2]
        np.testing.assert_allclose(vk_s.run({"x": x, "z": z})["y"], cpu_s.run({"x": x, "z": z})["y"], **ELEMENTWISE)
    assert vk_s.resize_count == 2


def test_evicted_plans_free_their_vulkan_objects(rng):
    """The session keeps the last few plans; an evicted plan's device memory, staging,
    pools and command buffers are destroyed once nothing refers to them."""
    import gc
    import weakref

    from mnnpy.session import RESIZE_CACHE

    vk_s, _ = sessions(partitioned_model(rng), backend="vulkan")
    z = rand(rng, 3, 1, 1)
    vk_s.run({"x": rand(rng, 1, 3, 2, 2), "z": z})
    memory = next(iter(tensor_handles(vk_s).values())).memory
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
    vk_s, _ = sessions(partitioned_model(rng), backend="vulkan")
    vk_s.run({"x": rand(rng, 1, 3, 4, 4), "z": rand(rng, 3, 1, 1)})
    backend = device_backend(vk_s)
    handles = tensor_handles(vk_s)
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
    np.testing.assert_allclose(dev.run({"a": a2, "b": b})["c"], cpu.run({"a": a2, "b": b})["c"], **ACCUMULATE)
    assert timed_out


def test_waits_poll_the_fence_on_a_gpu_then_block(rng, monkeypatch):
    """A GPU's waits poll the fence (``vkGetFenceStatus``) for up to ``SPIN_NS`` before
    blocking in ``vkWaitForFences``; a CPU device (lavapipe) blocks at once. Forced here both
    ways (polling until signalled; one poll, then blocking): the outputs are the same."""
    from mnnpy.backends.vulkan import commands

    a, b = rand(rng, 256, 256), rand(rng, 256, 256)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["c"])], {"a": a, "b": b}, ["c"])
    dev, cpu = sessions(model, backend="vulkan")
    rt = device_backend(dev).runtime
    assert rt.spin_ns == (0 if rt.info.type == "cpu" else commands.SPIN_NS)
    for spin in (60 * 10**9, 1):
        monkeypatch.setattr(rt, "spin_ns", spin)
        for _ in range(3):
            a = rand(rng, 256, 256)
            np.testing.assert_allclose(dev.run({"a": a, "b": b})["c"], cpu.run({"a": a, "b": b})["c"], **ACCUMULATE)


@pytest.mark.parametrize(
    "direct, threads", [(True, False), (True, True), (False, False)], ids=["written-in-place", "on-threads", "through-staging"]
)
def test_only_constants_that_dispatches_bind_are_uploaded(rng, monkeypatch, direct, threads):
    """The general Conv reads its weights re-laid (``Conv2D.blocked_into``, written at
    upload): the graph's own weight tensor is bound by no dispatch and is not uploaded;
    outputs match the CPU's, with the constants written into mappable device memory (lavapipe
    has it; large ones on several threads) and through a staging buffer (``MNNPY_VULKAN_DIRECT_CONSTANTS=0``, a discrete GPU
    without resizable BAR)."""
    from mnnpy.backends.vulkan import backend as vb
    from mnnpy.backends.vulkan import memory as vm
    from mnnpy.converter import convert
    from tests.backend_compare import conv_model

    monkeypatch.setattr(vm, "DIRECT_CONSTANTS", direct)
    if threads:  # every constant counts as large, cut in 64-byte slices: written by the writer threads (_write_constants)
        monkeypatch.setattr(vb, "PARALLEL_WRITE_BYTES", 0)
        monkeypatch.setattr(vb, "WRITE_CHUNK", 64)
    staged = []
    real_staging = vm.ResizeMemory.staging_block
    monkeypatch.setattr(
        vm.ResizeMemory, "staging_block", lambda self, size, owned=True: staged.append(owned) or real_staging(self, size, owned)
    )

    model, feeds = conv_model(rng, (1, 8, 9, 11), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]})
    uploaded = []
    real = vb.VulkanBackend._upload_constants

    def spy(self, memory, pool, bound):
        uploaded.extend((v.shape, type(v).__name__) for t, v in memory.constants if id(t) in bound)
        return real(self, memory, pool, bound)

    monkeypatch.setattr(vb.VulkanBackend, "_upload_constants", spy)
    interp = mnnpy.Interpreter(convert(model))
    got = interp.create_session(backend="vulkan", precision="high").run(feeds)
    want = interp.create_session(backend="cpu").run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], **ACCUMULATE)
    assert ((12, 8, 3, 3), "ndarray") not in uploaded, uploaded  # the raw weights stay on the host
    assert ((1, 3, 8, 3, 3, 4), "Filled") in uploaded, uploaded  # 12 output channels: 3 blocks of 4
    if vk_direct_possible():
        assert (False in staged) != direct, staged  # the constants' temporary staging buffer: only when not direct


def test_constants_written_beside_the_recording_fail_cleanly(rng, monkeypatch):
    """Constants written into mappable memory go on while the command buffers are recorded
    (``_write_constants`` returns the wait): a write that fails fails the resize with its
    error, after every write ended and the memory was unmapped once; the next session runs."""
    from mnnpy.backends.vulkan import backend as vb
    from mnnpy.backends.vulkan import memory as vm
    from mnnpy.converter import convert
    from tests.backend_compare import conv_model

    if not vk_direct_possible():
        pytest.skip("no mappable device memory on this Vulkan device: constants go through staging")
    monkeypatch.setattr(vm, "DIRECT_CONSTANTS", True)
    monkeypatch.setattr(vb, "PARALLEL_WRITE_BYTES", 0)  # on the writer threads
    monkeypatch.setattr(vb, "WRITE_CHUNK", 64)
    model, feeds = conv_model(rng, (1, 8, 9, 11), (12, 8, 3, 3), {"pads": [1, 1, 1, 1]})
    interp = mnnpy.Interpreter(convert(model))
    real_write, calls = vb._write_pieces, []

    def failing(device, pieces):
        calls.append(len(pieces))
        if len(calls) == 2:
            raise OSError("a write failed")
        real_write(device, pieces)

    vk = device_backend(interp.create_session(backend="vulkan")).vk
    real_unmap, unmapped = vk.vkUnmapMemory, []
    monkeypatch.setattr(vb, "_write_pieces", failing)
    monkeypatch.setattr(vk, "vkUnmapMemory", lambda dev, mem: unmapped.append(mem) or real_unmap(dev, mem))
    with pytest.raises(OSError, match="a write failed"):
        interp.create_session(backend="vulkan", precision="high").run(feeds)
    assert len(calls) == min(vb._writer_count(), len(calls)) >= 2 and len(unmapped) == 1  # each group tried, then one unmap
    monkeypatch.setattr(vb, "_write_pieces", real_write)
    got = interp.create_session(backend="vulkan", precision="high").run(feeds)
    want = interp.create_session(backend="cpu").run(feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], **ACCUMULATE)


def vk_direct_possible() -> bool:
    """Whether this device has mappable memory on its main heap (lavapipe: yes)."""
    from mnnpy.backend import get_runtime

    rt = get_runtime("vulkan")
    return any(rt.mappable_device_type(1 << i) is not None for i in range(rt.memory.memoryTypeCount))


def test_constant_writes_are_sliced_and_dealt_to_threads():
    """``_write_groups`` cuts constants into ``WRITE_CHUNK`` slices (a ``Filled`` stays whole)
    dealt to the writer threads by bytes; below ``PARALLEL_WRITE_BYTES`` in all, one group;
    ``_write_pieces`` puts every byte where it belongs."""
    pytest.importorskip("vulkan")
    from mnnpy.backends.vulkan import backend as vb
    from mnnpy.backends.vulkan.memory import Filled

    big = np.arange(3 * vb.WRITE_CHUNK // 4 + 5, dtype=np.float32)  # 3 slices and 20 bytes
    small = np.arange(3, dtype=np.int64)
    filled = Filled((4, 4), np.dtype(np.float32), lambda dst: dst.fill(7.0))
    pieces = [(0, big), (big.nbytes, small), (big.nbytes + small.nbytes, filled)]
    groups = vb._write_groups(pieces, 4)
    assert len(groups) == 4
    flat = [p for g in groups for p in g]
    assert [p for p in flat if isinstance(p[1], Filled)] == [pieces[2]]
    assert max(v.nbytes for _, v in flat) <= vb.WRITE_CHUNK and len(flat) == 6
    loads = sorted(sum(v.nbytes for _, v in g) for g in groups)
    assert loads[-1] == vb.WRITE_CHUNK and loads[0] == 20 + small.nbytes + filled.nbytes
    device = np.zeros(big.nbytes + small.nbytes + filled.nbytes, np.uint8)
    for g in groups:
        vb._write_pieces(device, g)
    np.testing.assert_array_equal(device[: big.nbytes].view(np.float32), big)
    np.testing.assert_array_equal(device[big.nbytes : big.nbytes + small.nbytes].view(np.int64), small)
    np.testing.assert_array_equal(device[big.nbytes + small.nbytes :].view(np.float32), np.full(16, 7.0, np.float32))
    assert len(vb._write_groups([(0, small), (24, filled)], 4)) == 1  # 88 bytes: not worth a thread

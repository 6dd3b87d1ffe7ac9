"""``VulkanBackend``: one per session; memory, recording and submission of its resizes.

Life cycle (``mnnpy.planner``): ``on_resize_begin`` -> ``allocate_arena`` (a new
``ResizeMemory``) -> ``acquire``/``acquire_constant`` (handles with offsets) -> per
partition the Executions' ``on_resize`` (dispatches described), then
``on_resize_partition`` (the tensors uploaded before it / downloaded after it get staging
slots; its ``PartitionRecord``) -> ``on_resize_end``: device and staging buffers created,
constants uploaded, descriptor sets written, one command buffer recorded per partition.
Run: ``upload`` writes mapped staging memory, ``execute_partition`` submits the
partition's command buffer once and waits on the fence, ``download`` copies out of mapped
staging memory. A run whose outputs stay on the device (``defer_wait``) returns after
submitting; the backend waits for that submission (``finish``) before it next touches its
staging memory, its fence or a download, so that a session fed its device tensor on the same
queue is ordered after it by the queue alone (a fenced chain with no host round trip).
An input fed another session's device tensor (``copy_device``) is copied device to
device by a variant of its partition (``fed.py``). Where the queue has timestamps, each
partition also gets two small command buffers that write one each; with ``timing`` a run
submits the partition between them, and ``device_time_us`` reads them (``timestamps.py``).

Storage: float32 tensors are stored as float32, or with ``precision="low"`` on a device with
``storageBuffer16BitAccess`` as float16 (the ``<variant>_f16`` shaders, arithmetic and
accumulation in fp32); weights, biases, constant operands and scratch stay float32 in every
precision (each shader reads a binding as fp16 or fp32 by a specialization constant, see
``shaders/vulkan/storage.glsl``). A device without the feature computes ``"low"`` in fp32
and says so (a ``RuntimeWarning`` when the session is created). int32, int64 and bool tensors
are stored as themselves in every precision, where the device has what they need
(``dtype_limit``). The objects of a resize live
as long as its handles (the session keeps the last few resizes), so switching back to an
earlier input shape reuses its recording.
"""

from __future__ import annotations

import functools
import math
import os
import struct
import warnings
import weakref
from concurrent import futures
from time import perf_counter_ns

import numpy as np

from mnnpy.backend import BackendConfig, TensorInfo
from mnnpy.backends.gpu.backend import GPUBackend
from mnnpy.backends.gpu.dtypes import BOOL, I64, typed
from mnnpy.backends.vulkan import profile
from mnnpy.backends.vulkan.commands import (
    PartitionRecord,
    binding_range,
    record_partition,
    submit_and_wait,
    submit_only,
    wait_for,
    write_descriptor_sets,
)
from mnnpy.backends.vulkan.device import FORK, VulkanError
from mnnpy.backends.vulkan.fed import fed_variant
from mnnpy.backends.vulkan.memory import Filled, ResizeMemory, VkTensor, check_allocation
from mnnpy.backends.vulkan.timestamps import PartitionClock
from mnnpy.log import get_logger
from mnnpy.process_threads import threads

_log = get_logger("vulkan")


def _destroy_fence(vk, device, fence) -> None:
    try:
        vk.vkDestroyFence(device, fence, None)
    except Exception:  # noqa: BLE001 - interpreter shutdown
        pass


PARALLEL_WRITE_BYTES = 1 << 20  # constants adding up to this many bytes are re-laid and written on several threads
WRITE_CHUNK = 1 << 20  # bytes: a larger constant is written in slices of this size, on several threads


@functools.cache
def _writer_count() -> int:
    """Threads writing constants: up to 8, one on a single-core machine."""
    return min(8, os.cpu_count() or 1)


def _write_groups(pieces: list, threads: int) -> list[list]:
    """``pieces`` (byte offset, array or ``Filled``) cut into ``WRITE_CHUNK``-byte slices (a
    ``Filled`` stays whole: it is computed where it is written) and dealt to at most
    ``threads`` groups of about equal bytes, largest first; one group below
    ``PARALLEL_WRITE_BYTES`` in all. PP-OCRv4 rec's 138 constants (10.8 MB, the largest 3.2 MB)
    were written on the session's thread: only constants of 1 MiB or more went to threads,
    and only when there were two."""
    sliced = []
    for at, v in pieces:
        if isinstance(v, Filled):
            sliced.append((at, v))
            continue
        src = np.ascontiguousarray(v).reshape(-1).view(np.uint8)
        if src.size <= WRITE_CHUNK:
            sliced.append((at, src))
        else:
            sliced += [(at + k, src[k : k + WRITE_CHUNK]) for k in range(0, src.size, WRITE_CHUNK)]
    total = sum(v.nbytes for _, v in sliced)
    n = 1 if total < PARALLEL_WRITE_BYTES else max(1, threads)
    groups, loads = [[] for _ in range(n)], [0] * n
    for at, v in sorted(sliced, key=lambda p: -p[1].nbytes):
        k = loads.index(min(loads))
        groups[k].append((at, v))
        loads[k] += v.nbytes
    return [g for g in groups if g] or [[]]


def _write_pieces(device: np.ndarray, pieces: list) -> None:
    """Write ``pieces`` (``_write_groups``) into the mapped bytes ``device``; a ``Filled`` is
    made in host memory first (mapped video memory is write-combined: its lane-by-lane writes
    go to host memory, then one copy)."""
    for at, v in pieces:
        if isinstance(v, Filled):
            host = np.empty(v.shape, v.dtype)
            v.fill(host)
            v = host.reshape(-1).view(np.uint8)
        device[at : at + v.nbytes] = v


def _writers():
    """The process's threads for writing constants (``_write_constants``; kept per process,
    ``mnnpy.process_threads``): ResNet-18's 20 re-laid Conv weights (46.7 MB) took 25 ms on one
    thread on the H200 machine."""
    return threads("vulkan-constants", _writer_count())


class VulkanBackend(GPUBackend):
    """Per-session Vulkan backend; handles are ``VkTensor``."""

    name = "vulkan"
    display = "Vulkan"
    fork = FORK
    defers = True  # a run with ``defer_wait`` returns after submitting (``submit``, ``finish``)

    def __init__(self, runtime, config: BackendConfig):
        super().__init__(runtime, config)
        vk = self.vk = runtime.vk
        self.align = runtime.limits["minStorageBufferOffsetAlignment"]
        self.lane = config.lane  # the runtime's queue this backend submits to (VulkanRuntime.lane)
        self._pending = False  # a submission made with ``defer_wait`` and not waited for yet (``finish``)
        fence = vk.vkCreateFence(runtime.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)
        self.fence = vk.ffi.new("VkFence[1]", [fence])
        weakref.finalize(self, _destroy_fence, vk, runtime.device, fence).atexit = False
        self._memory: ResizeMemory | None = None
        self._parts: list[PartitionRecord] = []
        self._border_twins: list[tuple[VkTensor, VkTensor]] = []  # this resize's (fp16 handle, twin)
        self._recorded: list[weakref.ref] = []  # the last resize's partitions, weakly (``_last_parts``)
        self._feeds: dict[VkTensor, VkTensor] = {}  # this run's uploads fed device to device (copy_device)
        self.profiling = profile.requested() and runtime.timestamp_period > 0
        self.profile: dict[str, float] = {}  # op type -> GPU ms summed over runs (profile.py)
        self.profile_ops: dict[tuple[str, str], float] = {}  # (op name, op type) -> the same, per op
        self.clocked = runtime.timestamp_period > 0  # two timestamps recorded per partition (timestamps.py)
        if config.precision == "low" and not runtime.storage16:
            warnings.warn(
                f"Vulkan: precision='low' stores float32 on {runtime.info.name}: the device has no "
                "storageBuffer16BitAccess (16-bit storage)",
                RuntimeWarning,
                stacklevel=2,
            )

    @property
    def _last_parts(self) -> list[PartitionRecord]:
        """The last resize's partitions while its plan is kept (tests, diagnostics)."""
        return [p for p in (r() for r in self._recorded) if p is not None]

    # -- schedule -----------------------------------------------------------------------
    def executions(self) -> dict:
        """The Vulkan Executions by op type (``registry.py``)."""
        from mnnpy.backends.vulkan.registry import executions

        return executions()

    def fp16_storage(self) -> bool:
        """16-bit storage buffers (``storageBuffer16BitAccess``) on this device."""
        return bool(self.runtime.storage16)

    def dtype_limit(self, dtype) -> str | None:
        """int32, int64 and bool tensors need Vulkan 1.1 (their shaders are SPIR-V 1.3), int64
        also ``shaderInt64``, bool ``storageBuffer8BitAccess`` (one byte per element); each
        missing feature is the reason (the op then runs on the CPU)."""
        rt, dtype = self.runtime, np.dtype(dtype)
        if not typed(dtype):
            return None
        if rt.info.api_version < rt.vk.VK_MAKE_VERSION(1, 1, 0):
            return f"{rt.info.name} is a Vulkan 1.0 device (integer and bool shaders need 1.1)"
        if dtype == I64 and not rt.int64:
            return f"{rt.info.name} has no shaderInt64 (64-bit integers)"
        if dtype == BOOL and not rt.storage8:
            return f"{rt.info.name} has no storageBuffer8BitAccess (bool tensors, one byte per element)"
        return None

    @property
    def _limit(self) -> int:
        return self.runtime.limits["maxStorageBufferRange"] - self.align

    def size_limit(self, t: TensorInfo) -> str | None:
        """A tensor (float32-sized: fp16 storage stages borders as float32) beyond one
        descriptor's range, or beyond 32-bit element indices."""
        if t.nbytes > self._limit or math.prod(t.shape) > self.max_elements:
            return f"is larger than the device's storage-buffer range ({self._limit} bytes)"
        return None

    # -- resize -------------------------------------------------------------------------
    def on_resize_begin(self) -> None:
        """Start a resize: no memory, partitions or border twins yet (the last submission
        finished: the resize may free the memory it uses); the pipelines saved in the session's
        compilation cache join the Runtime's (``Pipelines.adopt``, once per token)."""
        self.finish()
        self._memory, self._parts, self._border_twins = None, [], []
        if self.config.cache is not None:  # the pipelines of the session's compilation cache
            self.runtime.pipelines.adopt(self.config.cache)

    def allocate_arena(self, nbytes: int) -> None:
        """This resize's ``ResizeMemory`` with an arena of ``nbytes`` (``ShapeError`` beyond the device's allocation limits)."""
        check_allocation(self.runtime, int(nbytes), what="the memory plan of this resize")  # early, before any Execution
        self._memory = ResizeMemory(self.runtime, nbytes)

    def handle(self, offset: int, shape, dtype) -> VkTensor:
        """A ``VkTensor`` at byte ``offset`` of this resize's arena."""
        return self._memory.tensor(offset, shape, dtype)

    def acquire_constant(self, tensor: TensorInfo) -> VkTensor:
        """A handle for the constant's value (its dtype kept), uploaded at the end of the resize."""
        return self._memory.constant(np.asarray(tensor.value, dtype=tensor.dtype))

    def constant(self, value: np.ndarray) -> VkTensor:
        """A device copy of ``value`` owned by this resize (re-laid weights, tables), uploaded
        once at the end of the resize with the graph's constants. Call it from ``prepare``."""
        return self._memory.constant(np.ascontiguousarray(value))

    def constant_filled(self, shape, dtype, fill) -> VkTensor:
        """A device constant of ``shape``/``dtype`` owned by this resize whose bytes ``fill(dst)``
        writes at upload (``dst``: a C-contiguous view of the staging buffer, or host memory
        then copied into mappable device memory in one pass: ``_write_constants``), so that
        prepared data (re-laid weights) is made where it is uploaded from. Call it from ``prepare``."""
        return self._memory.constant_filled(shape, dtype, fill)

    def weights(self, value: np.ndarray) -> VkTensor:
        """A float32 device copy of ``value`` owned by this resize (weights, folded parameters)."""
        return self.constant(np.ascontiguousarray(value, dtype=np.float32))

    def scratch(self, shape) -> VkTensor:
        """Float32 device memory of this resize for intermediate results of one op (split-K
        partials, two-pass reductions), nothing uploaded. Call it from ``prepare``."""
        return self._memory.scratch(tuple(int(d) for d in shape), np.float32)

    def new_twin(self, t: VkTensor) -> VkTensor:
        """Float32 scratch of this resize; ``t``'s staging slot becomes the twin's (``on_resize_end``)."""
        tw = self.scratch(t.shape)
        self._border_twins.append((t, tw))
        return tw

    def prepare_partition(self, partition, uploads: list, downloads: list) -> None:
        """The partition's ``PartitionRecord`` (kept in ``partition.recording``): staging slots
        for what is uploaded before / downloaded after it (a twin's for an fp16 handle), and
        its Executions' dispatches; with fp16 storage the partition begins with a cast of
        each upload's twin to fp16 and ends with a cast of each download to its twin
        (``unary_identity``)."""
        part = PartitionRecord([tw or t for t, tw in uploads], [tw or t for t, tw in downloads])
        for t, tw in uploads:
            if tw is not None:
                self._cast(part.dispatches, tw, t)
        part.dispatches += [d for exe in partition.executions for d in exe.dispatches]
        for t, tw in downloads:
            if tw is not None:
                self._cast(part.dispatches, t, tw)
        for t in part.uploads + part.downloads:
            self._memory.stage(t)
        partition.recording = part
        self._parts.append(part)

    def _cast(self, dispatches: list, src: VkTensor, dst: VkTensor) -> None:
        from mnnpy.backends.vulkan.execution import describe

        n = src.size
        push = struct.pack("<3I", n, binding_range(src, self.align)[2], binding_range(dst, self.align)[2])
        d = describe(self, "unary_identity", [src, dst], (1,), push, n, label="Cast")
        if d is not None:
            dispatches.append(d)

    def on_resize_end(self) -> None:
        """Create the resize's buffers, upload the constants, write the descriptor sets and record one command buffer per
        partition (``VulkanError`` when Vulkan fails)."""
        memory, parts, borders = self._memory, self._parts, self._border_twins
        self._memory, self._parts, self._border_twins = None, [], []
        self._recorded = [weakref.ref(p) for p in parts]  # weak: closing the session frees its memory
        if memory is None or (not parts and not memory.constants):
            return
        vk, rt = self.vk, self.runtime
        try:
            memory.materialize()
            for t, tw in borders:
                t.host = tw.host  # run() uploads into / downloads from the fp32 staging slot
            pool_info = vk.VkCommandPoolCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=rt.family
            )
            pool = memory.own("vkDestroyCommandPool", vk.vkCreateCommandPool(rt.device, pool_info, None))
            memory.pool = pool  # fed variants are recorded from it later (fed.py)
            dispatches = [d for p in parts for d in p.dispatches]
            # mappable memory: the constants are written on the writer threads while the
            # descriptor sets are written and the command buffers recorded here
            writes = self._upload_constants(memory, pool, {id(t) for d in dispatches for t in d.bindings})
            try:
                self._record(memory, pool, parts, dispatches)
            finally:
                if writes is not None:
                    writes()
            _log.debug("recorded %d command buffers, %d dispatches", len(parts), len(dispatches))
        except vk.VkError as e:
            raise VulkanError(f"Vulkan resize failed: {type(e).__name__}") from e
        if self.config.cache is not None:  # first: it merges the token's pipelines into the Runtime's cache
            self.runtime.pipelines.save_to(self.config.cache)
        self.runtime.pipelines.save()  # new pipelines reach the disk cache now, not only at exit

    def _record(self, memory: ResizeMemory, pool, parts: list, dispatches: list) -> None:
        """The descriptor sets of ``dispatches`` and one command buffer per partition of ``parts``."""
        vk, rt = self.vk, self.runtime
        if dispatches:
            sizes = [
                vk.VkDescriptorPoolSize(
                    type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=sum(len(d.bindings) for d in dispatches)
                )
            ]
            info = vk.VkDescriptorPoolCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                maxSets=len(dispatches),
                poolSizeCount=1,
                pPoolSizes=sizes,
            )
            descriptors = memory.own("vkDestroyDescriptorPool", vk.vkCreateDescriptorPool(rt.device, info, None))
            memory.arrays.append(write_descriptor_sets(vk, rt.device, descriptors, dispatches, memory.buffer, self.align))
        if parts:
            commands = self._command_buffers(pool, len(parts) * (3 if self.clocked else 1))
            for k, part in enumerate(parts):
                part.command = commands[k]
                if self.profiling and part.dispatches:
                    part.timestamps = profile.Timestamps(rt, memory, len(part.dispatches) + 1)
                if self.clocked:
                    begin, end = commands[len(parts) + 2 * k : len(parts) + 2 * k + 2]
                    part.clock = PartitionClock(rt, memory, begin, end)
                record_partition(vk, part, memory)

    def _command_buffers(self, pool, count: int) -> list:
        vk = self.vk
        info = vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            commandPool=pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
            commandBufferCount=count,
        )
        return list(vk.vkAllocateCommandBuffers(self.runtime.device, info))

    def _upload_constants(self, memory: ResizeMemory, pool, bound: set[int]):
        """Copy the constants that dispatches bind (``id`` in ``bound``) into the device buffer
        once, through a temporary staging buffer, or straight into mappable device memory
        (``_write_constants``): then the writes go on beside the caller, and what is returned
        waits for them (else None). Only dispatches read constants on the device (uploads and
        downloads are computed tensors); a graph constant that every Execution reading it
        replaced by a prepared copy (the general Conv's blocked weights: half of ResNet-18's
        91 MB) is not uploaded."""
        items = [(t, v) for t, v in memory.constants if v.nbytes and id(t) in bound]
        if not items:
            return None
        vk, dev = self.vk, self.runtime.device
        if memory.direct:
            return self._write_constants(memory, items)
        total = sum(v.nbytes for _, v in items)
        buf, mem, size = memory.staging_block(total, owned=False)
        try:
            host = np.frombuffer(vk.vkMapMemory(dev, mem, 0, size, 0), np.uint8, count=total)
            at, regions = 0, []
            for t, v in items:
                if isinstance(v, Filled):
                    v.fill(host[at : at + v.nbytes].view(v.dtype).reshape(v.shape))
                else:
                    host[at : at + v.nbytes] = np.ascontiguousarray(v).reshape(-1).view(np.uint8)  # one copy, no bytes object
                regions.append(vk.VkBufferCopy(srcOffset=at, dstOffset=t.offset, size=v.nbytes))
                at += v.nbytes
            vk.vkUnmapMemory(dev, mem)
            (cmd,) = self._command_buffers(pool, 1)
            vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO))
            vk.vkCmdCopyBuffer(cmd, buf, memory.buffer, len(regions), regions)
            vk.vkEndCommandBuffer(cmd)
            cmds = vk.ffi.new("VkCommandBuffer[1]", [cmd])
            submit = vk.ffi.new(
                "VkSubmitInfo*", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": 1, "pCommandBuffers": cmds}
            )
            self.finish()
            submit_and_wait(self.runtime, submit, self.fence, self.lane)
            vk.vkFreeCommandBuffers(dev, pool, 1, [cmd])
        finally:
            memory.free_block(buf, mem)

    def _write_constants(self, memory: ResizeMemory, items: list):
        """The constants ``items`` written straight into the device buffer, whose memory the
        host can map (``ResizeMemory.direct``: resizable BAR, unified memory): no staging
        buffer, copy command or wait. Host-coherent memory: the next submission sees the
        writes. The constants go in slices of at most ``WRITE_CHUNK`` bytes, each written front
        to back in one copy, on the writer threads (``_write_groups``; mapped video memory is
        write-combined: the lane-by-lane writes of a ``Filled`` go to host memory first).
        Returns a function that waits for every write, unmaps the memory and raises the first
        write's error, if any: the caller records its command buffers meanwhile (NumPy's
        copies and Vulkan's calls through cffi leave the GIL)."""
        vk, dev = self.vk, self.runtime.device
        first = min(t.offset for t, _ in items)
        end = max(t.offset + v.nbytes for t, v in items)
        mapped = vk.vkMapMemory(dev, memory.device_memory, first, end - first, 0)
        pending: list[futures.Future] = []
        try:
            device = np.frombuffer(mapped, np.uint8, count=end - first)
            for g in _write_groups([(t.offset - first, v) for t, v in items], _writer_count()):
                pending.append(_writers().submit(_write_pieces, device, g))
        except BaseException:  # no thread left writing into the mapping when it goes
            futures.wait(pending)
            vk.vkUnmapMemory(dev, memory.device_memory)
            raise

        def written() -> None:
            try:
                futures.wait(pending)
                for f in pending:
                    f.result()
            finally:
                vk.vkUnmapMemory(dev, memory.device_memory)

        return written

    # -- run ----------------------------------------------------------------------------
    def upload(self, src: np.ndarray, dst: VkTensor) -> None:
        """Write ``src`` into ``dst``'s mapped staging slot (copied to the device by the
        next partition's command buffer)."""
        if self._pending:
            self.finish()  # the last submission may still read the staging slots
        if dst.host is None:
            if dst.nbytes == 0:
                return
            raise VulkanError(f"{dst} has no staging slot: its upload was not announced at resize (on_resize_partition)")
        if self._feeds:  # written from the host this time
            self._feeds.pop(self._twins.get(dst) or dst, None)
        dst.host[...] = src

    def copy_device(self, src_backend, src: VkTensor, dst: VkTensor) -> bool:
        """Another Vulkan session's tensor ``src`` (same Runtime: same device and queue) into
        upload ``dst`` device to device: the partition that uploads ``dst`` is submitted as a
        variant copying it from ``src``'s device buffer (``fed.py``), between their border
        forms (the float32 twins of fp16 storage, cast on the device in either partition).
        ``False`` (through the host) for another backend or forms that differ, and for a
        session on another lane (queue): only one queue's submission order keeps the copy after
        the source's writes when the source's run did not wait for them (``defer_wait``)."""
        if not isinstance(src_backend, VulkanBackend) or src_backend.runtime is not self.runtime:
            return False
        if src_backend.queue_key() != self.queue_key():
            return False
        source = src_backend._twins.get(src) or src
        target = self._twins.get(dst) or dst
        if target.staging is None or source.dtype != target.dtype or source.nbytes != target.nbytes:
            return False
        if source.memory.buffer is None:
            return False
        self._feeds[target] = source
        return True

    def download_into(self, src: VkTensor, out: np.ndarray) -> None:
        """Copy ``src``'s staging slot (filled at the end of the partition that computed it;
        float32 for fp16 storage) into ``out``."""
        if self._pending:
            self.finish()
        if src.host is None:
            if src.nbytes == 0:
                return
            raise VulkanError(f"{src} has no staging slot: its download was not announced at resize (on_resize_partition)")
        np.copyto(out, src.host)

    def host_view(self, src: VkTensor) -> np.ndarray | None:
        """``src``'s mapped staging slot (a download announced at resize), else None."""
        self.finish()
        return src.host

    def staging_view(self, dst: VkTensor) -> np.ndarray | None:
        """``dst``'s mapped staging slot (an upload announced at resize), else None."""
        self.finish()
        return dst.host

    def execute_partition(self, partition) -> None:
        """Submit the partition's one command buffer (recorded at resize) and wait for it;
        with ``timing`` between its two timestamps, keeping the call's host wall time (ns) for
        ``device_time_us``."""
        self.check_fork()  # a session inherited through fork(): the driver would hang
        part = partition.recording
        if self._feeds:
            fed = {t: self._feeds.pop(t) for t in part.uploads if t in self._feeds}
            if fed:
                part = fed_variant(self, part, fed)
        clock = part.clock
        if clock is None:
            self.submit(part)
            return
        clock.wall_ns = 0  # until a timed submission has finished: no stale or unfinished timestamps
        t0 = perf_counter_ns()
        self.submit(part)
        if self.timing:
            clock.wall_ns = perf_counter_ns() - t0 or 1

    def in_flight(self) -> bool:
        """Whether a submission of a run with ``defer_wait`` has not been waited for."""
        return self._pending

    def finish(self) -> None:
        """Wait for the submission that a run with ``defer_wait`` left running (nothing when
        there is none); raises ``VulkanError`` as ``submit`` does."""
        if self._pending:
            self._pending = False
            wait_for(self.runtime, self.fence)

    def device_time_us(self, partition) -> float | None:
        """Device time, µs, of ``partition``'s last ``execute_partition``: the interval between
        the two timestamps submitted in one batch with its command buffer, just before it (top
        of pipe) and just after it (bottom of pipe), read now with ``vkGetQueryPoolResults``, masked to ``timestampValidBits`` and
        converted with ``timestampPeriod`` (``timestamps.py``); clamped to that call's host wall
        time. ``None`` before a timed run of it finished, after a failed or untimed one
        (``timing`` off), for a partition of another backend, and where the queue has no
        timestamps."""
        part = partition.recording if partition.backend is self else None
        clock = getattr(part, "clock", None)
        return None if clock is None else clock.device_time_us()

    def submit(self, part: PartitionRecord) -> None:
        """One queue submission of ``part``'s command buffer (with ``timing``, between its
        clock's two), waited on with the fence; with ``defer_wait`` (and no ``timing``) not
        waited on: the backend is ``_pending`` until ``finish``."""
        self.finish()  # one fence per backend: the last submission is waited on before it is reset
        timed = self.timing and part.timed_submit is not None
        info = part.timed_submit if timed else part.submit_info
        if self.defer_wait and not timed and part.timestamps is None:
            submit_only(self.runtime, info, self.fence, self.lane)
            self._pending = True
            return
        submit_and_wait(self.runtime, info, self.fence, self.lane)
        if part.timestamps is not None:
            for d, ms in zip(part.dispatches, profile.intervals_ms(part.timestamps)):
                self.profile[d.label] = self.profile.get(d.label, 0.0) + ms
                key = (d.op, d.label)
                self.profile_ops[key] = self.profile_ops.get(key, 0.0) + ms

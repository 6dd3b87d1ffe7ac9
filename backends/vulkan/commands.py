"""Command recording: one command buffer per partition, recorded once at resize.

A ``Dispatch`` is what an Execution asks for at resize: a pipeline, the tensors bound to
its storage-buffer bindings (which of them it writes), its push-constant bytes and its
group counts. ``record_partition`` writes a partition's command buffer:

1. a global memory barrier, so that this submission sees every earlier one (compute and
   transfer writes; submission order is the first synchronisation scope);
2. staging -> device copies of the tensors uploaded before the partition (device ->
   device from another session's buffer for those ``fed``: ``fed.py``), then a buffer
   barrier (transfer write -> shader read and write, transfer read);
3. each dispatch: bind pipeline, bind its descriptor set, push constants,
   ``vkCmdDispatch``; before a dispatch that reads or overwrites a range written (or, for a
   write, read) by an earlier dispatch since the last barrier, one pipeline barrier
   (compute -> compute) with a buffer memory barrier for every range written since then;
4. device -> staging copies of the tensors downloaded after the partition (after a
   shader-write -> transfer-read barrier), then a transfer-write -> host-read barrier.

Where the queue has timestamps, a second submit info puts the partition between the two
command buffers of its ``timestamps.PartitionClock`` (``timed_submit``).

The host waits on a fence after the submission, so reading the mapped (host-coherent)
staging memory afterwards is safe. Source: Vulkan 1.3 specification, "Synchronization
and Cache Control" (pipeline barriers, buffer memory barriers, host access) and
"Command Buffers" (recording, submission).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

import numpy as np

from mnnpy.backends.vulkan import raw_structs
from mnnpy.backends.vulkan.device import VulkanError
from mnnpy.backends.vulkan.memory import ResizeMemory, VkTensor
from mnnpy.backends.vulkan.pipeline import Pipeline

FENCE_TIMEOUT_NS = 60 * 10**9  # a submission that takes longer is reported, not waited on forever


@dataclass
class Dispatch:
    """One ``vkCmdDispatch``: ``pipeline``, ``bindings`` (tensor per binding, in order),
    ``writes`` (indices of the bindings the shader writes), ``push`` (push-constant bytes,
    ``pipeline.push_size`` long), ``groups`` (x, y, z work-group counts)."""

    pipeline: Pipeline
    bindings: list[VkTensor]
    writes: tuple[int, ...]
    push: bytes
    groups: tuple[int, int, int]
    descriptor_set: Any = None  # a ``VkDescriptorSet *`` into write_descriptor_sets' array
    label: str = ""  # the op type, for profiles
    op: str = ""  # the op's name, for per-op profiles


@dataclass
class PartitionRecord:
    """A partition of one resize on this backend: tensors uploaded before it and downloaded
    after it, its dispatches, and (after ``record_partition``) its command buffer and the
    prebuilt ``VkSubmitInfo`` that a run submits."""

    uploads: list[VkTensor] = field(default_factory=list)
    downloads: list[VkTensor] = field(default_factory=list)
    dispatches: list[Dispatch] = field(default_factory=list)
    command: Any = None
    submit_info: Any = None
    keep: list = field(default_factory=list)  # cffi arrays the submit info points at
    timestamps: Any = None  # profile.Timestamps (MNNPY_VULKAN_PROFILE): one after the uploads, one per dispatch
    clock: Any = None  # timestamps.PartitionClock: its device time, where the queue has timestamps
    timed_submit: Any = None  # VkSubmitInfo of [clock.begin, command, clock.end]
    fed: dict = field(default_factory=dict)  # upload -> source tensor copied device to device (a variant's)
    variants: dict = field(default_factory=dict)  # fed sources -> PartitionRecord recorded for them (fed.py)
    sources: list = field(default_factory=list)  # a variant's: weak references to the sources it copies from


def binding_range(t: VkTensor, align: int) -> tuple[int, int, int]:
    """``(descriptor offset, descriptor range, element offset)`` for tensor ``t``: the
    descriptor starts at ``t.offset`` rounded down to ``align`` (the device's
    ``minStorageBufferOffsetAlignment``) and ends with the tensor (1 byte for an empty one:
    a range cannot be 0), so that it claims no bytes after the tensor, where the barriers,
    which cover tensors' bytes, would not reach; the shader adds the element offset. Kept on
    ``t`` (``VkTensor.bound``): a tensor is bound by several dispatches and written into each
    descriptor set."""
    got = t.bound
    if got is not None and got[0] == align:
        return got[1]
    base = t.offset - t.offset % align
    r = base, t.offset - base + max(t.nbytes, 1), (t.offset - base) // t.dtype.itemsize
    t.bound = (align, r)
    return r


def _overlaps(a: tuple[int, int], ranges: list[tuple[int, int]]) -> bool:
    return any(a[0] < e and s < a[1] for s, e in ranges)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


class Recorder:
    """Records into ``command`` for one device ``buffer`` (see module docstring)."""

    def __init__(self, vk, command, buffer, staging):
        self.vk, self.cmd, self.buffer, self.staging = vk, command, buffer, staging
        self.written: list[tuple[int, int]] = []  # since the last compute barrier
        self.read: list[tuple[int, int]] = []
        self.all_written: list[tuple[int, int]] = []  # by every dispatch of the partition
        self.bound = None  # the pipeline bound last

    def barrier(self, ranges, src_stage, src_access, dst_stage, dst_access, buffer=None) -> None:
        vk = self.vk
        merged = _merge(ranges) if len(ranges) > 1 else ranges
        items = vk.ffi.new(f"VkBufferMemoryBarrier[{len(merged)}]") if merged else vk.ffi.NULL
        for k, (s, e) in enumerate(merged):  # raw structs: the wrappers' per-struct conversion cost ~0.1 ms a dispatch
            b = items[k]
            b.sType, b.srcAccessMask, b.dstAccessMask = vk.VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER, src_access, dst_access
            b.srcQueueFamilyIndex = b.dstQueueFamilyIndex = vk.VK_QUEUE_FAMILY_IGNORED
            b.buffer, b.offset, b.size = buffer or self.buffer, s, e - s
        # no ranges: an execution dependency only (write-after-read)
        vk.lib.vkCmdPipelineBarrier(self.cmd, src_stage, dst_stage, 0, 0, vk.ffi.NULL, len(merged), items, 0, vk.ffi.NULL)

    def global_barrier(self) -> None:
        vk = self.vk
        rw = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
        rw |= vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT
        stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
        mb = vk.VkMemoryBarrier(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            srcAccessMask=vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
            dstAccessMask=rw,
        )
        vk.vkCmdPipelineBarrier(self.cmd, stages, stages, 0, 1, [mb], 0, None, 0, None)

    def copies(self, tensors: list[VkTensor], to_device: bool) -> list[tuple[int, int]]:
        """Copy between each tensor's staging slot and its device range; returns the device ranges."""
        vk = self.vk
        live = [t for t in tensors if t.nbytes]
        if not live:
            return []
        if to_device:
            regions = [vk.VkBufferCopy(srcOffset=t.staging, dstOffset=t.offset, size=t.nbytes) for t in live]
            vk.vkCmdCopyBuffer(self.cmd, self.staging, self.buffer, len(regions), regions)
        else:
            regions = [vk.VkBufferCopy(srcOffset=t.offset, dstOffset=t.staging, size=t.nbytes) for t in live]
            vk.vkCmdCopyBuffer(self.cmd, self.buffer, self.staging, len(regions), regions)
        return [(t.offset, t.offset + t.nbytes) for t in live]

    def device_copies(self, pairs: list[tuple[VkTensor, VkTensor]]) -> list[tuple[int, int]]:
        """Copy each ``(source, tensor)``: a tensor of another resize's device buffer (another
        session's output on this device) into ``tensor``'s device range; returns those ranges."""
        vk = self.vk
        live = [(s, t) for s, t in pairs if t.nbytes]
        for s, t in live:
            region = vk.VkBufferCopy(srcOffset=s.offset, dstOffset=t.offset, size=t.nbytes)
            vk.vkCmdCopyBuffer(self.cmd, s.memory.buffer, self.buffer, 1, [region])
        return [(t.offset, t.offset + t.nbytes) for _, t in live]

    def dispatch(self, d: Dispatch) -> None:
        vk, lib = self.vk, self.vk.lib
        reads, writes, wi = [], [], d.writes
        for k, t in enumerate(d.bindings):
            (writes if k in wi else reads).append((t.offset, t.offset + t.nbytes))
        written, read = self.written, self.read
        if (written or read) and (
            any(_overlaps(r, written) for r in reads) or any(_overlaps(w, written) or _overlaps(w, read) for w in writes)
        ):
            compute = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
            dst = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
            self.barrier(written, compute, vk.VK_ACCESS_SHADER_WRITE_BIT, compute, dst)
            self.written, self.read = [], []
        p, point = d.pipeline, vk.VK_PIPELINE_BIND_POINT_COMPUTE
        # the loader's entry points straight (as submit does): the package's wrappers convert
        # every argument in Python, about 0.1 ms of a dispatch's recording
        if p is not self.bound:  # a bound pipeline stays bound across barriers and dispatches
            lib.vkCmdBindPipeline(self.cmd, point, p.pipeline)
            self.bound = p
        lib.vkCmdBindDescriptorSets(self.cmd, point, p.layout, 0, 1, d.descriptor_set, 0, vk.ffi.NULL)
        if p.push_size:
            lib.vkCmdPushConstants(self.cmd, p.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_size, vk.ffi.from_buffer(d.push))
        lib.vkCmdDispatch(self.cmd, *d.groups)
        self.written += writes
        self.all_written += writes
        self.read += reads


def record_partition(vk, part: PartitionRecord, memory: ResizeMemory) -> None:
    """Record ``part`` into ``part.command`` (allocated by the caller) and build its submit info."""
    cmd = part.command
    begin = vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO)
    vk.vkBeginCommandBuffer(cmd, begin)
    rec = Recorder(vk, cmd, memory.buffer, memory.staging)
    stamps = part.timestamps
    if stamps is not None:
        stamps.reset(cmd)
    rec.global_barrier()
    transfer, compute = vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    fed = part.fed
    landed = rec.copies([t for t in part.uploads if t not in fed], to_device=True)
    landed += rec.device_copies([(fed[t], t) for t in part.uploads if t in fed])
    if landed:
        # to shaders, to the download copies (an aliased Identity/Reshape from input to output),
        # and before shader writes (a later tensor planned into an upload's bytes, with no
        # dispatch reading the upload in between: an op on an empty tensor dispatches nothing)
        after = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_READ_BIT
        rec.barrier(landed, transfer, vk.VK_ACCESS_TRANSFER_WRITE_BIT, compute | transfer, after)
    if stamps is not None:
        stamps.write(cmd, 0)
    for k, d in enumerate(part.dispatches):
        rec.dispatch(d)
        if stamps is not None:
            stamps.write(cmd, k + 1)
    if any(t.nbytes for t in part.downloads):
        if rec.all_written:
            # every range the partition wrote: a compute->compute barrier in between made the
            # earlier writes visible to shaders only, not to the transfer that reads them here
            rec.barrier(rec.all_written, compute, vk.VK_ACCESS_SHADER_WRITE_BIT, transfer, vk.VK_ACCESS_TRANSFER_READ_BIT)
        staged = [(t.staging, t.staging + t.nbytes) for t in part.downloads if t.nbytes]
        rec.copies(part.downloads, to_device=False)
        host = vk.VK_PIPELINE_STAGE_HOST_BIT
        rec.barrier(staged, transfer, vk.VK_ACCESS_TRANSFER_WRITE_BIT, host, vk.VK_ACCESS_HOST_READ_BIT, memory.staging)
    vk.vkEndCommandBuffer(cmd)
    part.submit_info, commands = _submit_info(vk, [cmd])
    part.keep = [commands]
    if part.clock is not None:
        part.timed_submit, timed = _submit_info(vk, [part.clock.begin, cmd, part.clock.end])
        part.keep.append(timed)


def _submit_info(vk, command_buffers: list) -> tuple:
    """``(VkSubmitInfo*, the command-buffer array it points at)`` for one batch of ``command_buffers``."""
    n = len(command_buffers)
    commands = vk.ffi.new(f"VkCommandBuffer[{n}]", command_buffers)
    info = {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, "commandBufferCount": n, "pCommandBuffers": commands}
    return vk.ffi.new("VkSubmitInfo*", info), commands


def write_descriptor_sets(vk, device, pool, dispatches: list[Dispatch], buffer, align: int):
    """Allocate one descriptor set per dispatch from ``pool`` and point its bindings at the
    tensors' ranges of ``buffer``; each dispatch's ``descriptor_set`` becomes a pointer to its
    set in the returned cffi array (the caller keeps it as long as commands are recorded from
    the dispatches). The writes are raw structs filled a field at a time (``raw_structs``),
    one update call."""
    if not dispatches:
        return None
    ffi, count = vk.ffi, len(dispatches)
    layouts = ffi.new(f"VkDescriptorSetLayout[{count}]", [d.pipeline.set_layout for d in dispatches])
    info = ffi.new("VkDescriptorSetAllocateInfo*")  # raw: the wrapper converts each layout in Python
    info.sType, info.descriptorPool, info.descriptorSetCount, info.pSetLayouts = (
        vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        pool,
        count,
        layouts,
    )
    sets = ffi.new(f"VkDescriptorSet[{count}]")
    result = vk.lib.vkAllocateDescriptorSets(device, info, sets)
    if result != vk.VK_SUCCESS:
        raise vk.exception_codes.get(result, vk.VkError)
    per = [len(d.bindings) for d in dispatches]
    spans = [binding_range(t, align)[:2] for d in dispatches for t in d.bindings]
    n = len(spans)
    for k, d in enumerate(dispatches):
        d.descriptor_set = sets + k
    if not n:
        return sets
    owner = np.repeat(np.arange(count), per)  # the dispatch of each write
    infos, writes = ffi.new(f"VkDescriptorBufferInfo[{n}]"), ffi.new(f"VkWriteDescriptorSet[{n}]")
    i = raw_structs.columns(ffi, infos, "VkDescriptorBufferInfo", n)
    i["buffer"][:] = raw_structs.address(ffi, buffer)
    span = np.array(spans, np.uint64).reshape(n, 2)
    i["offset"][:], i["range"][:] = span[:, 0], span[:, 1]
    w = raw_structs.columns(ffi, writes, "VkWriteDescriptorSet", n)
    w["sType"][:] = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
    w["dstSet"][:] = np.frombuffer(ffi.buffer(sets), np.uint64)[owner]
    w["dstBinding"][:] = np.arange(n) - np.repeat(np.cumsum(per) - per, per)  # binding k of its dispatch
    w["descriptorCount"][:], w["descriptorType"][:] = 1, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
    w["pBufferInfo"][:] = raw_structs.address(ffi, infos) + ffi.sizeof("VkDescriptorBufferInfo") * np.arange(n, dtype=np.uint64)
    vk.lib.vkUpdateDescriptorSets(device, n, writes, 0, vk.ffi.NULL)
    return sets


def submit_and_wait(runtime, submit_info, fence_array, lane: int = 0) -> None:
    """Submit one prebuilt ``VkSubmitInfo`` to the runtime's queue of ``lane`` and wait for its
    fence (reset first): ``submit_only`` then ``wait_for``. Calls the loader directly with
    prebuilt arrays: nothing is allocated. Raises ``VulkanError`` on a failed submission or
    after ``FENCE_TIMEOUT_NS``."""
    submit_only(runtime, submit_info, fence_array, lane)
    wait_for(runtime, fence_array)


def submit_only(runtime, submit_info, fence_array, lane: int = 0) -> None:
    """Submit ``submit_info`` to the queue of ``lane`` with the fence (reset first), without
    waiting; ``wait_for`` the fence before the fence or the submission's buffers are used
    again. Raises ``VulkanError``."""
    lib = runtime.vk.lib
    key = id(fence_array)
    if key in _OVERDUE:  # a submission that timed out may still be writing: never reset its fence early
        if lib.vkWaitForFences(runtime.device, 1, fence_array, 1, FENCE_TIMEOUT_NS) != 0:
            raise VulkanError(
                "the previous run of this session is still executing on the device (it exceeded "
                f"{FENCE_TIMEOUT_NS / 1e9:.0f} s); its buffers are in use, try again later"
            )
        _OVERDUE.discard(key)
    queue, lock = runtime.lane(lane)
    with lock:
        _check(lib.vkResetFences(runtime.device, 1, fence_array), "vkResetFences")
        _check(lib.vkQueueSubmit(queue, 1, submit_info, fence_array[0]), "vkQueueSubmit")


SPIN_NS = 1_000_000  # how long a wait polls the fence before blocking in the driver (GPUs only)


def wait_for(runtime, fence_array) -> None:
    """Wait (GIL released) for the submission of ``fence_array`` (``submit_only``); raises
    ``VulkanError`` after ``FENCE_TIMEOUT_NS`` (the next submission with this fence waits for
    it first) or on a failure.

    On a GPU (``runtime.spin_ns`` > 0) the fence is first polled (``vkGetFenceStatus``, the GIL
    released in each call) for up to ``SPIN_NS``, never past the time-out: a blocked
    ``vkWaitForFences`` wakes tens of µs after the fence signals, which every run and the end
    of every fenced chain pay (H200, PP-OCRv4 rec: 742-762 runs/s back to back blocking at
    once or after 0.1 ms of polling, 861-871 after up to 1 ms; ``bench/RESULTS.md``). The
    price: one core busy for up to 1 ms per wait. A CPU device (lavapipe) blocks at once,
    leaving the cores to its workers."""
    lib, device = runtime.vk.lib, runtime.device
    spin = runtime.spin_ns
    if spin:
        fence, end = fence_array[0], perf_counter_ns() + min(spin, FENCE_TIMEOUT_NS)  # never past the time-out
        while True:
            status = lib.vkGetFenceStatus(device, fence)
            if status == 0:  # VK_SUCCESS: signalled
                return
            if status != 1 or perf_counter_ns() > end:  # not VK_NOT_READY (an error), or spun long enough
                break
    result = lib.vkWaitForFences(device, 1, fence_array, 1, FENCE_TIMEOUT_NS)
    if result == 2:  # VK_TIMEOUT: remember it, so that the next run waits for this one first
        _OVERDUE.add(id(fence_array))
        raise VulkanError(
            f"a Vulkan submission did not finish within {FENCE_TIMEOUT_NS / 1e9:.0f} s; its outputs were "
            "not read (the next run of this session first waits for it)"
        )
    _check(result, "vkWaitForFences")


_OVERDUE: set[int] = set()  # id() of fence arrays whose submission timed out


def _check(result: int, what: str) -> None:
    if result != 0:  # VK_SUCCESS; VK_TIMEOUT is 2, errors are negative
        kind = "timed out" if result == 2 else f"failed with VkResult {result}"
        raise VulkanError(f"{what} {kind}")

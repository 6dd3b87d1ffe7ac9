"""Device memory of one resize: one device buffer, one staging buffer, tensor handles.

Layout of the device buffer (one ``VkBuffer`` bound to one ``VkDeviceMemory``): bytes
``[0, arena)`` are the session's memory plan (dynamic tensors at the planner's offsets),
then every constant at an offset aligned to ``CONSTANT_ALIGN`` bytes. The staging buffer
(host-visible, host-coherent, host-cached where the device has such a type; mapped once)
holds one slot per tensor that the session uploads or downloads at run. Both are created
by ``ResizeMemory.materialize`` at the end of a resize; until then handles carry offsets
only. Objects are destroyed when the ``ResizeMemory`` is garbage collected (the session
keeps a few resizes; their handles keep their memory alive). Constants, scratch and staging
slots are charged to the session's memory limit as they are placed (``mnnpy.limits``; the
arena by the planner).

Source: Vulkan 1.3 specification, "Memory Allocation" (``vkAllocateMemory``, host access
to mapped memory, coherence) and "Resource Creation" (buffers, memory requirements).
"""

from __future__ import annotations

import functools
import math
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy import limits
from mnnpy.backends.gpu.backend import GPUTensor

CONSTANT_ALIGN = 256  # the largest minStorageBufferOffsetAlignment the specification allows
STAGING_ALIGN = 64


def _align(n: int, a: int) -> int:
    return (int(n) + a - 1) // a * a


class VkTensor(GPUTensor):
    """A tensor on the device: ``memory`` (its ``ResizeMemory``), byte ``offset`` in the
    device buffer, ``shape``, ``dtype``; ``staging`` is the byte offset of its staging slot
    (or None) and ``host`` the numpy view of that slot once the staging buffer is mapped
    (float32 for an fp16 tensor at a border: its twin's slot)."""

    __slots__ = ("memory", "staging", "host", "bound")

    def __init__(self, memory: ResizeMemory, offset: int, shape: tuple[int, ...], dtype: np.dtype):
        super().__init__(offset, shape, dtype)
        self.memory = memory
        self.staging: int | None = None
        self.host: np.ndarray | None = None
        self.bound = None  # (align, commands.binding_range's result) once computed

    def shares(self, other: GPUTensor) -> bool:
        """Same resize memory, same byte offset."""
        return isinstance(other, VkTensor) and self.memory is other.memory and self.offset == other.offset


@functools.cache
def _name(dtype: np.dtype) -> str:
    """``str(dtype)`` ("float32"), kept: NumPy computes it in Python, about 8 µs, and every
    constant's charge names its dtype."""
    return str(dtype)


def _destroy(vk, device, owned: list[tuple[str, Any]]) -> None:
    """Destroy ``owned`` Vulkan objects, newest first (a finalizer: never raises)."""
    for fn, handle in reversed(owned):
        try:
            getattr(vk, fn)(device, handle, None)
        except Exception:  # noqa: BLE001 - interpreter shutdown or a lost device
            pass
    owned.clear()


def check_allocation(rt, nbytes: int, kind: int | None = None, what: str = "this resize (memory plan and constants)") -> None:
    """``ShapeError`` when one allocation of ``nbytes`` exceeds what the device allows: its
    ``maxMemoryAllocationSize`` and the size of the heap of memory type ``kind`` (by default
    the largest device-local heap). Source: Vulkan 1.3 specification, "Memory Allocation"
    (``VkPhysicalDeviceMaintenance3Properties``, ``VkMemoryHeap``)."""
    from mnnpy.errors import ShapeError

    mem = rt.memory
    if kind is None:
        heaps = [mem.memoryHeaps[i].size for i in range(mem.memoryHeapCount)]
        heap = max(heaps) if heaps else 0
    else:
        heap = mem.memoryHeaps[mem.memoryTypes[kind].heapIndex].size
    limits = [int(v) for v in (rt.limits.get("maxMemoryAllocationSize", 0), heap) if v]
    limit = min(limits) if limits else None
    if limit is not None and nbytes > limit:
        raise ShapeError(
            f"Vulkan: {what} needs one allocation of {nbytes} bytes ({nbytes / 2**30:.2f} GiB), more than the "
            f"{limit} bytes ({limit / 2**30:.2f} GiB) {rt.info.name} allows in one allocation "
            "(maxMemoryAllocationSize and heap size)"
        )


# the device buffer in mappable video memory where the device has it on its main heap
# (Runtime.mappable_device_type): constants written in place, no staging copy or wait
DIRECT_CONSTANTS = os.environ.get("MNNPY_VULKAN_DIRECT_CONSTANTS", "1") != "0"


@dataclass(frozen=True)
class Filled:
    """A constant's contents written at upload: ``fill(dst)`` writes a ``shape``/``dtype``
    C-contiguous view of the staging buffer (``ResizeMemory.constant_filled``)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fill: Callable[[np.ndarray], None]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


class ResizeMemory:
    """The device and staging memory of one resize of one session (see module docstring)."""

    def __init__(self, runtime, arena_bytes: int):
        self.rt = runtime
        self.arena_bytes = int(arena_bytes)
        self.top = _align(self.arena_bytes, CONSTANT_ALIGN)
        self.constants: list[tuple[VkTensor, np.ndarray | Filled]] = []
        self.staged: list[VkTensor] = []
        self.staging_bytes = 0
        self.buffer = self.staging = None
        self.device_memory = None
        self.direct = False  # the device buffer's memory is mappable: constants are written into it (upload_constants)
        self.mapped = None
        self.owned: list[tuple[str, Any]] = []  # (vkDestroy*/vkFree* name, handle)
        self.arrays: list = []  # cffi arrays that commands recorded from this memory point at (descriptor sets)
        self._finalizer = weakref.finalize(self, _destroy, runtime.vk, runtime.device, self.owned)
        self._finalizer.atexit = False

    def own(self, destroy: str, handle) -> Any:
        """Destroy ``handle`` with ``vk.<destroy>`` when this memory goes; returns ``handle``."""
        self.owned.append((destroy, handle))
        return handle

    def tensor(self, offset: int, shape, dtype) -> VkTensor:
        """A handle at byte ``offset`` of the arena."""
        return VkTensor(self, offset, shape, dtype)

    def constant(self, value: np.ndarray) -> VkTensor:
        """A handle for ``value``, placed after the arena; its bytes are uploaded by ``materialize``."""
        return self._place(np.ascontiguousarray(value))

    def constant_filled(self, shape, dtype, fill) -> VkTensor:
        """A handle like ``constant``'s whose bytes ``fill(dst)`` writes into the staging view
        ``dst`` at upload (``Filled``)."""
        return self._place(Filled(tuple(int(d) for d in shape), np.dtype(dtype), fill))

    def _place(self, value: np.ndarray | Filled) -> VkTensor:
        """``value``'s handle after the arena and the constants placed before (charged first)."""
        limits.charge(value.nbytes, lambda: f"a Vulkan constant {value.shape} {_name(value.dtype)}", "vulkan")
        t = VkTensor(self, self.top, value.shape, value.dtype)
        self.top = _align(self.top + max(value.nbytes, 1), CONSTANT_ALIGN)
        self.constants.append((t, value))
        return t

    def scratch(self, shape, dtype) -> VkTensor:
        """A handle for device memory of this resize placed after the arena, like a constant,
        but with no contents uploaded."""
        t = VkTensor(self, self.top, shape, dtype)
        limits.charge(t.nbytes, lambda: f"Vulkan scratch {t.shape} {_name(t.dtype)}", "vulkan")
        self.top = _align(self.top + max(t.nbytes, 1), CONSTANT_ALIGN)
        return t

    def stage(self, t: VkTensor) -> None:
        """Give ``t`` a staging slot (once; empty tensors need none)."""
        if t.staging is None and t.nbytes:
            limits.charge(t.nbytes, lambda: f"a Vulkan staging slot {t.shape} {_name(t.dtype)}", "vulkan")
            t.staging = self.staging_bytes
            self.staging_bytes = _align(self.staging_bytes + t.nbytes, STAGING_ALIGN)
            self.staged.append(t)

    def _block(self, size: int, usage: int, required: int, preferred: int, owned: bool = True, mappable: bool = False):
        """``(buffer, memory, bytes)`` of a new buffer of ``size`` bytes bound to new memory of a
        type with the ``required`` flags (``preferred`` ones first); ``mappable``: a
        ``Runtime.mappable_device_type`` where the device has one (``self.direct`` says so)."""
        vk = self.rt.vk
        dev = self.rt.device
        info = vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE
        )
        buf = vk.vkCreateBuffer(dev, info, None)
        req = vk.vkGetBufferMemoryRequirements(dev, buf)
        try:
            kind = self.rt.mappable_device_type(req.memoryTypeBits) if mappable else None
            self.direct = self.direct or kind is not None
            if kind is None:
                kind = self.rt.memory_type(req.memoryTypeBits, required, preferred)
            check_allocation(self.rt, int(req.size), kind)
            alloc = vk.VkMemoryAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size, memoryTypeIndex=kind
            )
            mem = vk.vkAllocateMemory(dev, alloc, None)
        except Exception:
            vk.vkDestroyBuffer(dev, buf, None)
            raise
        if owned:
            self.own("vkDestroyBuffer", buf)
            self.own("vkFreeMemory", mem)
        vk.vkBindBufferMemory(dev, buf, mem, 0)
        return buf, mem, int(req.size)

    def materialize(self) -> None:
        """Create the device buffer (arena + constants) and the mapped staging buffer, and
        give every staged handle its ``host`` view. Constants are uploaded separately
        (``commands.upload_constants``) through a temporary staging buffer."""
        vk = self.rt.vk
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        self.buffer, self.device_memory, _ = self._block(
            max(self.top, 16), usage, 0, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, mappable=DIRECT_CONSTANTS
        )
        if self.staging_bytes:
            self.staging, mem, size = self.staging_block(self.staging_bytes)
            self.mapped = vk.vkMapMemory(self.rt.device, mem, 0, size, 0)
            for t in self.staged:
                view = np.frombuffer(self.mapped, dtype=t.dtype, count=t.size, offset=t.staging)
                t.host = view.reshape(t.shape)

    def staging_block(self, size: int, owned: bool = True):
        """A host-visible, host-coherent transfer buffer of ``size`` bytes (host-cached
        preferred, for fast reads): ``(buffer, memory, bytes)``; owned by this memory, or
        with ``owned=False`` the caller's to free (``free_block``)."""
        vk = self.rt.vk
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        required = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        return self._block(size, usage, required, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT, owned)

    def free_block(self, buffer, memory) -> None:
        """Destroy a block made with ``owned=False``."""
        self.rt.vk.vkDestroyBuffer(self.rt.device, buffer, None)
        self.rt.vk.vkFreeMemory(self.rt.device, memory, None)

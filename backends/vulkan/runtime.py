"""``VulkanRuntime``: one per process for the chosen physical device.

Holds the logical device with up to ``MAX_LANES`` compute queues of one family (a
compute-only family where the device has one, else the first family with compute; each a
lane: sessions submit to their ``BackendConfig.lane``, and work on two queues may run on the
device at once), the memory types, and the pipeline objects
shared by sessions (``Pipelines``: shader modules from the committed SPIR-V, layouts,
compute pipelines through one ``VkPipelineCache``, loaded from a verified file at creation
and saved at exit: ``pipeline.py``). Sessions get a
``VulkanBackend`` each (``create_backend``). ``import`` of this module does not import the
``vulkan`` package; creating the Runtime does.

Source: Vulkan 1.3 specification, "Devices and Queues" (queue families, device creation)
and "Memory Allocation" (``VkPhysicalDeviceMemoryProperties``, memory type choice).
"""

from __future__ import annotations

import os
import threading
import time

from mnnpy.backend import BackendConfig, Runtime
from mnnpy.backends.vulkan.commands import SPIN_NS
from mnnpy.backends.vulkan.device import (
    DEVICE_ENV,
    FORK,
    STORAGE8_EXTENSION,
    DeviceInfo,
    as_device,
    choose,
    driver_version_string,
    probe,
)
from mnnpy.log import get_logger, lazy

_log = get_logger("vulkan")

MAX_LANES = 2  # queues asked for: a session's asynchronous runs go to one context per lane


class VulkanRuntime(Runtime):
    """Process-wide: the chosen device, its compute queue, memory types and ``Pipelines``."""

    name = "vulkan"

    @classmethod
    def in_auto(cls) -> bool:
        """``backend="auto"`` takes Vulkan only on a GPU (discrete or integrated): on a CPU
        device (lavapipe) the NumPy backend is faster. Asked for by name, any device is used."""
        try:
            if not cls.availability()[0]:
                return False
            device, _ = choose(probe().devices, os.environ.get(DEVICE_ENV) or None)
            return device is not None and device.type in ("discrete", "integrated")
        except Exception:  # noqa: BLE001 - availability() gives the reason
            return False

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """``(True, "")``, or ``(False, reason)``: no ``vulkan`` package, no loader, no
        driver (ICD), no device, or none matching ``$MNNPY_VULKAN_DEVICE``. Never raises."""
        if FORK.forked():
            return False, FORK.reason
        try:
            p = probe()
            if not p.devices:
                return False, p.reason
            device, reason = choose(p.devices, os.environ.get(DEVICE_ENV) or None)
        except Exception as e:  # never raise from here
            return False, f"Vulkan probe failed: {type(e).__name__} {e}"
        return device is not None, reason

    @classmethod
    def list_devices(cls) -> list[str]:
        """One line per Vulkan physical device (empty when there is none): name, type, API
        version, device-local memory, subgroup size, 16-bit storage support."""
        try:
            return [d.describe() for d in probe().devices]
        except Exception:  # availability() says why
            return []

    @classmethod
    def device_list(cls) -> tuple[list, str]:
        """Every Vulkan physical device (``probe()``'s order) as a ``Device``, or ``([], why)``."""
        if FORK.forked():
            return [], FORK.reason
        try:
            p = probe()
            return [as_device(i, d) for i, d in enumerate(p.devices)], p.reason
        except Exception as e:  # noqa: BLE001 - never raise from here
            return [], f"Vulkan probe failed: {type(e).__name__} {e}"

    @classmethod
    def default_device(cls) -> int | None:
        """The index of the device ``choose`` takes (``$MNNPY_VULKAN_DEVICE``), or None."""
        devices = probe().devices
        info, _ = choose(devices, os.environ.get(DEVICE_ENV) or None)
        return next((i for i, d in enumerate(devices) if info is not None and d.handle is info.handle), None)

    def __init__(self, device: int | None = None):
        """On physical device ``device`` (an index into ``probe().devices``; None: ``choose``'s)."""
        t0 = time.perf_counter()
        p = probe()
        if device is None:
            info, reason = choose(p.devices, os.environ.get(DEVICE_ENV) or None)
        else:
            info, reason = (p.devices[device], "") if 0 <= device < len(p.devices) else (None, f"no Vulkan device {device}")
        if info is None:
            raise RuntimeError(p.reason or reason)
        self.vk = vk = p.vk
        self.info: DeviceInfo = info
        self.physical = info.handle
        self.spin_ns = 0 if info.type == "cpu" else SPIN_NS  # commands.wait_for polls a GPU's fences first
        self.limits = info.limits
        self.family = self._compute_family()
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        # ns per timestamp tick, or 0 where the compute queue has no timestamps (timestamps.py);
        # the bits of a timestamp that count (timestampValidBits of the queue family, 0 to 64)
        self.timestamp_bits = int(families[self.family].timestampValidBits)
        self.timestamp_period = self.limits["timestampPeriod"] if self.timestamp_bits > 0 else 0.0
        count = max(1, min(MAX_LANES, int(families[self.family].queueCount)))
        queue_info = vk.VkDeviceQueueCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
            queueFamilyIndex=self.family,
            queueCount=count,
            pQueuePriorities=[1.0] * count,
        )
        # features enabled where the device has them: 16-bit storage (core in Vulkan 1.1) for
        # precision="low", 8-bit storage (bool tensors) and shaderInt64 (int64 tensors)
        self.storage16, self.storage8 = info.storage16, info.storage8
        self.int64 = info.int64 and info.api_version >= vk.VK_MAKE_VERSION(1, 1, 0)
        features, extensions = self._features()
        create = vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
            pNext=features,
            queueCreateInfoCount=1,
            pQueueCreateInfos=[queue_info],
            enabledExtensionCount=len(extensions),
            ppEnabledExtensionNames=extensions or None,
        )
        self.device = vk.vkCreateDevice(self.physical, create, None)
        # (queue, lock) per lane: vkQueueSubmit needs external synchronisation per queue
        self.queues = [(vk.vkGetDeviceQueue(self.device, self.family, i), threading.Lock()) for i in range(count)]
        self.lanes = count
        self.memory = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        from mnnpy.backends.vulkan.pipeline import Pipelines

        self.pipelines = Pipelines(self)
        _log.info("runtime on %s created in %.1f ms", lazy(self.describe), (time.perf_counter() - t0) * 1e3)

    def _features(self) -> tuple:
        """``(VkPhysicalDeviceFeatures2 chain or None, device extensions)`` enabling what
        ``info`` reports: ``storageBuffer16BitAccess``, ``storageBuffer8BitAccess`` (with
        ``VK_KHR_8bit_storage``) and ``shaderInt64`` (Vulkan 1.1+: the
        shaders of integer tensors are SPIR-V 1.3)."""
        vk, ffi = self.vk, self.vk.ffi
        keep, extensions = [ffi.NULL], []  # the chain's structs, newest first (kept alive with the runtime)
        if self.storage8:
            s8 = {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, "storageBuffer8BitAccess": 1}
            keep.insert(0, ffi.new("VkPhysicalDevice8BitStorageFeatures*", s8))
            extensions.append(STORAGE8_EXTENSION)  # SPV_KHR_8bit_storage needs it on a Vulkan 1.1 instance
        if self.storage16:
            s16 = {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, "storageBuffer16BitAccess": 1}
            keep.insert(0, ffi.new("VkPhysicalDevice16BitStorageFeatures*", {**s16, "pNext": keep[0]}))
        if len(keep) == 1 and not self.int64:
            return None, extensions
        f2 = {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "pNext": keep[0]}
        keep.insert(0, ffi.new("VkPhysicalDeviceFeatures2*", {**f2, "features": {"shaderInt64": int(self.int64)}}))
        self._features_keep = keep
        return keep[0], extensions

    @classmethod
    def cache_info(cls) -> str:
        """One line for ``mnnpy devices``: the pipeline-cache folder and the chosen device's
        file (present with its size in bytes, or absent), or "off" / "unusable"."""
        from mnnpy.backends.vulkan.pipeline import CACHE_ENV, cache_directory, file_name

        d = cache_directory()
        if d is None:
            return f"cache: off (${CACHE_ENV})"
        if d.exists() and not d.is_dir():
            return f"cache: unusable, {d} is not a folder (${CACHE_ENV}); the pipeline cache stays in memory"
        try:
            info, _ = choose(probe().devices, os.environ.get(DEVICE_ENV) or None)
        except Exception:  # noqa: BLE001 - availability() says why
            info = None
        what = "no device"
        if info is not None:
            f = d / file_name(info)
            what = f"pipeline cache {f.name} " + (f"{f.stat().st_size} bytes" if f.is_file() else "absent")
        return f"cache: {d} ({what}; ${CACHE_ENV} moves it, 0 turns it off)"

    def save_pipeline_cache(self) -> bool:
        """Save the pipeline cache now (otherwise at exit) if pipelines were created since it was
        loaded or last saved; True when a file was written (``Pipelines.save``)."""
        return self.pipelines.save()

    def _compute_family(self) -> int:
        vk = self.vk
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        compute = [i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT and f.queueCount > 0]
        if not compute:
            raise RuntimeError(f"Vulkan device {self.info.name} has no compute queue")
        only = [i for i in compute if not families[i].queueFlags & vk.VK_QUEUE_GRAPHICS_BIT]
        return (only or compute)[0]

    def memory_type(self, type_bits: int, required: int, preferred: int = 0) -> int:
        """Index of a memory type allowed by ``type_bits`` with every ``required`` property
        flag, one that also has the ``preferred`` flags first; ``RuntimeError`` if none."""
        candidates = [
            i
            for i in range(self.memory.memoryTypeCount)
            if type_bits & (1 << i) and (self.memory.memoryTypes[i].propertyFlags & required) == required
        ]
        if not candidates:
            raise RuntimeError(f"no Vulkan memory type with property flags {required:#x} (allowed types {type_bits:#x})")
        best = [i for i in candidates if (self.memory.memoryTypes[i].propertyFlags & preferred) == preferred]
        return (best or candidates)[0]

    def mappable_device_type(self, type_bits: int) -> int | None:
        """Index of a memory type allowed by ``type_bits`` that is device-local, host-visible
        and host-coherent and lives on the same heap as the device-local type ``memory_type``
        picks (the whole of video memory mappable: resizable BAR, unified memory, a CPU
        implementation), else None. A small BAR window on a heap of its own (256 MiB on a
        discrete GPU without resizable BAR) does not count: the arena would not fit there."""
        vk = self.vk
        local = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        want = local | vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        try:
            heap = self.memory.memoryTypes[self.memory_type(type_bits, local)].heapIndex
        except RuntimeError:
            return None
        types = self.memory.memoryTypes
        for i in range(self.memory.memoryTypeCount):
            if type_bits & (1 << i) and (types[i].propertyFlags & want) == want and types[i].heapIndex == heap:
                return i
        return None

    def describe(self) -> str:
        """One line: the device (``DeviceInfo.describe``) and its driver version."""
        return f"{self.info.describe()}; driver {driver_version_string(self.info)}"

    def identity(self) -> str:
        """Device, driver and pipeline-cache UUID (``pipeline.device_key``) and the storage
        features enabled (16-bit, 8-bit, int64), which decide what the schedule places here."""
        from mnnpy.backends.vulkan.pipeline import device_key

        return f"{device_key(self.info)}|storage16 {self.storage16}|storage8 {self.storage8}|int64 {self.int64}"

    def lane(self, index: int) -> tuple:
        """``(VkQueue, lock)`` of lane ``index`` (modulo the lanes there are)."""
        return self.queues[index % len(self.queues)]

    def create_backend(self, config: BackendConfig):
        from mnnpy.backends.vulkan.backend import VulkanBackend

        return VulkanBackend(self, config)

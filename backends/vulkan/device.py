"""Vulkan instance and physical-device probing: what exists here, and which device to use.

``probe()`` never raises: it returns a ``Probe`` holding the instance and every physical
device with its properties, or the reason there is none (the ``vulkan`` package missing,
no Vulkan loader ``libvulkan.so.1``, no driver (ICD), no device). Device choice: a
discrete GPU first, then integrated, virtual, other, CPU (lavapipe); the environment
variable ``MNNPY_VULKAN_DEVICE`` selects by type (``discrete``, ``integrated``,
``virtual``, ``cpu``, ``other``; ``gpu`` = discrete or integrated) or by part of the name.

Sources: Vulkan 1.3 specification, chapters "Devices and Queues" (physical device
properties, ``VkPhysicalDeviceType``), "Memory Allocation" (memory heaps) and "Features"
(``VkPhysicalDevice16BitStorageFeatures``, ``VkPhysicalDevice8BitStorageFeatures``,
``VkPhysicalDeviceFeatures::shaderInt64``, ``VkPhysicalDeviceSubgroupProperties``).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass, field
from typing import Any

from mnnpy.backends.gpu.runtime import choose_device
from mnnpy.backends.vulkan import validation
from mnnpy.errors import MnnpyError
from mnnpy.fork_guard import ForkGuard

DEVICE_ENV = "MNNPY_VULKAN_DEVICE"
TYPE_NAMES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
NO_ICD = "no Vulkan driver (ICD) could create an instance (Debian: mesa-vulkan-drivers)"
PREFERENCE = {"discrete": 0, "integrated": 1, "virtual": 2, "other": 3, "cpu": 4}
INSTANCE_API = (1, 1, 0)  # subgroup properties and *2 queries are core in 1.1


class VulkanError(MnnpyError):
    """A Vulkan call failed at run or resize (lost device, out of memory, time-out)."""


def version_string(v: int) -> str:
    """``major.minor.patch`` of a packed ``VK_MAKE_API_VERSION`` value."""
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


@dataclass
class DeviceInfo:
    """One physical device: handle, name, type (``TYPE_NAMES``), API version (packed int),
    driver version, device-local memory (bytes), subgroup size (invocations, 0 unknown),
    16-bit storage-buffer support (``storage16``), 8-bit storage-buffer support (``storage8``:
    ``storageBuffer8BitAccess`` through ``VK_KHR_8bit_storage``, bool tensors), 64-bit
    integers in shaders (``int64``:
    ``shaderInt64``), the limits the backend reads, pipeline-cache UUID
    (``VkPhysicalDeviceProperties::pipelineCacheUUID``, 16 bytes), PCI-style vendor and
    device ids (``vendorID``, ``deviceID``) and the device UUID
    (``VkPhysicalDeviceIDProperties::deviceUUID``, 16 bytes; empty before Vulkan 1.1)."""

    handle: Any
    name: str
    type: str
    api_version: int
    driver_version: int
    memory: int
    subgroup_size: int
    storage16: bool
    limits: dict[str, Any] = field(default_factory=dict)
    storage8: bool = False
    int64: bool = False
    uuid: bytes = b""
    vendor_id: int = 0
    device_id: int = 0
    device_uuid: bytes = b""

    def describe(self) -> str:
        """One line: name (type; Vulkan version; memory MiB; subgroup size; fp16 storage; 8-bit
        storage; int64)."""
        yes = {True: "yes", False: "no"}
        return (
            f"{self.name} ({self.type}; Vulkan {version_string(self.api_version)}; {self.memory // 2**20} MiB; "
            f"subgroup {self.subgroup_size or '?'}; 16-bit storage {yes[self.storage16]}; "
            f"8-bit storage {yes[self.storage8]}; int64 {yes[self.int64]})"
        )


@dataclass
class Probe:
    """Result of ``probe()``: the ``vulkan`` module, instance and devices, or ``reason``."""

    vk: Any = None
    instance: Any = None
    devices: list[DeviceInfo] = field(default_factory=list)
    reason: str = ""
    messages: list[str] = field(default_factory=list)  # validation messages (validation.py)
    messenger: Any = None


def _import_vulkan():
    """``(module, "")`` or ``(None, reason)``: the cffi binding loads ``libvulkan`` at import."""
    try:
        import vulkan as vk
    except ImportError as e:
        return None, f"the 'vulkan' package is not installed ({e}; pip install 'vulkan>=1.3.275')"
    except OSError as e:  # the binding found no loader library
        return None, f"no Vulkan loader (libvulkan.so.1; Debian: libvulkan1): {e}"
    except Exception as e:  # a broken binary module
        return None, f"the 'vulkan' package is not importable: {e}"
    return vk, ""


STORAGE8_EXTENSION = "VK_KHR_8bit_storage"  # core from Vulkan 1.2, but mnnpy's instance asks for 1.1


def has_extension(vk, pd, name: str) -> bool:
    """Whether physical device ``pd`` offers device extension ``name``."""
    return any(e.extensionName == name for e in vk.vkEnumerateDeviceExtensionProperties(pd, None))


def _device_info(vk, pd) -> DeviceInfo:
    ffi = vk.ffi
    props = vk.vkGetPhysicalDeviceProperties(pd)
    subgroup, storage16, storage8, device_uuid, max_alloc = 0, False, False, b"", 0
    if props.apiVersion >= vk.VK_MAKE_VERSION(1, 1, 0):
        m3 = ffi.new(
            "VkPhysicalDeviceMaintenance3Properties*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES}
        )
        ids = ffi.new("VkPhysicalDeviceIDProperties*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, "pNext": m3})
        sub = ffi.new(
            "VkPhysicalDeviceSubgroupProperties*",
            {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, "pNext": ids},
        )
        p2 = ffi.new("VkPhysicalDeviceProperties2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": sub})
        vk.vkGetPhysicalDeviceProperties2(pd, p2)
        subgroup = int(sub.subgroupSize)
        device_uuid = bytes(ffi.buffer(ids.deviceUUID))
        max_alloc = int(m3.maxMemoryAllocationSize)
        f8 = None  # through the extension: the instance is Vulkan 1.1 (INSTANCE_API), where 8-bit storage is not core
        if has_extension(vk, pd, STORAGE8_EXTENSION):
            f8 = ffi.new(
                "VkPhysicalDevice8BitStorageFeatures*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES}
            )
        f16 = ffi.new(
            "VkPhysicalDevice16BitStorageFeatures*",
            {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, "pNext": f8 or ffi.NULL},
        )
        f2 = ffi.new("VkPhysicalDeviceFeatures2*", {"sType": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, "pNext": f16})
        vk.vkGetPhysicalDeviceFeatures2(pd, f2)
        storage16 = bool(f16.storageBuffer16BitAccess)
        storage8 = f8 is not None and bool(f8.storageBuffer8BitAccess)
    mem = vk.vkGetPhysicalDeviceMemoryProperties(pd)
    local = sum(
        int(mem.memoryHeaps[i].size)
        for i in range(mem.memoryHeapCount)
        if mem.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT
    )
    lim = props.limits
    limits = {
        "maxComputeWorkGroupCount": tuple(int(lim.maxComputeWorkGroupCount[i]) for i in range(3)),
        "maxComputeWorkGroupInvocations": int(lim.maxComputeWorkGroupInvocations),
        "maxComputeWorkGroupSize": tuple(int(lim.maxComputeWorkGroupSize[i]) for i in range(3)),
        "maxPushConstantsSize": int(lim.maxPushConstantsSize),
        "maxStorageBufferRange": int(lim.maxStorageBufferRange),
        "minStorageBufferOffsetAlignment": int(lim.minStorageBufferOffsetAlignment),
        "nonCoherentAtomSize": int(lim.nonCoherentAtomSize),
        "timestampPeriod": float(lim.timestampPeriod),
        "maxMemoryAllocationSize": max_alloc,  # 0: not reported (a Vulkan 1.0 device)
    }
    return DeviceInfo(
        handle=pd,
        name=str(props.deviceName),
        type=TYPE_NAMES.get(int(props.deviceType), "other"),
        api_version=int(props.apiVersion),
        driver_version=int(props.driverVersion),
        memory=local,
        subgroup_size=subgroup,
        storage16=storage16,
        limits=limits,
        storage8=storage8,
        int64=bool(vk.vkGetPhysicalDeviceFeatures(pd).shaderInt64),
        uuid=bytes(props.pipelineCacheUUID),
        vendor_id=int(props.vendorID),
        device_id=int(props.deviceID),
        device_uuid=device_uuid,
    )


FORK = ForkGuard("Vulkan")


@functools.cache
def probe() -> Probe:
    """The process-wide instance and its physical devices, or why there are none (cached)."""
    FORK.mark()
    vk, reason = _import_vulkan()
    if vk is None:
        return Probe(reason=reason)
    try:
        app = vk.VkApplicationInfo(
            sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO,
            pApplicationName="mnnpy",
            applicationVersion=1,
            pEngineName="mnnpy",
            engineVersion=1,
            apiVersion=vk.VK_MAKE_VERSION(*INSTANCE_API),
        )
        layers, extensions, chain = [], [], None
        validate = validation.requested() and validation.layer_available(vk)
        if validation.requested() and not validate:
            warnings.warn(
                f"{validation.VALIDATION_ENV} is set but {validation.LAYER} is not installed "
                "(Debian vulkan-validationlayers): Vulkan runs without validation",
                RuntimeWarning,
                stacklevel=2,
            )
        if validate:
            layers, extensions, chain = validation.instance_options(vk)
        info = vk.VkInstanceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
            pNext=chain,
            pApplicationInfo=app,
            ppEnabledLayerNames=layers or None,
            ppEnabledExtensionNames=extensions or None,
        )
        instance = vk.vkCreateInstance(info, None)
    except Exception as e:  # VkErrorIncompatibleDriver: the loader found no ICD
        return Probe(
            vk=vk,
            reason=f"{NO_ICD}: {type(e).__name__} {e}".strip(),
        )
    try:
        devices = [_device_info(vk, pd) for pd in vk.vkEnumeratePhysicalDevices(instance)]
    except Exception as e:
        return Probe(vk=vk, instance=instance, reason=f"enumerating Vulkan devices failed: {type(e).__name__} {e}".rstrip())
    if not devices:
        return Probe(vk=vk, instance=instance, reason="no Vulkan physical device")
    found = Probe(vk=vk, instance=instance, devices=devices)
    if validate:
        found.messenger = validation.install_messenger(vk, instance, found.messages)
    return found


# VkPhysicalDeviceType -> NNAPI's device type (ANeuralNetworksDevice_getType)
NNAPI_TYPES = {"discrete": "gpu", "integrated": "gpu", "virtual": "gpu", "cpu": "cpu", "other": "other"}
NVIDIA = 0x10DE  # vendorID whose driverVersion packs 10.8.8.6 bits


def driver_version_string(info: DeviceInfo) -> str:
    """``driverVersion`` as text: NVIDIA packs it 10.8.8.6 bits (major.minor.patch), other
    drivers (Mesa, AMD) as ``VK_MAKE_API_VERSION``. The encoding is the vendor's (Vulkan 1.3,
    ``VkPhysicalDeviceProperties::driverVersion``)."""
    v = info.driver_version
    if info.vendor_id == NVIDIA:
        return f"{(v >> 22) & 0x3FF}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}"
    return version_string(v)


def as_device(index: int, info: DeviceInfo):
    """The ``mnnpy.device.Device`` of physical device ``info``, number ``index`` of ``probe()``."""
    from mnnpy.device import Device

    return Device(
        name=info.name,
        backend="vulkan",
        index=index,
        type=NNAPI_TYPES.get(info.type, "other"),
        driver_version=driver_version_string(info),
        feature_level=f"Vulkan {version_string(info.api_version)}",
        description=info.describe(),
    )


# MNNPY_VULKAN_DEVICE's type names: each device type, and gpu = discrete or integrated
TYPES = {t: (lambda d, t=t: d.type == t) for t in ("discrete", "integrated", "virtual", "cpu", "other")}
TYPES["gpu"] = lambda d: d.type in ("discrete", "integrated")


def choose(devices: list[DeviceInfo], wanted: str | None) -> tuple[DeviceInfo | None, str]:
    """``(device, "")`` or ``(None, reason)``: by ``PREFERENCE`` after filtering by ``wanted``
    (a key of ``TYPES`` or part of the device name, case-insensitive)."""
    return choose_device(
        devices,
        wanted,
        api="Vulkan",
        env=DEVICE_ENV,
        types=TYPES,
        name=lambda d: d.name,
        rank=lambda d: PREFERENCE[d.type],
        none="physical device",
    )

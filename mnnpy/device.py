"""Devices (NNAPI's ``ANeuralNetworksDevice``): one per physical device and API here.

``devices()`` lists the CPU, every OpenCL device and every Vulkan device (more precisely:
every device of every registered backend, in registration order, each backend's devices in
its own order). A ``Device`` is a description; its ``id`` (``"vulkan:1"``) is what
``create_session(backend=...)`` and ``get_runtime`` take, and there is one Runtime per
device and process. Listing imports each backend's driver package lazily; a backend whose
driver is missing contributes no device (``devices(include_unavailable=True)`` says why).

Sources: NNAPI ``ANeuralNetworks_getDeviceCount``/``getDevice``, ``ANeuralNetworksDevice_getName``,
``getType`` (``ANEURALNETWORKS_DEVICE_CPU``, ``_GPU``, ``_ACCELERATOR``, ``_OTHER``),
``getVersion`` (the driver's version string) and ``getFeatureLevel``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mnnpy.backend import _load_runtime_class, backend_availability, registered_backends, split_device_name
from mnnpy.errors import BackendUnavailableError

# ANeuralNetworksDevice_getType's device types (NNAPI: UNKNOWN aside)
DEVICE_TYPES = ("cpu", "gpu", "accelerator", "other")


@dataclass(frozen=True)
class Device:
    """One device of one backend (NNAPI's ``ANeuralNetworksDevice``).

    ``name``: the driver's device name (``getName``); ``backend``: the backend that runs on it
    (``"cpu"``, ``"opencl"``, ``"vulkan"``); ``index``: its position in that backend's device
    list (``None`` for an unavailable backend's entry); ``type``: one of ``DEVICE_TYPES``
    (``getType``); ``driver_version``: the driver's version, as text (``getVersion``);
    ``feature_level``: the API level the device implements, as text (``getFeatureLevel``:
    ``"Vulkan 1.3.230"``, ``"OpenCL 3.0"``; the CPU backend: mnnpy's version); ``description``:
    the backend's one-line description of it (memory, compute units, features); ``default``:
    whether the plain backend name (``"vulkan"``) means this device; ``reason``: why the
    backend has no usable device (only on ``devices(include_unavailable=True)``'s entries).
    """

    name: str
    backend: str
    index: int | None
    type: str
    driver_version: str
    feature_level: str
    description: str
    default: bool = False
    reason: str = ""

    @property
    def id(self) -> str:
        """The name sessions take: ``"<backend>:<index>"`` (``"vulkan:1"``)."""
        return self.backend if self.index is None else f"{self.backend}:{self.index}"

    @property
    def available(self) -> bool:
        """Whether the device is there (not an unavailable backend's entry)."""
        return self.index is not None

    def capabilities(self, scale: str = "full", runs: int | None = None, progress=None):
        """NNAPI's ``Capabilities`` of this device relative to the CPU backend, measured once and
        cached (``mnnpy.capabilities.capabilities``, which documents the arguments)."""
        from mnnpy.capabilities import capabilities

        return capabilities(self, scale, runs, progress)

    def describe(self) -> str:
        """One line: id, name, type, driver version, feature level, and ``(default)``."""
        if not self.available:
            return f"{self.backend}: unavailable: {self.reason}"
        mark = " (default)" if self.default else ""
        return (
            f"{self.id}{mark}: {self.name}; type {self.type}; driver {self.driver_version or '?'}; "
            f"feature level {self.feature_level or '?'}"
        )


def _backend_devices(name: str) -> tuple[list[Device], str]:
    """Backend ``name``'s devices with ``default`` marked, or ``([], reason)``. Never raises."""
    try:
        cls = _load_runtime_class(name)
        found, reason = cls.device_list()
        default = cls.default_device() if found else None
    except BackendUnavailableError as e:
        return [], str(e)
    except Exception as e:  # noqa: BLE001 - a broken driver: listed as unavailable, never raised
        return [], f"listing its devices failed: {type(e).__name__} {e}".rstrip()
    return [replace(d, default=d.index == default) for d in found], reason


def devices(include_unavailable: bool = False) -> list[Device]:
    """Every device here (NNAPI's ``ANeuralNetworks_getDeviceCount``/``getDevice``): per
    registered backend, in registration order (``mnnpy.backend.registered_backends``), its
    devices. A backend with none (its package or driver missing, no device, a forked process)
    contributes nothing, or with ``include_unavailable`` one entry whose ``reason`` says why
    (``Device.available`` false). Imports driver packages lazily; never raises."""
    out = []
    for name in registered_backends():
        found, reason = _backend_devices(name)
        out += found
        if not found and include_unavailable:
            out.append(Device(name, name, None, "other", "", "", "", reason=reason or "no device"))
    return out


def get_device(name: str | Device) -> Device:
    """The ``Device`` that a device name means: ``"vulkan:1"`` (device 1 of the backend), or a
    backend name (``"vulkan"``: its default device). A ``Device`` is returned as it is.
    Raises ``InputError`` (a malformed name) or ``BackendUnavailableError`` (an unknown
    backend, one unusable here, an index past its devices)."""
    if isinstance(name, Device):
        return name
    backend, index = split_device_name(name)
    ok, reason = backend_availability(name)
    if not ok:
        raise BackendUnavailableError(f"device '{name}' is unavailable: {reason}")
    found, _ = _backend_devices(backend)
    chosen = [d for d in found if (d.default if index is None else d.index == index)]
    if not chosen:
        raise BackendUnavailableError(f"device '{name}' is unavailable: the {backend} backend lists no such device")
    return chosen[0]

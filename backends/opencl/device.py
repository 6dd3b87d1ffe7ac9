"""OpenCL platform and device probing: what exists here, and which device to use.

``find_device`` never raises: it returns the device, or the reason there is none (pyopencl
missing, no ICD/platform, no device, none matching ``$MNNPY_OPENCL_DEVICE``). Choice: a GPU
first, else the first device; ``MNNPY_OPENCL_DEVICE`` selects by type (``gpu``, ``cpu``,
``accelerator``) or by part of "platform name device name". ``import`` of this module does
not import pyopencl.
"""

from __future__ import annotations

import functools

from mnnpy.backends.gpu.runtime import choose_device
from mnnpy.fork_guard import ForkGuard

DEVICE_ENV = "MNNPY_OPENCL_DEVICE"
FORK = ForkGuard("OpenCL")


def devices_of(platform) -> list:
    """The devices of ``platform`` (none where it raises DEVICE_NOT_FOUND)."""
    try:
        return platform.get_devices()
    except Exception:  # a platform without devices raises DEVICE_NOT_FOUND
        return []


def all_devices() -> tuple[list, str]:
    """``(devices, "")``: every device of every platform, platforms in ``cl.get_platforms()``
    order (``backend="opencl:<index>"`` indexes this list), or ``([], reason)``: pyopencl
    missing, no ICD or platform, no device. Never raises."""
    try:
        import pyopencl as cl
    except Exception as e:  # ImportError, or a broken binary module
        return [], f"pyopencl is not importable ({e})"
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # no ICD loader / no platform: cl.LogicError PLATFORM_NOT_FOUND_KHR
        return [], f"no OpenCL platform (is an ICD installed?): {e}"
    found = [d for p in platforms for d in devices_of(p)]
    return found, "" if found else "no OpenCL device"


def find_device(wanted: str | None):
    """``(device, "")`` or ``(None, reason)``: a GPU first, else any; ``wanted`` (the value of
    ``$MNNPY_OPENCL_DEVICE``) filters by type or name."""
    found, reason = all_devices()
    if not found and reason != "no OpenCL device":
        return None, reason
    import pyopencl as cl

    kinds = {"gpu": cl.device_type.GPU, "cpu": cl.device_type.CPU, "accelerator": cl.device_type.ACCELERATOR}
    return choose_device(
        found,
        wanted,
        api="OpenCL",
        env=DEVICE_ENV,
        types={k: (lambda d, bit=bit: bool(d.type & bit)) for k, bit in kinds.items()},
        name=lambda d: f"{d.platform.name} {d.name}",
        rank=lambda d: 0 if d.type & cl.device_type.GPU else 1,
        named="a platform or device name",
    )


def nnapi_type(d) -> str:
    """NNAPI's device type (``ANeuralNetworksDevice_getType``) of OpenCL device ``d``:
    ``CL_DEVICE_TYPE`` GPU -> gpu, CPU -> cpu, ACCELERATOR -> accelerator, else other."""
    import pyopencl as cl

    for bit, name in ((cl.device_type.GPU, "gpu"), (cl.device_type.CPU, "cpu"), (cl.device_type.ACCELERATOR, "accelerator")):
        if d.type & bit:
            return name
    return "other"


def as_device(index: int, d):
    """The ``mnnpy.device.Device`` of OpenCL device ``d``, number ``index`` of ``all_devices()``:
    driver version ``CL_DRIVER_VERSION``, feature level the first two words of
    ``CL_DEVICE_VERSION`` (``"OpenCL 3.0"``)."""
    from mnnpy.device import Device

    return Device(
        name=d.name.strip(),
        backend="opencl",
        index=index,
        type=nnapi_type(d),
        driver_version=d.driver_version.strip(),
        feature_level=" ".join(d.version.split()[:2]),
        description=describe_device(d),
    )


def has_int64(d) -> bool:
    """Whether device ``d`` computes 64-bit integers (``long``): every full-profile device;
    an embedded-profile one only with ``cles_khr_int64`` (OpenCL 1.2 specification, 6.1.1)."""
    return d.profile != "EMBEDDED_PROFILE" or "cles_khr_int64" in d.extensions


@functools.cache
def device_for(wanted: str | None):
    """``find_device(wanted)``, once per process (marks the process as an OpenCL user for ``FORK``)."""
    FORK.mark()
    return find_device(wanted)


def describe_device(d) -> str:
    """``name (platform; OpenCL version; compute units; memory MiB; fp16 yes/no)``."""
    return (
        f"{d.name} ({d.platform.name}; {d.version}; {d.max_compute_units} compute units; "
        f"{d.global_mem_size // 2**20} MiB; fp16 {'yes' if 'cl_khr_fp16' in d.extensions else 'no'})"
    )

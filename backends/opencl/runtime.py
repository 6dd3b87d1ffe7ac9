"""``OpenCLRuntime``: one per process for the chosen device (``device.py``).

Holds the device, one context, two in-order queues (the second with profiling events:
``device_time.py``), the program cache (``program.py``: built from ``shaders/opencl/*.cl``
with ``common.h`` and the activation table's code (``activation.py``) prepended, in memory
and as verified binaries on disk) and the work-group ``Tuner`` (``tuning.py``). Sessions get an ``OpenCLBackend`` each
(``create_backend``). ``import`` of this module does not import pyopencl; creating the
Runtime does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from mnnpy.backend import BackendConfig, Runtime
from mnnpy.backends.gpu.runtime import shader_dir
from mnnpy.backends.opencl.device import DEVICE_ENV, FORK, all_devices, as_device, describe_device, device_for, has_int64
from mnnpy.log import get_logger, lazy

_log = get_logger("opencl")


def _shader_dir():
    """The folder of the ``.cl`` sources (package data, else the repository's ``shaders/opencl``)."""
    return shader_dir("opencl", "elementwise.cl")


class OpenCLRuntime(Runtime):
    """Process-wide: device, context, in-order queue, program cache, tuner."""

    name = "opencl"

    @classmethod
    def in_auto(cls) -> bool:
        """``backend="auto"`` takes OpenCL only on a GPU or accelerator: on a CPU device (PoCL)
        the NumPy backend is faster (PP-OCR demo here: 76-100 ms on the CPU backend, about
        400 ms on PoCL). Asked for by name, a CPU device is used."""
        try:
            import pyopencl as cl

            device, _ = device_for(os.environ.get(DEVICE_ENV) or None)
            return device is not None and not device.type & cl.device_type.CPU
        except Exception:  # availability() gives the reason
            return False

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """``(True, "")``, or ``(False, reason)``: no pyopencl, no platform or device, none matching ``$MNNPY_OPENCL_DEVICE``,
        or a forked process. Never raises."""
        if FORK.forked():
            return False, FORK.reason
        try:
            device, reason = device_for(os.environ.get(DEVICE_ENV) or None)
        except Exception as e:  # never raise from here
            return False, f"OpenCL probe failed: {e}"
        return device is not None, reason

    @classmethod
    def device_list(cls) -> tuple[list, str]:
        """Every OpenCL device (``all_devices()``'s order) as a ``Device``, or ``([], why)``."""
        if FORK.forked():
            return [], FORK.reason
        try:
            found, reason = all_devices()
            return [as_device(i, d) for i, d in enumerate(found)], reason
        except Exception as e:  # noqa: BLE001 - never raise from here
            return [], f"OpenCL probe failed: {e}"

    @classmethod
    def default_device(cls) -> int | None:
        """The index of the device ``device_for`` takes (``$MNNPY_OPENCL_DEVICE``), or None."""
        device, _ = device_for(os.environ.get(DEVICE_ENV) or None)
        return None if device is None else all_devices()[0].index(device)

    def __init__(self, device: int | None = None):
        """On device ``device`` (an index into ``all_devices()``; None: ``device_for``'s choice)."""
        t0 = time.perf_counter()
        import pyopencl as cl

        self.cl = cl
        FORK.mark()
        if device is None:
            self.device, reason = device_for(os.environ.get(DEVICE_ENV) or None)
        else:
            found, reason = all_devices()
            self.device = found[device] if 0 <= device < len(found) else None
        if self.device is None:
            raise RuntimeError(reason or f"no OpenCL device {device}")
        self.max_alloc = int(self.device.max_mem_alloc_size)  # bytes in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)
        self.int64 = has_int64(self.device)  # int64 tensors (OpenCLBackend.dtype_limit)
        self.context = cl.Context([self.device])
        # two in-order queues: a plain one for runs and one with profiling events for timed runs
        # (device_time.py; a profiling queue cost NVIDIA's driver 29% on a one-op model)
        self.profiling = bool(self.device.queue_properties & cl.command_queue_properties.PROFILING_ENABLE)
        self.queue = cl.CommandQueue(self.context, self.device)
        props = cl.command_queue_properties.PROFILING_ENABLE
        self.timed_queue = cl.CommandQueue(self.context, self.device, properties=props) if self.profiling else None
        from mnnpy.backends.opencl.program import ProgramCache
        from mnnpy.backends.opencl.tuning import Tuner

        self.programs = ProgramCache(self)
        self.tuner = Tuner(self)
        from mnnpy.backends.opencl.activation import source as activation_source

        self._prelude = _shader_dir().joinpath("common.h").read_text() + activation_source()
        self._sources: dict[str, str] = {}  # file -> full source, read once per process
        _log.info("runtime on %s created in %.1f ms", lazy(self.describe), (time.perf_counter() - t0) * 1e3)

    def describe(self) -> str:
        """One line: device name, platform, OpenCL version, compute units, memory."""
        return describe_device(self.device)

    def identity(self) -> str:
        """Device, driver and platform version (``program.device_identity``), and what the
        schedule reads of the device: its largest buffer (bytes) and int64 support."""
        from mnnpy.backends.opencl.program import device_identity

        return f"opencl|{device_identity(self.device)}|max alloc {self.max_alloc}|int64 {self.int64}"

    @classmethod
    def list_devices(cls) -> list[str]:
        """One line per OpenCL device of every platform (empty when there is none)."""
        return [describe_device(d) for d in all_devices()[0]]  # none: availability() says why

    @classmethod
    def cache_info(cls) -> str:
        """One line: the disk cache folder with its program binaries and tuning file, or "off"."""
        from mnnpy.backends.opencl.program import CACHE_ENV, SUFFIX, cache_directory
        from mnnpy.backends.opencl.tuning import FILE

        d = cache_directory()
        if d is None:
            return f"cache: off (${CACHE_ENV})"
        if d.exists() and not d.is_dir():
            return f"cache: unusable, {d} is not a folder (${CACHE_ENV}); programs are built in memory"
        binaries = sum(1 for f in d.glob("*" + SUFFIX) if f.is_file()) if d.is_dir() else 0
        f = d / FILE
        tuned = "present" if f.is_file() else ("unusable (not a file)" if f.exists() else "absent")
        return f"cache: {d} ({binaries} program binaries; {FILE} {tuned}; ${CACHE_ENV} moves it, 0 turns it off)"

    def program(self, file: str, options: Sequence[str] = (), cache=None):
        """The built program of ``shaders/opencl/<file>`` (``common.h`` and the generated
        activations prepended) with build ``options``; cached in memory and as a binary on
        disk (``ProgramCache``; in ``cache``, a session's ``CompilationCache``, when given)."""
        return self.programs.get(file, self.source(file), list(options), cache)

    def kernel(self, file: str, name: str, options: Sequence[str] = (), cache=None):
        """A new ``cl.Kernel`` (own argument slots) of ``name`` in ``file`` built with ``options``
        (``ProgramCache.kernel``: a cached binary without that kernel is replaced; ``cache``:
        a session's ``CompilationCache`` holds the binaries)."""
        return self.programs.kernel(file, self.source(file), list(options), name, cache)

    def source(self, file: str) -> str:
        """The source of ``shaders/opencl/<file>``: ``common.h`` and the generated activations first
        (read once per process: the same ``str`` object each time, its hash computed once)."""
        text = self._sources.get(file)
        if text is None:
            text = self._sources[file] = self._prelude + "\n#line 1\n" + _shader_dir().joinpath(file).read_text()
        return text

    def create_backend(self, config: BackendConfig):
        """A new ``OpenCLBackend`` for one session."""
        from mnnpy.backends.opencl.backend import OpenCLBackend

        return OpenCLBackend(self, config)

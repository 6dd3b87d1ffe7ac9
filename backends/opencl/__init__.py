"""The OpenCL backend (pyopencl): one device per process, one pooled device buffer per session.

Runtime: the chosen device (a GPU when there is one, else any device; the environment
variable ``MNNPY_OPENCL_DEVICE`` selects by type (gpu, cpu, accelerator) or by part of
the platform or device name), one
context and one in-order queue, and the programs built from ``shaders/opencl/*.cl``
(cached in memory per file and build options).

Backend: float32 tensors in NCHW, stored as fp32 (``precision`` "high"/"normal") or fp16
(``precision="low"``: ``vstore_half``/``vload_half``, arithmetic in fp32), in one
``cl.Buffer`` arena per resize laid out by the session's memory planner; a handle
(``CLTensor``) is the buffer, a byte offset, a shape and the storage dtype. Constants
get their own buffers, uploaded once at resize. Executions build their kernels and fix
arguments and work sizes in ``on_resize`` (``OpenCLBackend.launch``); ``on_execute``
only enqueues. The queue is flushed at the end of a partition and synchronised when a
tensor is downloaded (blocking read on the in-order queue).

``import mnnpy.backends.opencl`` does not import pyopencl; the Runtime does, when created.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mnnpy.backend import Backend, BackendConfig, Execution, OpInfo, Runtime, TensorInfo
from mnnpy.errors import BackendUnavailableError, ShapeError
from mnnpy.fork_guard import ForkGuard

DEVICE_ENV = "MNNPY_OPENCL_DEVICE"
MAX_ELEMENTS = 2**31 - 1  # kernels index with 32-bit ints


@dataclass(frozen=True)
class CLTensor:
    """A tensor on the device: ``buffer`` (``cl.Buffer``), byte ``offset``, ``shape``, ``dtype``."""

    buffer: Any
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def elem_offset(self) -> int:
        """The offset in elements, as kernels take it."""
        return self.offset // self.dtype.itemsize


def _find_device(wanted: str | None):
    """``(device, "")`` or ``(None, reason)``: a GPU first, else any; ``wanted`` filters by name."""
    try:
        import pyopencl as cl
    except Exception as e:  # ImportError, or a broken binary module
        return None, f"pyopencl is not importable ({e})"
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # no ICD loader / no platform: cl.LogicError PLATFORM_NOT_FOUND_KHR
        return None, f"no OpenCL platform (is an ICD installed?): {e}"
    devices = [d for p in platforms for d in _devices_of(p)]
    if wanted:
        devices = [d for d in devices if _matches(d, wanted)]
        if not devices:
            what = "a type gpu/cpu/accelerator, or part of a platform or device name"
            return None, f"no OpenCL device matches {DEVICE_ENV}={wanted!r} ({what})"
    if not devices:
        return None, "no OpenCL device"
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0], ""


def _matches(device, wanted: str) -> bool:
    """``wanted``: a device type ("gpu", "cpu", "accelerator") or part of "platform name device name"."""
    import pyopencl as cl

    w = wanted.strip().lower()
    types = {"gpu": cl.device_type.GPU, "cpu": cl.device_type.CPU, "accelerator": cl.device_type.ACCELERATOR}
    if w in types:
        return bool(device.type & types[w])
    return w in f"{device.platform.name} {device.name}".lower()


def _devices_of(platform) -> list:
    try:
        return platform.get_devices()
    except Exception:  # a platform without devices raises DEVICE_NOT_FOUND
        return []


def describe_device(d) -> str:
    """``name (platform; OpenCL version; compute units; memory MiB; fp16 yes/no)``."""
    return (
        f"{d.name} ({d.platform.name}; {d.version}; {d.max_compute_units} compute units; "
        f"{d.global_mem_size // 2**20} MiB; fp16 {'yes' if 'cl_khr_fp16' in d.extensions else 'no'})"
    )


FORK = ForkGuard("OpenCL")


def _forked() -> bool:
    """Whether this process is a fork of one that already used OpenCL (see ``mnnpy.fork_guard``)."""
    return FORK.forked()


FORK_REASON = FORK.reason


@functools.cache
def _device_for(wanted: str | None):
    FORK.mark()
    return _find_device(wanted)


def _shader_dir():
    """The folder of the ``.cl`` sources: package data ``mnnpy.shaders.opencl``, else the repo's ``shaders/opencl``."""
    try:
        from importlib.resources import files

        d = files("mnnpy.shaders.opencl")
        if d.joinpath("elementwise.cl").is_file():
            return d
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "shaders" / "opencl"


class OpenCLRuntime(Runtime):
    """Process-wide: device, context, in-order queue, program cache."""

    name = "opencl"

    @classmethod
    def in_auto(cls) -> bool:
        """``backend="auto"`` takes OpenCL only on a GPU or accelerator: on a CPU device (PoCL)
        the NumPy backend is faster (PP-OCR demo here: 76-100 ms on the CPU backend, about
        400 ms on PoCL). Asked for by name, a CPU device is used."""
        try:
            import pyopencl as cl

            device, _ = _device_for(os.environ.get(DEVICE_ENV) or None)
            return device is not None and not device.type & cl.device_type.CPU
        except Exception:  # availability() gives the reason
            return False

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        if _forked():
            return False, FORK_REASON
        try:
            device, reason = _device_for(os.environ.get(DEVICE_ENV) or None)
        except Exception as e:  # never raise from here
            return False, f"OpenCL probe failed: {e}"
        return device is not None, reason

    def __init__(self):
        import pyopencl as cl

        self.cl = cl
        self.device, reason = _device_for(os.environ.get(DEVICE_ENV) or None)
        if self.device is None:
            raise RuntimeError(reason)
        self.max_alloc = int(self.device.max_mem_alloc_size)  # bytes in one buffer (CL_DEVICE_MAX_MEM_ALLOC_SIZE)
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context, self.device)
        from mnnpy.backends.opencl.program_cache import ProgramCache
        from mnnpy.backends.opencl.tuning import Tuner

        self.programs = ProgramCache(self)
        self.tuner = Tuner(self)
        from mnnpy.backends.opencl.activation import source as activation_source

        self._prelude = _shader_dir().joinpath("common.h").read_text() + activation_source()

    def describe(self) -> str:
        """One line: device name, platform, OpenCL version, compute units, memory."""
        return describe_device(self.device)

    @classmethod
    def list_devices(cls) -> list[str]:
        """One line per OpenCL device of every platform (empty when there is none)."""
        try:
            import pyopencl as cl

            return [describe_device(d) for p in cl.get_platforms() for d in _devices_of(p)]
        except Exception:  # no pyopencl, ICD or platform: availability() says why
            return []

    @classmethod
    def cache_info(cls) -> str:
        """One line: the disk cache folder with its program binaries and tuning file, or "off"."""
        from mnnpy.backends.opencl.program_cache import CACHE_ENV, cache_directory
        from mnnpy.backends.opencl.tuning import FILE

        d = cache_directory()
        if d is None:
            return f"cache: off (${CACHE_ENV})"
        if d.exists() and not d.is_dir():
            return f"cache: unusable, {d} is not a folder (${CACHE_ENV}); programs are built in memory"
        binaries = sum(1 for f in d.glob("*.clbin") if f.is_file()) if d.is_dir() else 0
        f = d / FILE
        tuned = "present" if f.is_file() else ("unusable (not a file)" if f.exists() else "absent")
        return f"cache: {d} ({binaries} program binaries; {FILE} {tuned}; ${CACHE_ENV} moves it, 0 turns it off)"

    def program(self, file: str, options: Sequence[str] = ()):
        """The built program of ``shaders/opencl/<file>`` (``common.h`` and the generated
        activations prepended) with build ``options``; cached in memory and as a binary on
        disk (``ProgramCache``)."""
        source = self._prelude + "\n#line 1\n" + _shader_dir().joinpath(file).read_text()
        return self.programs.get(file, source, list(options))

    def kernel(self, file: str, name: str, options: Sequence[str] = ()):
        """A new ``cl.Kernel`` (own argument slots) of ``name`` in ``file`` built with ``options``."""
        return self.cl.Kernel(self.program(file, options), name)

    def create_backend(self, config: BackendConfig) -> OpenCLBackend:
        return OpenCLBackend(self, config)


class OpenCLBackend(Backend):
    """Per-session OpenCL backend; handles are ``CLTensor``."""

    name = "opencl"

    def __init__(self, runtime: OpenCLRuntime, config: BackendConfig):
        super().__init__(runtime, config)
        self.cl = runtime.cl
        self.queue = runtime.queue
        self.arena = None
        self._new_launches: list = []
        # fp16 handle -> {upload?: (float32 buffer, cast Launch)} (on_resize_partition); weak:
        # a plan the session drops takes its border buffers with it
        self._borders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.half = config.precision == "low"
        self.storage = np.dtype(np.float16 if self.half else np.float32)
        self.options = ["-D STORAGE_HALF"] if self.half else []

    def kernel(self, file: str, name: str, options: Sequence[str] = ()):
        """A new ``cl.Kernel`` (its own argument slots) of ``name`` in ``shaders/opencl/<file>``,
        built with ``options`` plus this backend's storage option."""
        return self.runtime.kernel(file, name, [*self.options, *options])

    def launch(self, file: str, name: str, options: Sequence[str], args: Sequence, work: Sequence[int], local=None):
        """A ``Launch`` of kernel ``name`` with ``args`` over the logical global size ``work``
        (dim 0 fastest). ``local``: the kernel's preferred work-group size, else a default;
        with ``tuning`` set in the session config the Runtime's ``Tuner`` picks it (timed once
        per device, kernel and size, then cached on disk)."""
        from mnnpy.backends.opencl.launch import Launch, default_local

        opts = [*self.options, *options]
        kernel = self.runtime.kernel(file, name, opts)
        kernel.set_args(*args)
        limit = kernel.get_work_group_info(self.cl.kernel_work_group_info.WORK_GROUP_SIZE, self.runtime.device)
        if local is None or int(np.prod(local)) > limit:
            local = default_local(work, limit)
        key = f"{file}:{name}:{' '.join(opts)}"
        la = Launch(self.cl, self.queue, kernel, work, local, key)
        self.runtime.tuner.tune(la, self.config.tuning, limit)
        self._new_launches.append(la)
        return la

    def on_resize_begin(self) -> None:
        self._new_launches = []

    def on_resize_end(self) -> None:
        """Enqueue every launch of this resize once and wait: drivers finish loading a kernel
        (NVIDIA: module load, code upload) at its first enqueue, which would otherwise land
        in the first run (3x the steady-state latency on the H200). The kernels read the
        planned buffers' current contents and write only planned outputs, which every run
        recomputes."""
        for la in self._new_launches:
            la()
        self._new_launches = []
        self.queue.finish()

    def weights(self, value: np.ndarray) -> CLTensor:
        """A read-only float32 device copy of ``value`` in every precision: weights and biases
        stay fp32 when activations are stored as fp16 (half the rounding error of fp16
        weights on PP-OCR; kernels read them as ``float *``)."""
        return self._read_only(np.ascontiguousarray(value, dtype=np.float32))

    def _read_only(self, value: np.ndarray) -> CLTensor:
        """A READ_ONLY buffer holding ``value`` (4 bytes when empty: OpenCL has no empty buffers)."""
        mf = self.cl.mem_flags
        if value.nbytes:
            self._check_size(value.nbytes, "a constant")
            buf = self.cl.Buffer(self.runtime.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=value)
        else:
            buf = self.cl.Buffer(self.runtime.context, mf.READ_ONLY, 4)
        return CLTensor(buf, 0, tuple(value.shape), value.dtype)

    def _check_size(self, nbytes: int, what: str) -> None:
        """``ShapeError`` when one buffer of ``nbytes`` exceeds the device's allocation limit."""
        limit = self.runtime.max_alloc
        if nbytes > limit:
            raise ShapeError(
                f"OpenCL: {what} needs one buffer of {nbytes} bytes ({nbytes / 2**30:.2f} GiB), more than the "
                f"{limit} bytes ({limit / 2**30:.2f} GiB) this device allows in one allocation ({self.runtime.device.name})"
            )

    def fp32_operand(self, handle: CLTensor, info: TensorInfo | None) -> CLTensor:
        """``handle``, or for a constant in fp16 storage an fp32 copy (``weights``) of its value."""
        if self.half and info is not None and info.value is not None and info.dtype == np.float32:
            return self.weights(info.value)
        return handle

    def constant(self, value: np.ndarray) -> CLTensor:
        """A read-only device copy of ``value`` (float arrays in this backend's storage dtype)."""
        value = np.ascontiguousarray(value)
        if value.dtype == np.float32:
            value = value.astype(self.storage, copy=False)
        return self._read_only(value)

    def supports(self, info: OpInfo) -> tuple[bool, str]:
        from mnnpy.backends.opencl.registry import executions

        cls = executions().get(info.type)
        if cls is None:
            return False, f"no OpenCL execution for {info.type}"
        inputs = info.present()
        bad = [str(t.dtype) for t in inputs if t.dtype != np.float32 and t.value is None]
        if bad:
            return False, f"dtype {', '.join(bad)} (OpenCL runs float32 only)"
        if any(int(np.prod(t.shape, dtype=np.int64)) > MAX_ELEMENTS for t in inputs):
            return False, f"size limit: an input has more than {MAX_ELEMENTS} elements"
        check = getattr(cls, "check", None)
        return check(info) if check else (True, "")

    def supports_outputs(self, info: OpInfo) -> tuple[bool, str]:
        """Outputs within 32-bit element indices, as inputs."""
        if any(int(np.prod(t.shape, dtype=np.int64)) > MAX_ELEMENTS for t in info.outputs if t is not None):
            return False, f"size limit: an output has more than {MAX_ELEMENTS} elements"
        return True, ""

    def create_execution(self, info: OpInfo) -> Execution | None:
        from mnnpy.backends.opencl.registry import executions

        cls = executions().get(info.type)
        return None if cls is None else cls(self, info)

    def allocate_arena(self, nbytes: int) -> None:
        # a zero-sized cl.Buffer is an error; earlier plans keep their arena through their handles
        self._check_size(int(nbytes), "the memory plan of this resize")
        self.arena = self.cl.Buffer(self.runtime.context, self.cl.mem_flags.READ_WRITE, max(int(nbytes), 4))

    def acquire(self, tensor: TensorInfo, offset: int) -> CLTensor:
        dtype = self.storage if tensor.dtype == np.float32 else np.dtype(tensor.dtype)
        return CLTensor(self.arena, int(offset), tuple(tensor.shape), dtype)

    def acquire_constant(self, tensor: TensorInfo) -> CLTensor:
        return self.constant(np.asarray(tensor.value, dtype=tensor.dtype))

    def on_resize_partition(self, partition) -> None:
        """With fp16 storage, each float tensor crossing a partition border gets a float32
        device buffer and a cast launch (``to_storage`` after its upload, ``from_storage``
        before its download): the host never converts (NumPy's fp16 conversion cost more
        than the kernels, as measured on Vulkan), and inputs and outputs cross as float32."""
        if not self.half:
            return
        i32 = np.int32
        for t, up in [(t, True) for t in partition.uploads] + [(t, False) for t in partition.downloads]:
            if t.dtype != np.float16 or not t.size or up in self._borders.get(t, {}):
                continue
            buf = self.cl.Buffer(self.runtime.context, self.cl.mem_flags.READ_WRITE, t.size * 4)
            tensor = (t.buffer, i32(t.elem_offset))
            args = (buf, *tensor, i32(t.size)) if up else (*tensor, buf, i32(t.size))
            la = self.launch("elementwise.cl", "to_storage" if up else "from_storage", [], args, (t.size,))
            self._borders.setdefault(t, {})[up] = (buf, la)

    def upload(self, src: np.ndarray, dst: CLTensor) -> None:
        if FORK.forked():  # a session inherited through fork(): the driver would hang
            raise BackendUnavailableError(FORK.reason)
        border = self._borders.get(dst, {}).get(True)
        if border is not None:  # fp16 storage: float32 to the device, converted there
            buf, cast = border
            host = np.ascontiguousarray(src, dtype=np.float32)
            self.cl.enqueue_copy(self.queue, buf, host, is_blocking=True)
            cast()
            return
        with np.errstate(over="ignore"):  # beyond fp16's range: inf, as a device conversion gives
            host = np.ascontiguousarray(src, dtype=dst.dtype)
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, dst.buffer, host, dst_offset=dst.offset, is_blocking=True)

    def download(self, src: CLTensor) -> np.ndarray:
        border = self._borders.get(src, {}).get(False)
        if border is not None:  # fp16 storage: converted on the device, float32 to the host
            buf, cast = border
            cast()
            out = np.empty(src.shape, np.float32)
            self.cl.enqueue_copy(self.queue, out, buf, is_blocking=True)
            return out
        out = np.empty(src.shape, src.dtype)
        if out.nbytes:
            # blocking read on the in-order queue: every kernel enqueued before has finished
            self.cl.enqueue_copy(self.queue, out, src.buffer, src_offset=src.offset, is_blocking=True)
        else:
            self.queue.finish()
        return out.astype(np.float32) if out.dtype == np.float16 else out

    def execute_partition(self, partition) -> None:
        """Enqueue each Execution's kernels, then flush (submit); the sync is the blocking
        download of what is read next."""
        if FORK.forked():  # a session inherited through fork(): the driver would hang
            raise BackendUnavailableError(FORK.reason)
        super().execute_partition(partition)
        self.queue.flush()

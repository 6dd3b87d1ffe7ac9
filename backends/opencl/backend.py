"""``OpenCLBackend``: one per session; buffers, launches and border copies of its resizes.

Storage (``GPUBackend``): float32 tensors in NCHW, stored as fp32 (``precision`` "high"/"normal")
or fp16 (``precision="low"``: ``vstore_half``/``vload_half``, arithmetic in fp32); int32,
int64 (``long``) and bool (``uchar``, one byte per element) tensors as themselves; in one
``cl.Buffer`` arena per resize laid out by the planner (``memory.py``); a handle (``CLTensor``)
is the buffer, a byte offset, a shape and the storage dtype. Constants get their own buffers,
uploaded once at resize; weights and biases stay fp32 in every precision (``weights``).

Executions build their kernels and fix arguments and work sizes at resize (``launch``); a run
only enqueues, on the runtime's plain queue; a run with ``timing`` (``measure_timing``) enqueues
on its profiling queue instead and ``execute_partition`` waits for its kernels (``clFinish``),
which gives its device time from their profiling events (``device_time_us``,
``device_time.py``); otherwise it flushes; a tensor is read with a blocking
read on the in-order queue. fp16 border tensors cross as float32 through their twin buffer
and a cast kernel (``to_storage`` / ``from_storage`` of ``elementwise.cl``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from time import perf_counter_ns

import numpy as np

from mnnpy import limits
from mnnpy.backend import BackendConfig, TensorInfo
from mnnpy.backends.gpu.backend import GPUBackend
from mnnpy.backends.opencl import profile
from mnnpy.backends.opencl.device import FORK
from mnnpy.backends.opencl.device_time import KernelSpan
from mnnpy.backends.opencl.memory import CLTensor, buffer, read_only


class OpenCLBackend(GPUBackend):
    """Per-session OpenCL backend; handles are ``CLTensor``. Kernels are built and their
    launches fixed at resize (``launch``), then enqueued by the Executions at each run;
    ``options``: the build options every kernel gets (``-D STORAGE_HALF`` for fp16 storage)."""

    name = "opencl"
    display = "OpenCL"
    fork = FORK

    def __init__(self, runtime, config: BackendConfig):
        super().__init__(runtime, config)
        self.cl = runtime.cl
        self.profiling = profile.requested() and runtime.timed_queue is not None  # kernel ms per op (profile.py)
        self.profile: dict[str, float] = {}  # op type -> kernel ms summed over runs
        self.profile_ops: dict[tuple[str, str], float] = {}  # (op name, op type) -> the same, per op
        self.queue = runtime.timed_queue if self.profiling else runtime.queue
        self._timing = False
        self.arena = None
        self._new_launches: list = []
        # fp16 border handle -> {upload?: cast Launch} (prepare_partition); weak, as the twins
        self._borders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.options = ["-D STORAGE_HALF"] if self.half else []

    def dtype_limit(self, dtype) -> str | None:
        """int64 tensors need 64-bit integers (an embedded-profile device without
        ``cles_khr_int64`` has none); int32 and bool (``uchar``) run everywhere."""
        if dtype == np.int64 and not self.runtime.int64:
            return f"{self.runtime.device.name} has no 64-bit integers (embedded profile without cles_khr_int64)"
        return None

    def executions(self) -> dict:
        """The OpenCL Executions by op type (``registry.py``)."""
        from mnnpy.backends.opencl.registry import executions

        return executions()

    # -- kernels ------------------------------------------------------------------------
    def kernel(self, file: str, name: str, options: Sequence[str] = ()):
        """A new ``cl.Kernel`` (its own argument slots) of ``name`` in ``shaders/opencl/<file>``,
        built with ``options`` plus this backend's storage option."""
        return self.runtime.kernel(file, name, [*self.options, *options], self.config.cache)

    def launch(self, file: str, name: str, options: Sequence[str], args: Sequence, work: Sequence[int], local=None):
        """A ``Launch`` of kernel ``name`` with ``args`` over the logical global size ``work``
        (dim 0 fastest). ``local``: the kernel's preferred work-group size, else a default;
        with ``tuning`` set in the session config the Runtime's ``Tuner`` picks it (timed once
        per device, kernel and size, then cached on disk)."""
        from mnnpy.backends.opencl.launch import Launch, default_local

        opts = [*self.options, *options]
        kernel = self.runtime.kernel(file, name, opts, self.config.cache)
        kernel.set_args(*args)
        limit = kernel.get_work_group_info(self.cl.kernel_work_group_info.WORK_GROUP_SIZE, self.runtime.device)
        if local is None or int(np.prod(local)) > limit:
            local = default_local(work, limit)
        key = f"{file}:{name}:{' '.join(opts)}"
        la = Launch(self.cl, self, kernel, work, local, key)
        self.runtime.tuner.tune(la, self.config.tuning, limit)
        self._new_launches.append(la)
        return la

    # -- resize -------------------------------------------------------------------------
    def on_resize_begin(self) -> None:
        """Forget the launches of the previous resize (their warm-up is done)."""
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

    def allocate_arena(self, nbytes: int) -> None:
        """A new READ_WRITE arena buffer of ``nbytes`` (``ShapeError`` beyond the device's allocation
        limit); earlier plans keep their arena through their handles."""
        self.arena = buffer(self.runtime, nbytes, "the memory plan of this resize")

    def handle(self, offset: int, shape, dtype) -> CLTensor:
        """A ``CLTensor`` at byte ``offset`` of this resize's arena."""
        return CLTensor(self.arena, offset, shape, dtype)

    def acquire_constant(self, tensor: TensorInfo) -> CLTensor:
        """A read-only buffer with the constant's value (float32 in the storage dtype, ``constant``)."""
        return self.constant(np.asarray(tensor.value, dtype=tensor.dtype))

    def constant(self, value: np.ndarray) -> CLTensor:
        """A read-only device copy of ``value`` (float arrays in this backend's storage dtype)."""
        value = np.ascontiguousarray(value)
        if value.dtype == np.float32:
            value = value.astype(self.storage, copy=False)
        return read_only(self.runtime, value)

    def weights(self, value: np.ndarray) -> CLTensor:
        """A read-only float32 device copy of ``value`` in every precision: weights and biases
        stay fp32 when activations are stored as fp16 (half the rounding error of fp16
        weights on PP-OCR; kernels read them as ``float *``)."""
        return read_only(self.runtime, np.ascontiguousarray(value, dtype=np.float32))

    def fp32_operand(self, handle: CLTensor, info: TensorInfo | None) -> CLTensor:
        """``handle``, or for a constant in fp16 storage an fp32 copy (``weights``) of its value."""
        if self.half and info is not None and info.value is not None and info.dtype == np.float32:
            return self.weights(info.value)
        return handle

    def scratch(self, shape) -> CLTensor:
        """Float32 device memory of its own for one op's intermediate results (two-pass
        reductions) or a border twin; nothing uploaded."""
        shape = tuple(int(d) for d in shape)
        nbytes = 4 * math.prod(shape)
        limits.charge(nbytes, f"OpenCL scratch {shape} float32", self.name)
        return CLTensor(buffer(self.runtime, nbytes, "scratch"), 0, shape, np.float32)

    def new_twin(self, t: CLTensor) -> CLTensor:
        """A float32 buffer of its own with ``t``'s shape (``scratch``)."""
        return self.scratch(t.shape)

    def prepare_partition(self, partition, uploads: list, downloads: list) -> None:
        """The partition's ``KernelSpan`` (its first and last kernel launch, kept in
        ``partition.recording``: ``device_time_us``); with fp16 storage, each border handle
        with a twin gets a cast launch (once per handle and direction): ``to_storage`` twin ->
        handle after its upload, ``from_storage`` handle -> twin before its download."""
        launches = [la for exe in partition.executions for la in getattr(exe, "launches", ()) if all(la.work)]
        partition.recording = KernelSpan(launches)
        i32 = np.int32
        for (t, tw), up in [(p, True) for p in uploads] + [(p, False) for p in downloads]:
            if tw is None or up in self._borders.get(t, {}):
                continue
            tensor = (t.buffer, i32(t.elem_offset))
            args = (tw.buffer, *tensor, i32(t.size)) if up else (*tensor, tw.buffer, i32(t.size))
            la = self.launch("elementwise.cl", "to_storage" if up else "from_storage", [], args, (t.size,))
            self._borders.setdefault(t, {})[up] = la

    # -- run ----------------------------------------------------------------------------
    def upload(self, src: np.ndarray, dst: CLTensor) -> None:
        """Copy host array ``src`` into ``dst`` (blocking write); with fp16 storage as float32
        into its twin, cast on the device."""
        self.check_fork()  # a session inherited through fork(): the driver would hang
        cast = self._borders.get(dst, {}).get(True)
        if cast is not None:  # fp16 storage: float32 to the device, converted there
            host = np.ascontiguousarray(src, dtype=np.float32)
            self.cl.enqueue_copy(self.queue, self._twins[dst].buffer, host, is_blocking=True)
            cast()
            return
        with np.errstate(over="ignore"):  # beyond fp16's range: inf, as a device conversion gives
            host = np.ascontiguousarray(src, dtype=dst.dtype)
        if host.nbytes:
            self.cl.enqueue_copy(self.queue, dst.buffer, host, dst_offset=dst.offset, is_blocking=True)

    def download_into(self, src: CLTensor, out: np.ndarray) -> None:
        """Blocking read of ``src`` into ``out`` (in-order queue: every kernel enqueued before
        has finished); fp16 storage through the float32 twin, cast on the device."""
        cast = self._borders.get(src, {}).get(False)
        if cast is not None:  # fp16 storage: converted on the device, float32 to the host
            cast()
            src = self._twins[src]
        if out.dtype == src.dtype and out.flags.c_contiguous:
            self._read(src, out)
        else:  # another dtype (fp16 never announced as a download) or layout: through a host copy
            tmp = np.empty(src.shape, src.dtype)
            self._read(src, tmp)
            np.copyto(out, tmp)

    def border(self, t: CLTensor) -> CLTensor:
        """The device tensor holding ``t``'s contents as they cross a border (float32 for a
        float tensor): its float32 twin, cast from fp16 storage now (``from_storage``), or ``t``."""
        cast = self._borders.get(t, {}).get(False)
        if cast is None:
            return t
        cast()
        return self._twins[t]

    def copy_device(self, src_backend, src, dst: CLTensor) -> bool:
        """Another OpenCL session's tensor ``src`` (same Runtime: same context; the same in-order
        queue unless one of the two runs was timed, then the source's queue is finished first)
        into ``dst``: ``clEnqueueCopyBuffer`` between their border forms (float32 twins
        of fp16 storage, cast on the device on either side), queued before this run's kernels;
        ``False`` (through the host) for another backend or sizes that differ."""
        if not isinstance(src_backend, OpenCLBackend) or src_backend.runtime is not self.runtime:
            return False
        self.check_fork()
        cast = self._borders.get(dst, {}).get(True)
        target = self._twins[dst] if cast is not None else dst
        if src.dtype == np.float16 and src_backend._borders.get(src, {}).get(False) is None:
            return False  # fp16 storage with no float32 twin: not announced as a download
        crossing = np.float32 if src.dtype == np.float16 else src.dtype
        if crossing != target.dtype or src.size != target.size:
            return False
        source = src_backend.border(src)
        if src_backend.queue is not self.queue:
            src_backend.queue.finish()  # its run was timed and this one not, or the reverse: two queues
        if target.nbytes:
            self.cl.enqueue_copy(
                self.queue,
                target.buffer,
                source.buffer,
                byte_count=target.nbytes,
                src_offset=source.offset,
                dst_offset=target.offset,
            )
        if cast is not None:
            cast()
        return True

    def _read(self, src: CLTensor, out: np.ndarray) -> None:
        if out.nbytes:
            self.cl.enqueue_copy(self.queue, out, src.buffer, src_offset=src.offset, is_blocking=True)
        else:
            self.queue.finish()

    @property
    def timing(self) -> bool:
        """Whether this run is timed (set by the Session per run, ``Backend.timing``)."""
        return self._timing

    @timing.setter
    def timing(self, on: bool) -> None:
        # a timed (or profiled) run enqueues on the profiling queue, the others on the plain
        # one; the queue left is finished first (between runs it has nothing in flight anyway)
        timed = (on or self.profiling) and self.runtime.timed_queue is not None
        queue = self.runtime.timed_queue if timed else self.runtime.queue
        if queue is not self.queue:
            self.queue.finish()
            self.queue = queue
        self._timing = bool(on)

    def execute_partition(self, partition) -> None:
        """Enqueue each Execution's kernels; with ``timing`` wait for them (``clFinish``: the
        partition's device time lies inside this call) and keep the call's host wall time
        (ns) for ``device_time_us``, else flush (submit), the sync being the blocking read of
        what is read next. ``profiling``: then waits, adds each op's kernel ms (``profile.py``)."""
        self.check_fork()
        span = partition.recording
        if span is not None:
            span.wall_ns = 0  # until a timed run's kernels have finished: no stale events
        if not self.timing or span is None:
            super().execute_partition(partition)
            if self.profiling:
                profile.add_partition(self, partition)
            else:
                self.queue.flush()
            return
        t0 = perf_counter_ns()
        super().execute_partition(partition)
        self.queue.finish()
        span.wall_ns = perf_counter_ns() - t0 or 1
        if self.profiling:
            profile.add_partition(self, partition)

    def device_time_us(self, partition) -> float | None:
        """Device time, µs, of ``partition``'s last ``execute_partition``: end of its last
        kernel minus start of its first, from their profiling events
        (``clGetEventProfilingInfo``, ns; ``device_time.py``), clamped to that call's host
        wall time. ``None`` before a timed run of it finished, after a failed or untimed one
        (``timing`` off), for a partition without kernels or of another backend, and where the
        queue has no profiling."""
        span = partition.recording if partition.backend is self else None
        return span.device_time_us(self.cl) if isinstance(span, KernelSpan) else None

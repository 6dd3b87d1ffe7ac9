"""Runtime / Backend / Execution base classes and the lazy backend registry (MNN's interface).

A **Runtime** is one per device per process (context, queues, program caches,
capabilities), shared by sessions. A **Backend** is one per session and device: it
owns that session's memory (one pooled arena laid out by the memory planner) and
creates **Executions**, one per op. ``Execution.on_resize`` does all costly
preparation; ``Execution.on_execute`` only computes.

Backends register by name with a lazy import: built-ins below, third parties through
the entry-point group ``mnnpy.backends`` (value: ``module:RuntimeClass``).
``import mnnpy`` imports no GPU package.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnnpy.deadline import check
from mnnpy.device_queue import DeviceQueue
from mnnpy.errors import BackendUnavailableError, InputError
from mnnpy.ir import Op

# In this order "auto" lists its candidates (ties go to the first; the CPU last): Vulkan first, one queue
# submission per partition (faster than OpenCL on 4 of the 5 reference models on the H200,
# bench/RESULTS.md), then OpenCL for what Vulkan cannot run.
BUILTIN_BACKENDS = {
    "cpu": "mnnpy.backends.cpu:CPURuntime",
    "vulkan": "mnnpy.backends.vulkan:VulkanRuntime",
    "opencl": "mnnpy.backends.opencl:OpenCLRuntime",
}


@dataclass(frozen=True)
class TensorInfo:
    """What a backend is told about a tensor at resize: index, name, shape (fixed ints), dtype.

    ``value`` holds the contents of constants and of tensors computed at resize.
    """

    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    value: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor (exact: Python integers)."""
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass
class BackendConfig:
    """Session options a backend reads: ``precision`` ("high", "normal", "low"), ``num_threads``,
    ``tuning`` (GPU work-group auto-tuning: "none", "fast", "wide"; MNN's tuning levels),
    ``lane``: which of its Runtime's ``lanes`` (device queues) the backend submits to
    (``Runtime.lanes``; a session's asynchronous runs use one context per lane); ``cache``:
    the session's ``mnnpy.compilation_cache.CompilationCache`` or None (no disk cache)."""

    precision: str = "normal"
    num_threads: int | None = None
    tuning: str = "none"
    lane: int = 0
    cache: object = None


@dataclass(frozen=True)
class OpInfo:
    """Everything a backend is told about one op at resize, built once per op by the planner.

    ``index``: the op's position in its graph; ``attrs``: resolved attributes (defaults
    filled, at load); ``inputs``/``outputs``: one ``TensorInfo`` per slot, ``None`` for an
    absent optional input or unused output (so positions match the ONNX signature);
    ``geometry``: what the op's shape function derived (pads after ``auto_pad``, strides,
    Resize scales and coordinate tables, reduce axes...; see ``ShapeContext.derive``), so no
    backend computes it again.
    """

    index: int
    op: Op
    attrs: dict[str, Any]
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]
    geometry: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:
        """The op type (ONNX name, canonical form)."""
        return self.op.type

    def present(self) -> list[TensorInfo]:
        """The inputs that are there (absent optional inputs left out), in order."""
        return [t for t in self.inputs if t is not None]


class Execution:
    """One op on one backend for one session (MNN's Execution; not an NNAPI execution, which
    is one run call). Subclasses override both hooks.

    ``info`` is the op's ``OpInfo``; ``op``, ``attrs``, ``input_infos``, ``output_infos``
    (absent slots ``None``) and ``geometry`` are its fields. ``inputs``/``outputs`` of the
    hooks are the backend's tensor handles (for the CPU backend, ndarray views into the arena
    or constant arrays; ``None`` for absent slots); they stay the same between ``on_resize``
    and every ``on_execute`` until the next resize.
    """

    def __init__(self, backend: Backend, info: OpInfo):
        self.backend = backend
        self.info = info
        self.op = info.op
        self.attrs = info.attrs
        self.input_infos = list(info.inputs)
        self.output_infos = list(info.outputs)
        self.geometry = info.geometry

    def on_resize(self, inputs: list, outputs: list) -> None:
        """Prepare everything for these shapes and buffers (weights, scratch, kernels)."""

    def on_execute(self, inputs: list, outputs: list) -> None:
        """Compute ``outputs`` from ``inputs``; no allocation, no shape math."""
        raise NotImplementedError


class Backend:
    """Per-session device backend (MNN's Backend). See the module docstring for the life cycle.

    Storage kinds: **dynamic** tensors live in one arena per resize (``allocate_arena``,
    then ``acquire`` at the memory planner's offsets); **constants** (weights, values known
    at resize) get their own read-only storage once (``acquire_constant``); **scratch** is
    per-Execution memory a backend hands out at resize (CPU workspaces, GPU split-K
    partials). A backend picks its own layout and storage dtype; ``upload``, ``download``
    and ``copy`` are the only places that convert.

    Subclasses implement: ``supports``, ``create_execution``, ``allocate_arena``,
    ``acquire``, ``acquire_constant``, ``upload``, ``download``.

    ``timing``: whether ``execute_partition`` measures what ``device_time_us`` reports; the
    Session sets it for each run from ``measure_timing`` (never during a run: on a GPU it
    costs a little per partition, see ``device_time_us``).
    """

    name = "base"
    run_deadline: float | None = None  # the running run's deadline (time.monotonic() s), set by the Session
    timing = False  # whether the running run measures device time (``device_time_us``), set by the Session
    exit_gated = True  # whether its runs must finish before the interpreter exits (``mnnpy.exit_gate``)
    defer_wait = False  # whether the running run may return before the device finished (``finish``), set by the Session
    defers = False  # whether it honours ``defer_wait`` (Vulkan): fenced runs on it alone may be submitted from the caller

    def __init__(self, runtime: Runtime, config: BackendConfig):
        self.runtime = runtime
        self.config = config

    def supports(self, info: OpInfo) -> tuple[bool, str]:
        """Whether this backend runs the op of ``info`` (dtypes, attributes, input shapes and
        values known at resize); else ``(False, why)``. onnxruntime's GetCapability, per op."""
        raise NotImplementedError

    def supports_outputs(self, info: OpInfo) -> tuple[bool, str]:
        """Asked by the Schedule after ``supports`` said yes: whether this backend can hold the
        op's outputs (their inferred shapes: a device's buffer-size limit); else why not.
        Default: yes."""
        return True, ""

    def can_alias(self, op: Op) -> bool:
        """Whether output 0 of ``op`` may share its input's buffer on this backend. Default:
        where the op's schema declares it (``OpSchema.alias``: reshape-like ops, metadata
        only on contiguous storage)."""
        from mnnpy.ops import get_schema

        return get_schema(op.type).alias is not None

    def create_execution(self, info: OpInfo) -> Execution | None:
        """A new Execution for the op of ``info``, or ``None`` when unsupported."""
        raise NotImplementedError

    def on_resize_begin(self) -> None:
        """Called before a resize: drop the previous resize's memory and executions."""

    def on_resize_partition(self, partition: Any) -> None:
        """Called during a resize once per partition on this backend, after its Executions'
        ``on_resize``. ``partition`` (a ``mnnpy.planner.PartitionStep``) gives
        ``executions`` (in order), ``uploads`` (the handles ``upload``/``copy`` write before
        it runs: the plan's inputs held by this backend, announced with its first
        partition, and the tensors copied in at its border) and ``downloads`` (the handles
        read after it: tensors it produces that another backend or the caller reads). A
        backend that records its work ahead (Vulkan: staging slots, one command buffer) may
        keep what it built in ``partition.recording``. Default: nothing."""

    def on_resize_end(self) -> None:
        """Called after every Execution's ``on_resize``."""

    def allocate_arena(self, nbytes: int) -> None:
        """Allocate the pooled memory (bytes) that dynamic tensors live in."""
        raise NotImplementedError

    def on_close(self) -> None:
        """Called when the session closes, before it drops its plans: memory that only they
        used may be kept for the next session (the CPU backend's ``page_pool``). Default: nothing."""

    def on_plans_evicted(self) -> None:
        """Called after a session dropped cached plans (their arenas and Executions are
        unreferenced and collected by then): give back memory that only they used."""

    def acquire(self, tensor: TensorInfo, offset: int) -> Any:
        """The handle of dynamic ``tensor`` at byte ``offset`` of the arena."""
        raise NotImplementedError

    def acquire_constant(self, tensor: TensorInfo) -> Any:
        """The handle of a constant (``tensor.value``): uploaded once, at resize."""
        raise NotImplementedError

    def upload(self, src: np.ndarray, dst: Any) -> None:
        """Copy a host array into a tensor handle (layout conversion happens here)."""
        raise NotImplementedError

    def download(self, src: Any) -> np.ndarray:
        """A new host array with the contents of a tensor handle."""
        raise NotImplementedError

    def copy(self, src_backend: Backend, src: Any, dst: Any) -> None:
        """A partition-border copy: tensor ``src`` held by ``src_backend`` into this backend's
        ``dst``. Default: through the host (``download`` then ``upload``); a backend that can
        read the source in place (the CPU into its arena) or device to device overrides it."""
        self.upload(src_backend.download(src), dst)

    def copy_device(self, src_backend: Backend, src: Any, dst: Any) -> bool:
        """Feed a device-resident output (``mnnpy.device_tensor``): copy ``src``, a tensor
        held by ``src_backend`` of this backend's Runtime (another session's), into ``dst``
        on the device, with no host round trip; ``False`` when this backend cannot (the
        caller then goes through the host). Default: ``False``."""
        return False

    def download_into(self, src: Any, out: np.ndarray) -> None:
        """Copy a tensor handle into the host array ``out`` (its shape and dtype). Default:
        through ``download``; a backend that can write ``out`` directly overrides it."""
        np.copyto(out, self.download(src))

    def execute_partition(self, partition: Any) -> None:
        """Run one partition's Executions (a ``mnnpy.planner.PartitionStep``) after its border
        copies. Default: each Execution's ``on_execute`` in order, checking the run's
        deadline (``run_deadline``, ``time.monotonic()`` s, set by the Session for the run)
        before each op; a backend that recorded the partition at resize submits the
        recording instead."""
        deadline = self.run_deadline
        if deadline is None:
            for exe, ins, outs in partition.runs:
                exe.on_execute(ins, outs)
            return
        for exe, ins, outs in partition.runs:
            if time.monotonic() > deadline:
                check(deadline, f"before op '{exe.op.name}' ({exe.op.type}) on {self.name}")
            exe.on_execute(ins, outs)

    def finish(self) -> None:
        """Wait for device work that a run with ``defer_wait`` submitted and did not wait for
        (a run whose outputs all stay on the device: ``outputs_on_device``, no timing). The
        backend calls it itself before it touches what that work uses (staging memory, the
        fence, a download); the Session before a run, a resize or closing. Default: nothing
        (a backend that always waits)."""

    def queue_key(self) -> tuple[int, int]:
        """Which device queue it submits to: ``(id(runtime), lane modulo the runtime's lanes)``;
        two backends with the same one see each other's work in submission order."""
        return id(self.runtime), self.config.lane % self.runtime.lanes

    def in_flight(self) -> bool:
        """Whether work a run with ``defer_wait`` submitted may still be running (``finish``
        not called since). Default: False."""
        return False

    def device_time_us(self, partition) -> float | None:
        """Device time, µs, of ``partition``'s last ``execute_partition`` (a ``mnnpy.planner.PartitionStep``),
        from the device's own clock; ``None`` where not measured. Default: ``None``.

        A GPU backend reads it after the run (Vulkan: two timestamp queries around the
        partition's command buffer; OpenCL: profiling events of its first and last kernel)
        and never returns more than the host wall time of that ``execute_partition`` call
        (NNAPI: on-device time is never above in-driver time); ``None`` after a run with
        ``timing`` off. What measuring costs a run (``bench/bench_device_time.py``): Vulkan,
        two timestamps per partition (lavapipe: about 50 µs, a real GPU: next to nothing);
        OpenCL, waiting for the partition's kernels in the call instead of at the next read
        (PoCL: about 10 µs per partition). The CPU backend keeps ``None``: the session layer
        uses host wall time there."""
        return None


_QUEUE_LOCK = threading.Lock()


class Runtime:
    """One per device per process; creates Backends. Subclasses set ``name``.

    ``in_auto``: whether ``backend="auto"`` picks this backend when it is available (a bool,
    or a classmethod deciding by the device: a GPU API on a CPU device, such as PoCL or
    lavapipe, is slower than the CPU backend); a backend still being built sets it False and
    is used only when asked for by name. ``auto`` orders the backends it takes as
    ``registered_backends`` lists them (the CPU last).

    A subclass is created as ``cls(device=index)``: ``index`` into its ``device_list``
    (``get_runtime`` makes one per device and process).
    """

    name = "base"
    in_auto = True
    lanes = 1  # device queues that run work side by side (Vulkan: queues of one family)
    _queue: DeviceQueue | None = None

    def queue_capacity(self) -> int:
        """Units of the device that runs share (``device_queue``): one per lane (device queue)
        by default."""
        return self.lanes

    def device_queue(self) -> DeviceQueue:
        """The device's ``DeviceQueue``: runs from all sessions on it wait here by priority."""
        with _QUEUE_LOCK:
            if self._queue is None:
                self._queue = DeviceQueue(self.queue_capacity())
            return self._queue

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """``(True, "")`` when its default device (``default_device``) is usable here, else
        ``(False, reason)``."""
        return True, ""

    @classmethod
    def device_list(cls) -> tuple[list, str]:
        """Every device of this backend here, as ``mnnpy.device.Device`` records in the
        backend's own order (``Device.index`` = the position; ``backend="<name>:<index>"``
        names one), or ``([], reason)`` when there is none. Never raises. Default: one device
        named after the backend, where ``availability`` says it is usable."""
        from mnnpy.device import Device

        ok, reason = cls.availability()
        return ([Device(cls.name, cls.name, 0, "other", "", "", cls.name)] if ok else []), reason

    @classmethod
    def default_device(cls) -> int | None:
        """The index (into ``device_list``) of the device the plain backend name means (GPU
        backends: chosen by ``$MNNPY_<API>_DEVICE``, a GPU first), or ``None`` when none is
        usable. Default: 0."""
        return 0

    @classmethod
    def device_availability(cls, index: int) -> tuple[bool, str]:
        """``(True, "")`` when device ``index`` of ``device_list`` is there, else ``(False, reason)``."""
        found, reason = cls.device_list()
        if not found:
            return False, reason
        if index >= len(found):
            listed = ", ".join(f"{d.id} {d.name}" for d in found)
            return False, f"no {cls.name} device {index}: {len(found)} device(s) here ({listed})"
        return True, ""

    def create_backend(self, config: BackendConfig) -> Backend:
        raise NotImplementedError

    def identity(self) -> str:
        """The device and driver as text: what a plan or a binary made for this device depends
        on beyond the machine (``mnnpy.plan_cache``). Default: the backend's name (the CPU:
        the machine, NumPy and mnnpy are in the compilation cache's environment already)."""
        return self.name

    @classmethod
    def warm_up(cls) -> None:
        """Start, in the background, what this backend's first session would otherwise wait
        for (the CPU backend: loading numba); called when a model is loaded. Returns at once."""


_RUNTIMES: dict[tuple[str, int], tuple[int, Runtime]] = {}  # (backend, device index) -> (process id, Runtime)
_NAMED: dict[str, tuple[int, Runtime]] = {}  # device name as asked for -> (process id, Runtime)


def split_device_name(name: str) -> tuple[str, int | None]:
    """``"vulkan:1"`` -> ``("vulkan", 1)``; ``"vulkan"`` -> ``("vulkan", None)`` (the backend's
    default device). Raises ``InputError`` for a malformed name (not a string, an empty
    backend, an index that is not a non-negative decimal integer without leading zeros)."""
    if not isinstance(name, str):
        raise InputError(f"a device name is a string such as 'vulkan' or 'vulkan:1', got {name!r}")
    backend, colon, index = name.partition(":")
    if not backend or (colon and not (index.isascii() and index.isdigit() and (index == "0" or index[0] != "0"))):
        raise InputError(f"malformed device name {name!r}: expected BACKEND or BACKEND:INDEX (e.g. 'vulkan:1')")
    return backend, int(index) if colon else None


def registered_backends() -> dict[str, str]:
    """Backend name -> ``module:Class`` for built-ins and the ``mnnpy.backends`` entry points."""
    found = dict(BUILTIN_BACKENDS)
    try:
        from importlib.metadata import entry_points

        for ep in entry_points(group="mnnpy.backends"):
            found.setdefault(ep.name, ep.value)
    except Exception:  # a broken third-party distribution must not break mnnpy
        pass
    return found


def _load_runtime_class(name: str) -> type[Runtime]:
    spec = BUILTIN_BACKENDS.get(name) or registered_backends().get(name)  # built-ins: no entry-point scan
    if spec is None:
        raise BackendUnavailableError(f"unknown backend '{name}'; known: {sorted(registered_backends())}")
    module, _, cls = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise BackendUnavailableError(f"backend '{name}' cannot be imported: {e}") from e


def warm_up(name: str) -> None:
    """``Runtime.warm_up`` of backend ``name`` (imported lazily); nothing when it cannot be imported."""
    try:
        _load_runtime_class(name).warm_up()
    except BackendUnavailableError:
        pass


def backend_availability(name: str) -> tuple[bool, str]:
    """``(usable, reason)`` for a backend name, or a device name ``backend:index`` (then: that
    device of the backend's ``device_list`` is there), importing the backend lazily. Raises
    ``InputError`` for a malformed name (``split_device_name``)."""
    backend, index = split_device_name(name)
    try:
        cls = _load_runtime_class(backend)
    except BackendUnavailableError as e:
        return False, str(e)
    return cls.availability() if index is None else cls.device_availability(index)


def backend_in_auto(name: str) -> bool:
    """Whether ``backend="auto"`` considers backend ``name`` (its Runtime's ``in_auto``)."""
    try:
        flag = getattr(_load_runtime_class(name), "in_auto", True)
        return bool(flag() if callable(flag) else flag)
    except BackendUnavailableError:
        return True  # availability() reports it


def device_key(name: str) -> tuple[str, int | None]:
    """``(backend, device index)`` of a usable device name (``"vulkan"`` -> its default device's
    index, ``Runtime.default_device``): two names of one device have one key."""
    backend, index = split_device_name(name)
    return backend, _load_runtime_class(backend).default_device() if index is None else index


def get_runtime(name: str) -> Runtime:
    """The process-wide Runtime of a device: ``name`` is a backend (``"vulkan"``: its default
    device, ``Runtime.default_device``) or ``backend:index`` (``"vulkan:1"``: device 1 of its
    ``device_list``). One Runtime per device and process, whichever name reached it. Raises
    ``BackendUnavailableError`` (unknown backend, unusable here, no such device) or
    ``InputError`` (a malformed name)."""
    pid = os.getpid()
    hit = _NAMED.get(name)
    if hit is not None and hit[0] == pid:
        return hit[1]
    ok, reason = backend_availability(name)
    if not ok:
        raise BackendUnavailableError(f"backend '{name}' is unavailable: {reason}")
    key = device_key(name)
    if key not in _RUNTIMES or _RUNTIMES[key][0] != pid:
        _RUNTIMES[key] = (pid, _load_runtime_class(key[0])(device=key[1]))
    _NAMED[name] = _RUNTIMES[key]
    return _RUNTIMES[key][1]

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
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.errors import BackendUnavailableError
from mnnpy.ir import Op

# In this order "auto" prefers the GPU backends (then the CPU): Vulkan first, one queue
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
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass
class BackendConfig:
    """Session options a backend reads: ``precision`` ("high", "normal", "low"), ``num_threads``,
    ``tuning`` (GPU work-group auto-tuning: "none", "fast", "wide"; MNN's tuning levels)."""

    precision: str = "normal"
    num_threads: int | None = None
    tuning: str = "none"


class Execution:
    """One op on one backend for one session. Subclasses override both hooks.

    ``inputs``/``outputs`` are the backend's tensor handles (for the CPU backend,
    ndarray views into the arena or constant arrays); they stay the same between
    ``on_resize`` and every ``on_execute`` until the next resize.
    """

    def __init__(
        self, backend: Backend, op: Op, attrs: dict[str, Any], inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]
    ):
        self.backend = backend
        self.op = op
        self.attrs = attrs
        self.input_infos = list(inputs)
        self.output_infos = list(outputs)

    def on_resize(self, inputs: list, outputs: list) -> None:
        """Prepare everything for these shapes and buffers (weights, scratch, kernels)."""

    def on_execute(self, inputs: list, outputs: list) -> None:
        """Compute ``outputs`` from ``inputs``; no allocation, no shape math."""
        raise NotImplementedError


class Backend:
    """Per-session device backend. See the module docstring for the life cycle.

    Subclasses implement: ``supports``, ``create_execution``, ``allocate_arena``,
    ``acquire``, ``acquire_constant``, ``upload``, ``download``.
    """

    name = "base"

    def __init__(self, runtime: Runtime, config: BackendConfig):
        self.runtime = runtime
        self.config = config

    def supports(self, op: Op, inputs: Sequence[TensorInfo], attrs: dict) -> tuple[bool, str]:
        """Whether this backend runs ``op`` with these inputs and resolved attributes; else why not."""
        raise NotImplementedError

    def supports_outputs(self, op: Op, outputs: Sequence[TensorInfo]) -> tuple[bool, str]:
        """Asked by the Schedule after ``supports`` said yes: whether this backend can hold
        ``op``'s outputs (their inferred shapes: a device's buffer-size limit); else why not.
        Default: yes."""
        return True, ""

    def can_alias(self, op: Op) -> bool:
        """Whether output 0 of ``op`` may share its input's buffer on this backend. Default:
        where the op's schema declares it (``OpSchema.alias``: reshape-like ops, metadata
        only on contiguous storage)."""
        from mnnpy.ops import get_schema

        return get_schema(op.type).alias is not None

    def create_execution(
        self, op: Op, attrs: dict, inputs: Sequence[TensorInfo], outputs: Sequence[TensorInfo]
    ) -> Execution | None:
        """A new Execution for ``op``, or ``None`` when unsupported."""
        raise NotImplementedError

    def on_resize_begin(self) -> None:
        """Called before a resize: drop the previous resize's memory and executions."""

    def on_resize_partition(self, uploads: list, downloads: list) -> None:
        """Called during a resize once per partition on this backend, before that partition's
        Executions are created. ``uploads``: the handles ``upload`` writes before the
        partition runs (the plan's inputs held by this backend, announced with its first
        partition, and the tensors copied in at this partition's border). ``downloads``: the
        handles ``download`` reads after it (tensors it produces that another backend or the
        caller reads). For backends that record their work ahead (Vulkan: staging slots and
        copy commands in the partition's command buffer). Default: nothing.
        """

    def on_resize_end(self) -> None:
        """Called after every Execution's ``on_resize``."""

    def allocate_arena(self, nbytes: int) -> None:
        """Allocate the pooled memory (bytes) that dynamic tensors live in."""
        raise NotImplementedError

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

    def on_execute_begin(self) -> None:
        """Called before the first Execution of a partition runs."""

    def on_execute_end(self) -> None:
        """Called after the last Execution of a partition ran (GPU: flush/wait)."""


class Runtime:
    """One per device per process; creates Backends. Subclasses set ``name``.

    ``in_auto``: whether ``backend="auto"`` picks this backend when it is available (a bool,
    or a classmethod deciding by the device: a GPU API on a CPU device, such as PoCL or
    lavapipe, is slower than the CPU backend); a backend still being built sets it False and
    is used only when asked for by name. ``auto`` orders the backends it takes as
    ``registered_backends`` lists them (the CPU last).
    """

    name = "base"
    in_auto = True

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """``(True, "")`` when usable here, else ``(False, reason)``."""
        return True, ""

    def create_backend(self, config: BackendConfig) -> Backend:
        raise NotImplementedError


_RUNTIMES: dict[str, tuple[int, Runtime]] = {}  # name -> (process id that created it, Runtime)


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
    spec = registered_backends().get(name)
    if spec is None:
        raise BackendUnavailableError(f"unknown backend '{name}'; known: {sorted(registered_backends())}")
    module, _, cls = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as e:
        raise BackendUnavailableError(f"backend '{name}' cannot be imported: {e}") from e


def backend_availability(name: str) -> tuple[bool, str]:
    """``(usable, reason)`` for a backend name, importing it lazily."""
    try:
        cls = _load_runtime_class(name)
    except BackendUnavailableError as e:
        return False, str(e)
    return cls.availability()


def backend_in_auto(name: str) -> bool:
    """Whether ``backend="auto"`` considers backend ``name`` (its Runtime's ``in_auto``)."""
    try:
        flag = getattr(_load_runtime_class(name), "in_auto", True)
        return bool(flag() if callable(flag) else flag)
    except BackendUnavailableError:
        return True  # availability() reports it


def get_runtime(name: str) -> Runtime:
    """The process-wide Runtime of backend ``name``; raises ``BackendUnavailableError``."""
    if name not in _RUNTIMES or _RUNTIMES[name][0] != os.getpid():
        cls = _load_runtime_class(name)
        ok, reason = cls.availability()
        if not ok:
            raise BackendUnavailableError(f"backend '{name}' is unavailable: {reason}")
        _RUNTIMES[name] = (os.getpid(), cls())
    return _RUNTIMES[name][1]

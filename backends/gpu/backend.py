"""``GPUBackend`` and ``GPUTensor``: what the OpenCL and Vulkan backends share.

A GPU backend stores float32 tensors in NCHW as float32, or with ``precision="low"`` (where
the device can) as float16, arithmetic in float32; other dtypes keep theirs. Its handles
(``GPUTensor``) are a place in a device buffer: a byte offset, a shape and the storage dtype.

What the base does, so that each backend only says how:

- **Schedule**: the registry lookup (``executions``), the dtypes of the inputs computed at
  run time (those the Execution class takes, ``GPUExecution.input_dtypes``: float32 unless it
  says more; a value known at resize may have any dtype), the device's dtypes
  (``dtype_limit``: run-time inputs and outputs), a per-tensor size limit (``size_limit``,
  inputs and outputs), then the Execution class's ``check(info)``; reasons name the backend
  (``display``).
- **Storage**: ``acquire`` gives float32 tensors the storage dtype (``storage``, float16 when
  ``half``); ``fp16_storage`` says whether the device has it. int32, int64 and bool tensors
  are stored as themselves (bool one byte per element) in every precision.
- **fp16 border policy**: with fp16 storage a float tensor crosses a partition border as
  float32: each fp16 handle that is uploaded or downloaded gets one float32 twin on the device
  (``twin``, made by ``new_twin``) and is cast there (``prepare_partition`` records how), so the
  host never converts (NumPy's fp16 conversion cost more than whole runs on the H200).
- **Copies**: ``download`` is ``download_into`` a new array; ``copy`` writes a host-visible
  source (a CPU array, a mapped staging slot: ``host_view``) with ``upload``, or lets the source
  backend read straight into this backend's staging memory (``staging_view``), and goes through
  a new host array only where neither exists. No two GPU backends of one plan share a device
  (one backend per API), so there is no device-to-device path.
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np

from mnnpy.backend import Backend, BackendConfig, Execution, OpInfo, TensorInfo
from mnnpy.backends.gpu.checks import int32_check
from mnnpy.backends.gpu.dtypes import names
from mnnpy.errors import BackendUnavailableError
from mnnpy.fork_guard import ForkGuard


class GPUTensor:
    """A tensor on a GPU device: byte ``offset`` in its buffer, ``shape`` (outermost first),
    storage ``dtype``. Subclasses add the buffer; hashed by identity (border twins key on it)."""

    __slots__ = ("offset", "shape", "dtype", "size", "nbytes", "__weakref__")

    def __init__(self, offset: int, shape, dtype):
        self.offset = int(offset)
        self.shape = tuple(map(int, shape))
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        self.size = math.prod(self.shape)  # elements (read at every binding: computed once)
        self.nbytes = self.size * self.dtype.itemsize  # bytes (storage dtype)

    @property
    def elem_offset(self) -> int:
        """The offset in elements from the start of the buffer."""
        return self.offset // self.dtype.itemsize

    def shares(self, other: GPUTensor) -> bool:
        """Whether ``other`` starts at the same place of the same buffer (an aliased tensor)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(offset={self.offset}, shape={self.shape}, dtype={self.dtype})"


def _no_view(src) -> None:
    return None


class GPUBackend(Backend):
    """Base of the OpenCL and Vulkan backends (see the module docstring).

    Subclasses set ``name``, ``display`` (the API's name in reasons) and ``fork`` (their
    ``ForkGuard``), and implement ``executions``, ``handle``, ``new_twin``,
    ``prepare_partition``, ``download_into`` and the storage hooks of ``Backend``."""

    display = "GPU"
    fork: ForkGuard
    max_elements = 2**31 - 1  # kernels and shaders index with 32-bit ints

    def __init__(self, runtime, config: BackendConfig):
        super().__init__(runtime, config)
        self.half = config.precision == "low" and self.fp16_storage()
        self.storage = np.dtype(np.float16 if self.half else np.float32)
        # fp16 handle -> its float32 twin; weak: a plan the session drops takes its twins with it
        self._twins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    # -- schedule -----------------------------------------------------------------------
    def executions(self) -> dict[str, type[Execution]]:
        """This backend's registered Execution classes by op type."""
        raise NotImplementedError

    def fp16_storage(self) -> bool:
        """Whether ``precision="low"`` stores float tensors as float16 here. Default: yes."""
        return True

    def size_limit(self, t: TensorInfo) -> str | None:
        """Why one tensor is too large for this device (the words after "an input"), else
        None. Default: more elements than 32-bit indices reach (``max_elements``)."""
        if math.prod(t.shape) > self.max_elements:
            return f"has more than {self.max_elements} elements"
        return None

    def _too_large(self, tensors, what: str) -> str:
        for t in tensors:
            why = self.size_limit(t)
            if why:
                return f"size limit: {what} {why}"
        return ""

    def dtype_limit(self, dtype) -> str | None:
        """Why this device cannot hold or compute tensors of ``dtype`` (a missing device
        feature), else None. Default: None (every dtype of ``dtypes.ALL``)."""
        return None

    def _dtype_refused(self, tensors) -> str:
        for t in tensors:
            why = self.dtype_limit(t.dtype)
            if why:
                return f"dtype {t.dtype}: {why}"
        return ""

    def supports(self, info: OpInfo) -> tuple[bool, str]:
        """A registered Execution, inputs computed at run time of the dtypes it takes
        (``input_dtypes``; values known at resize may have any) and that the device holds
        (``dtype_limit``), every input within ``size_limit``, every dim and geometry integer
        within 32 bits (``int32_check``), then the Execution class's ``check``."""
        cls = self._execution_class(info.type)
        if cls is None:
            return False, f"no {self.display} execution for {info.type}"
        inputs = info.present()
        takes = cls.input_dtypes(info.type)
        run_time = [t for t in inputs if t.value is None]
        bad = sorted({str(t.dtype) for t in run_time if t.dtype not in takes})
        if bad:
            return False, f"dtype {', '.join(bad)} ({self.display} runs {info.type} on {names(takes)} only)"
        why = self._dtype_refused(run_time) or self._too_large(inputs, "an input")
        if why:
            return False, why
        ok, why = int32_check(info, self.display)
        if not ok:
            return False, why
        check = getattr(cls, "check", None)
        return check(info) if check else (True, "")

    def supports_outputs(self, info: OpInfo) -> tuple[bool, str]:
        """Every output of a dtype the device holds (``dtype_limit``) and within
        ``size_limit``, as inputs."""
        outputs = [t for t in info.outputs if t is not None]
        why = self._dtype_refused(outputs) or self._too_large(outputs, "an output")
        return (False, why) if why else (True, "")

    def _execution_class(self, op_type: str) -> type[Execution] | None:
        """The Execution class registered for ``op_type`` (``executions``, looked up once per
        backend: each look imports the registry), or None."""
        classes = self.__dict__.get("_classes")
        if classes is None:
            classes = self._classes = self.executions()
        return classes.get(op_type)

    def create_execution(self, info: OpInfo) -> Execution | None:
        """A new Execution of the class registered for ``info.type``, or None."""
        cls = self._execution_class(info.type)
        return None if cls is None else cls(self, info)

    # -- storage ------------------------------------------------------------------------
    def storage_dtype(self, dtype) -> np.dtype:
        """The dtype a tensor of ``dtype`` is stored in: ``storage`` for float32, else itself."""
        return self.storage if dtype == np.float32 else np.dtype(dtype)

    def handle(self, offset: int, shape, dtype) -> GPUTensor:
        """A handle at byte ``offset`` of this resize's arena."""
        raise NotImplementedError

    def acquire(self, tensor: TensorInfo, offset: int) -> GPUTensor:
        """A handle at ``offset`` of the arena in the storage dtype (fp16 storage: the plan's
        float32-sized place then holds fp16, half of it unused)."""
        return self.handle(offset, tensor.shape, self.storage_dtype(tensor.dtype))

    def constant(self, value: np.ndarray) -> GPUTensor:
        """A read-only device copy of ``value`` made at resize (index tables, re-laid data)."""
        raise NotImplementedError

    def weights(self, value: np.ndarray) -> GPUTensor:
        """A read-only float32 device copy of ``value`` in every precision (weights, biases,
        folded parameters: fp16 storage keeps them fp32)."""
        raise NotImplementedError

    def fp32_operand(self, handle: GPUTensor, info: TensorInfo | None) -> GPUTensor:
        """The handle a kernel reads for an operand whose value may be known (``info.value``):
        where constants are stored in the storage dtype, an fp32 copy of a constant. Default:
        ``handle`` (constants kept float32)."""
        return handle

    # -- fp16 border policy ---------------------------------------------------------------
    def twin(self, t: GPUTensor) -> GPUTensor | None:
        """The float32 twin of border handle ``t`` (made once per handle by ``new_twin``), or
        None when ``t`` crosses as it is (not fp16 storage, or empty)."""
        if not self.half or t.dtype != np.float16 or not t.size:
            return None
        tw = self._twins.get(t)
        if tw is None:
            tw = self._twins[t] = self.new_twin(t)
        return tw

    def new_twin(self, t: GPUTensor) -> GPUTensor:
        """Float32 device memory of ``t``'s shape, the host's side of ``t`` at borders."""
        raise NotImplementedError

    def on_resize_partition(self, partition) -> None:
        """Pairs ``(handle, twin or None)`` of what is uploaded before and downloaded after the
        partition, for ``prepare_partition``: an upload is cast twin -> handle on the device
        after it lands, a download handle -> twin before it is read."""
        ups = [(t, self.twin(t)) for t in partition.uploads]
        downs = [(t, self.twin(t)) for t in partition.downloads]
        self.prepare_partition(partition, ups, downs)

    def prepare_partition(self, partition, uploads: list, downloads: list) -> None:
        """What this backend builds for a partition (``on_resize_partition``): its border casts,
        staging, recording. Default: nothing."""

    # -- run ------------------------------------------------------------------------------
    def check_fork(self) -> None:
        """``BackendUnavailableError`` in a fork of a process that used this API (the driver
        would hang; ``mnnpy.fork_guard``)."""
        if self.fork.forked():
            raise BackendUnavailableError(self.fork.reason)

    def download_into(self, src: GPUTensor, out: np.ndarray) -> None:
        """Write ``src``'s contents into the host array ``out`` (its shape; float32 for a
        float tensor in either storage), waiting for the work that computes it."""
        raise NotImplementedError

    def download(self, src: GPUTensor) -> np.ndarray:
        """A new host array with ``src``'s contents (float32 for fp16 storage)."""
        out = np.empty(src.shape, np.float32 if src.dtype == np.float16 else src.dtype)
        self.download_into(src, out)
        return out

    def host_view(self, src: GPUTensor) -> np.ndarray | None:
        """A host array holding ``src``'s contents after its partition ran (a mapped staging
        slot), valid until the next run, or None when there is none. Default: None."""
        return None

    def staging_view(self, dst: GPUTensor) -> np.ndarray | None:
        """The host array that ``upload`` into ``dst`` fills (a mapped staging slot, float32
        for fp16 storage) for another backend to write directly, or None. Default: None."""
        return None

    def copy(self, src_backend: Backend, src: Any, dst: GPUTensor) -> None:
        """A border copy into ``dst`` without a new host array where it can: a host array (the
        CPU backend's handle) or a source's ``host_view`` is uploaded as it is; a source that
        can ``download_into`` writes straight into ``staging_view(dst)``; else through the host."""
        view = src if isinstance(src, np.ndarray) else getattr(src_backend, "host_view", _no_view)(src)
        if view is not None:
            self.upload(view, dst)
            return
        into, staging = getattr(src_backend, "download_into", None), self.staging_view(dst)
        if into is not None and staging is not None:
            into(src, staging)
            return
        super().copy(src_backend, src, dst)

"""Device-resident outputs (NNAPI's memory domains; onnxruntime's IO binding of device
memory): ``session.run(feeds, outputs_on_device=True)`` returns ``DeviceTensor`` s, which
stay where the backend computed them and can be fed to another session on the same device.

Lifetime contract: a device tensor *is* the producing session's output tensor, in that
session's memory (its arena); nothing is copied when it is returned. It is valid until the
next run of that session starts (or the session is closed): each Session counts its runs,
the tensor keeps the count of the run that made it, and using it afterwards (``numpy``,
feeding it) raises ``StaleTensorError``. Keep ``.numpy()`` of a tensor you need longer, or
run a second session. Holding one costs nothing beyond the session's own memory and keeps
none of it alive: it refers to its plan's memory weakly, so ``close()`` frees it at once.
A copy into device memory of its own was the alternative: it would cost one device copy
and one allocation per output per run, which is what a chain of sessions is meant to save.

Completion: on Vulkan a run waits for its submissions, as every run does; its partition
still copies each output into the output's mapped staging slot, as recorded at resize (a
device-side copy, no host work; ``numpy()`` reads that slot without a submission). On OpenCL a run
whose outputs stay on the device returns once its kernels are queued (no blocking read
ends it); the device's one in-order queue puts every later copy, kernel and read
(``numpy()``) after them.

Where the tensor lives: on a GPU backend, the output's device buffer (OpenCL: a range of the
plan's ``cl.Buffer``; Vulkan: a range of the resize's device buffer); on the CPU backend,
the arena view (no copy); an output the plan never computed on a backend (a value known at
resize, a control-flow or sequence op's result, an input passed through) wraps the host
array with ``device == "cpu"``. Sequence outputs stay host lists.

Feeding one to ``run`` (``mnnpy.planner.Plan.write``): a backend of the same Runtime (same
device, same API) copies it device to device (``Backend.copy_device``); any other backend
gets ``numpy()`` (a host copy). Its shape and dtype are checked without reading it
(``mnnpy.io_desc``). A session fed its own device tensor takes a host copy when the run is
asked for (its run is about to overwrite it).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from mnnpy.errors import StaleTensorError


class DeviceTensor:
    """An output left on its backend's device (see the module doc).

    ``name`` (the graph output's), ``shape`` (outermost first, e.g. ``(N, C, H, W)``),
    ``dtype`` (the graph's dtype: float32 also where the device stores float16), ``device``
    (the backend's name: "cpu", "opencl", "vulkan"); ``backend`` and ``handle``: where it
    lives (the backend's tensor handle; ``None`` with ``backend`` for a host array);
    ``session`` and ``run``: the producing session and the count of the run that made it."""

    __slots__ = ("name", "shape", "dtype", "backend", "_handle", "session", "run", "_host")

    def __init__(self, name: str, shape, dtype, backend, handle: Any, session, run: int, host: np.ndarray | None = None):
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.backend = backend
        # weak: the plan owns the memory; closing the session (or dropping the plan) frees it
        self._handle = None if handle is None else weakref.ref(handle)
        self.session = session
        self.run = run
        self._host = host

    @property
    def handle(self) -> Any:
        """The backend's tensor handle (``None`` for a host array); ``StaleTensorError`` once
        the plan that held it is gone."""
        h = None if self._handle is None else self._handle()
        if h is None and self._handle is not None:
            raise StaleTensorError(f"device tensor '{self.name}': its session dropped the plan that held it")
        return h

    @property
    def device(self) -> str:
        """The name of the backend holding it ("cpu" for a host array)."""
        return "cpu" if self.backend is None else self.backend.name

    @property
    def runtime(self) -> Any:
        """The ``Runtime`` (device and API) holding it; ``None`` for a host array."""
        return None if self.backend is None else self.backend.runtime

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes of its contents as ``numpy()`` returns them (``dtype``)."""
        return self.size * self.dtype.itemsize

    @property
    def valid(self) -> bool:
        """Whether its contents are still the run's (no later run started, session open, its
        plan kept)."""
        s = self.session
        alive = self._handle is None or self._handle() is not None
        return alive and not s._closed and s._run_count == self.run

    def check(self, what: str = "used") -> None:
        """Raise ``StaleTensorError`` unless ``valid``; ``what`` says how it was used."""
        s = self.session
        if s._closed:
            raise StaleTensorError(f"device tensor '{self.name}' {what} after its session was closed")
        if s._run_count != self.run:
            raise StaleTensorError(
                f"device tensor '{self.name}' {what} after its session ran again (it was made by run {self.run}, "
                f"the session is at run {s._run_count}): its memory holds a later run's output; "
                "keep .numpy() of a tensor needed past the next run"
            )

    def numpy(self) -> np.ndarray:
        """A new host array with its contents (``shape``, ``dtype``): one download from the
        device (GPU: a blocking read; Vulkan: from the output's mapped staging slot, filled by
        the run), one copy on the CPU. Raises ``StaleTensorError`` (checked before and after
        the read, so a run of its session that started meanwhile is caught too)."""
        self.check("read")
        if self.backend is None:
            out = np.array(self._host)
        else:
            out = np.empty(self.shape, self.dtype)
            self.backend.download_into(self.handle, out)
        self.check("read")
        return out

    def write_to(self, backend, dst: Any) -> None:
        """Write its contents into ``backend``'s tensor ``dst`` (``Plan.write``): device to
        device where ``backend`` shares its Runtime and can (``Backend.copy_device``), else
        through ``numpy()``. Raises ``StaleTensorError``."""
        self.check("fed to a run")
        if self.backend is not None and backend.runtime is self.backend.runtime:
            if backend.copy_device(self.backend, self.handle, dst):
                self.check("fed to a run")
                return
        backend.upload(self.numpy(), dst)

    def __repr__(self) -> str:
        state = "" if self.valid else ", stale"
        return f"DeviceTensor('{self.name}', shape={self.shape}, dtype={self.dtype}, device='{self.device}'{state})"

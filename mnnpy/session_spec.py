"""SessionSpec: a picklable description of a prepared session, made into a Session where it runs.

A ``Session`` holds device memory, driver handles, queues and threads: it cannot be pickled
and a GPU session refuses a forked child (``mnnpy.fork_guard``). A batch job sends a
``SessionSpec`` instead (to ``multiprocessing`` workers started by ``spawn`` or
``forkserver``, or to Ray actors, ``mnnpy.ray``), and each worker calls ``create_session()``
on its own device. Sessions made from one spec share the compilation cache folder
(``create_session(cache_dir=...)``; by default ``<mnnpy cache>/compilation`` of the worker's
machine, ``$MNNPY_CACHE`` moves it), the OpenCL and Vulkan program caches and numba's
compiled kernels, so every worker after the first prepares from the cache.

>>> spec = mnnpy.SessionSpec("det.mnnpy", backend="cpu", num_threads=1)
>>> session = pickle.loads(pickle.dumps(spec)).create_session()
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mnnpy.errors import InputError

DEFAULT_CACHE = "default"  # cache_dir: the compilation folder of the mnnpy cache, where the session is made
GPU_APIS = ("opencl", "vulkan")  # backends whose devices a scheduler hands out as GPUs


def _checked_backend(backend) -> str | tuple[str, ...]:
    """``backend`` as a name or a tuple of names (``"opencl,cpu"`` as ``("opencl", "cpu")``, the
    list ``create_session`` makes of it). ``InputError`` for a malformed name, or one the engine
    does not know: each must be a registered backend (``registered_backends``: cpu, opencl,
    vulkan, plug-ins), optionally with a device index as ``split_device_name`` reads it
    (``"vulkan:1"``), or ``"auto"`` alone. Whether it can run is checked where the session is
    made (another machine may have the driver): ``SessionSpec.check_backend``."""
    from mnnpy.backend import registered_backends, split_device_name

    if isinstance(backend, str) and "," in backend:
        backend = [b.strip() for b in backend.split(",")]
    names = [backend] if isinstance(backend, str) else list(backend) if isinstance(backend, Sequence) else None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InputError(f"backend must be a backend name or a list of them, e.g. 'cpu' or ['vulkan', 'cpu'], got {backend!r}")
    known = registered_backends()
    for n in names:
        base, _ = split_device_name(n)
        if base == "auto" and (n != "auto" or len(names) > 1):
            raise InputError(f"backend 'auto' stands alone (no device index, not in a list), got {backend!r}")
        if base not in known and base != "auto":
            raise InputError(
                f"unknown backend {base!r} in backend={backend!r}; known: {sorted(known)} or 'auto' (e.g. 'vulkan:1')"
            )
    return names[0] if isinstance(backend, str) else tuple(names)


def _checked_model(model) -> str | bytes:
    """A path as an absolute path (text), or the model's bytes; ``InputError`` otherwise."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        if not len(model):
            raise InputError("SessionSpec: the model's bytes are empty")
        return bytes(model)
    if isinstance(model, (str, os.PathLike)):
        if not os.fspath(model):
            raise InputError("SessionSpec: the model path is empty")
        return os.path.abspath(os.fspath(model))
    raise InputError(f"SessionSpec takes a .mnnpy path or the model's bytes, got {type(model).__name__}")


@dataclass(frozen=True, repr=False)
class SessionSpec:
    """What ``Interpreter(model).create_session(...)`` needs, and nothing that cannot be pickled.

    ``model``: a ``.mnnpy`` path (kept absolute; read where the session is made, so on a
    cluster it must be there too) or the model's bytes (sent with the spec). ``backend``,
    ``precision``, ``num_threads``, ``tuning``, ``priority``, ``memory_limit`` (bytes) and
    ``cache_token``: as ``create_session`` takes them. ``cache_dir``: ``DEFAULT_CACHE``
    (``<mnnpy cache>/compilation`` of the machine the session is made on), a folder, or None
    (no compilation cache). Options are checked here (``InputError``; a backend name the engine
    does not know too); the model is read and the backend made only by ``create_session``
    (``check_backend``: whether the backend can run on this machine).
    """

    model: str | bytes
    backend: str | tuple[str, ...] = "cpu"
    precision: str = "normal"
    num_threads: int | None = None
    tuning: str = "none"
    priority: str = "medium"
    memory_limit: int | None = None
    cache_dir: str | None = DEFAULT_CACHE
    cache_token: str | None = None

    def __post_init__(self):
        from mnnpy.compilation_cache import checked_token
        from mnnpy.device_queue import priority_level
        from mnnpy.interpreter import check_cache_options, checked_config
        from mnnpy.limits import checked_limit

        object.__setattr__(self, "model", _checked_model(self.model))
        object.__setattr__(self, "backend", _checked_backend(self.backend))
        checked_config(self.precision, self.num_threads, self.tuning)
        priority_level(self.priority)
        if self.memory_limit is not None:
            object.__setattr__(self, "memory_limit", checked_limit(self.memory_limit))
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise InputError(f"cache_dir must be a folder, DEFAULT_CACHE or None, got {self.cache_dir!r}")
        if self.cache_dir not in (None, DEFAULT_CACHE):
            object.__setattr__(self, "cache_dir", os.path.abspath(os.fspath(self.cache_dir)))
        if self.cache_token is not None:
            object.__setattr__(self, "cache_token", checked_token(self.cache_token))
        check_cache_options(self.cache_dir, self.cache_token)  # create_session's rule: a token names entries of a folder

    def __repr__(self) -> str:
        model = f"<{len(self.model)} bytes>" if isinstance(self.model, bytes) else repr(self.model)
        return f"SessionSpec({model}, backend={self.backend!r}, precision={self.precision!r}, num_threads={self.num_threads})"

    def interpreter(self):
        """A new ``mnnpy.Interpreter`` of the model (``ModelFormatError`` for a bad or missing file)."""
        from mnnpy.interpreter import Interpreter

        return Interpreter(self.model)

    def create_session(self, interpreter=None):
        """A ``Session`` made from this spec, in this process, on this machine's devices.

        ``interpreter``: one made by ``interpreter()`` (to read the model's inputs or metadata
        once); default a new one. Raises what ``create_session`` raises
        (``BackendUnavailableError``, ``InputError``, ``ModelFormatError``).
        """
        interp = interpreter if interpreter is not None else self.interpreter()
        backend = list(self.backend) if isinstance(self.backend, tuple) else self.backend
        return interp.create_session(
            backend=backend,
            precision=self.precision,
            num_threads=self.num_threads,
            tuning=self.tuning,
            priority=self.priority,
            memory_limit=self.memory_limit,
            cache_dir=self._cache_folder(),
            cache_token=self.cache_token,
        )

    def check_backend(self) -> None:
        """What ``create_session`` would raise for this spec's backend on this machine, checked
        without reading the model or making a Session: ``BackendUnavailableError`` with the
        reason for a named backend or device that cannot run here. A job calls it once before
        it starts its workers, so that one message stands for every worker's failure.
        ``"auto"`` always passes (the CPU is its fallback); names of a list that cannot run
        here are skipped, as ``create_session`` skips them."""
        if self.backend == "auto":
            return
        import warnings

        from mnnpy.interpreter import resolve_backends

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a list's skipped names: create_session warns of them
            resolve_backends(list(self.backend) if isinstance(self.backend, tuple) else self.backend)

    def _cache_folder(self) -> str | None:
        if self.cache_dir != DEFAULT_CACHE:
            return self.cache_dir
        from mnnpy.models import cache_dir

        return str(cache_dir() / "compilation")

    def on_gpus(self, gpu_ids: Sequence[int]) -> SessionSpec:
        """This spec on the GPU a scheduler assigned (Ray's ``ray.get_gpu_ids()``, the
        ``CUDA_VISIBLE_DEVICES`` ordinals). Only a spec whose backend is a bare GPU API name
        (``"vulkan"``, ``"opencl"``) moves: to device ``gpu_ids[0]`` of that API's GPUs (in
        the driver's order, which on NVIDIA is the PCI order CUDA uses for identical GPUs), or
        to its first GPU where the driver lists fewer (it honours ``CUDA_VISIBLE_DEVICES``:
        NVIDIA's OpenCL). Unchanged without ids, for other backends and without GPUs here."""
        if not gpu_ids or self.backend not in GPU_APIS:
            return self
        from mnnpy.device import devices

        gpus = [d for d in devices() if d.backend == self.backend and d.type == "gpu"]
        if not gpus:
            return self
        ids = [int(i) for i in gpu_ids]
        chosen = gpus[ids[0]] if min(ids) >= 0 and len(gpus) > max(ids) else gpus[0]
        return replace(self, backend=chosen.id)

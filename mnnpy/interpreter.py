"""Interpreter: a loaded model, from which sessions are created (MNN's Interpreter).

>>> interp = mnnpy.Interpreter("model.mnnpy")
>>> session = interp.create_session(backend="cpu", num_threads=2)
>>> outputs = session.run({"x": image})          # {name: ndarray}
"""

from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from mnnpy import model_file
from mnnpy.auto_devices import auto_placer, check_preference
from mnnpy.backend import (
    BackendConfig,
    backend_availability,
    device_key,
    get_runtime,
    registered_backends,
    split_device_name,
    warm_up,
)
from mnnpy.deadline import check, resolve
from mnnpy.device_queue import priority_level
from mnnpy.errors import BackendUnavailableError, InputError
from mnnpy.io_desc import IODesc
from mnnpy.ir import Net
from mnnpy.limits import checked_limit
from mnnpy.log import get_logger
from mnnpy.ops import resolve_attrs
from mnnpy.session import Session
from mnnpy.timing import clock

PRECISIONS = ("high", "normal", "low")
TUNING = ("none", "fast", "wide")
MAX_THREADS = 256
KNOWN_BACKENDS = ("cpu", "opencl", "vulkan")  # names mnnpy defines, whether or not usable here

_log = get_logger("session")


class Interpreter:
    """A validated model loaded from a path or bytes (``ModelFormatError`` when malformed)."""

    def __init__(self, source: str | os.PathLike | bytes | Net):
        if not isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview, Net)):
            raise InputError(f"Interpreter takes a model path or the model's bytes, got {type(source).__name__}")
        warm_up("cpu")  # the CPU backend's compiled kernels: numba loads while the model is read
        self.net: Net = source if isinstance(source, Net) else model_file.load(source)
        resolve_attrs(self.net.graphs)  # a Net handed over in memory: attributes resolved here, once
        self._token: str | None = None  # model_token, computed on first use

    @property
    def metadata(self) -> dict[str, str]:
        """Model metadata (key -> value), e.g. a recogniser's ``character`` list."""
        return dict(self.net.metadata)

    @property
    def inputs(self) -> list[IODesc]:
        """Graph inputs: name, shape (dynamic dims as names or None), dtype."""
        g = self.net.main
        return [IODesc(g.tensors[t].name, g.tensors[t].shape, g.tensors[t].dtype, g.tensors[t].kind) for t in g.inputs]

    @property
    def outputs(self) -> list[IODesc]:
        """Graph outputs: name, shape (dynamic dims as names or None), dtype."""
        g = self.net.main
        return [IODesc(g.tensors[t].name, g.tensors[t].shape, g.tensors[t].dtype, g.tensors[t].kind) for t in g.outputs]

    def supported_ops(self, device, shapes=None) -> list:
        """Per op of the main graph, in order, an ``OpSupport`` (index, name, type, supported,
        reason): whether ``device`` (a ``mnnpy.Device`` or a name such as ``"vulkan:1"``) can
        run it, by the rule the Schedule places ops with (NNAPI's
        ``getSupportedOperationsForDevices``). ``shapes`` (input name -> shape) also checks
        size-dependent limits for those shapes; see ``mnnpy.supported_ops.supported_ops``
        for the rest and what is raised."""
        from mnnpy.supported_ops import supported_ops

        return supported_ops(self, device, shapes)

    def unplanned_session(
        self,
        backend: str | Sequence[str] = "cpu",
        config: BackendConfig | None = None,
        memory_limit: int | None = None,
        priority: str = "medium",
        preference: str | None = None,
        devices: Sequence | None = None,
    ) -> Session:
        """A Session that has planned nothing yet, not even for static shapes: for describing
        schedules (``session.partitions(shapes)``, ``mnnpy info --partitions``) without
        allocating memory or preparing Executions. ``run``/``resize`` plan as usual."""
        limit = checked_limit(memory_limit)
        priority_level(priority)  # InputError before any backend is made
        config = config or BackendConfig()
        check_preference(preference)
        placer = None
        if isinstance(backend, str) and backend == "auto":
            names, placer = auto_placer(preference, devices, config.precision)
        elif devices is not None:
            raise InputError(f"devices=[...] limits the candidates of backend='auto'; backend={backend!r} names them itself")
        else:
            names = resolve_backends(backend)
        backends = [get_runtime(n).create_backend(config) for n in names]
        return Session(self.net, backends, limit, priority, placer)

    def create_session(
        self,
        backend: str | Sequence[str] = "cpu",
        precision: str = "normal",
        num_threads: int | None = None,
        tuning: str = "none",
        memory_limit: int | None = None,
        priority: str = "medium",
        deadline: float | None = None,
        timeout_ms: float | None = None,
        preference: str | None = None,
        devices: Sequence | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache_token: str | bytes | None = None,
    ) -> Session:
        """A Session on ``backend``: a name, a preference list (``["opencl", "cpu"]``) or ``"auto"``.

        ``"auto"``: ops placed by capabilities and border copies (``mnnpy.placement``), for NNAPI's
        ``preference`` (``"fast_single_answer"``, ``"sustained_speed"``, ``"low_power"``) among ``devices``.

        ``precision``: "high" (fp32), "normal", "low" (fp16 where a backend supports it;
        the CPU backend always computes in fp32). ``num_threads``: CPU threads (BLAS
        and the backend's pool; process-wide for BLAS). ``tuning``: GPU work-group
        auto-tuning at resize, "none" (defaults), "fast" (a few candidates) or "wide"
        (every candidate); results persist in the Runtime's tuning cache. ``memory_limit``:
        the bytes the session's plans may hold together (arenas of every backend, constant
        copies, scratch and workspaces, Loop outputs); default ``limits.DEFAULT_FRACTION`` of
        the memory available now. Every size is checked against it before anything is
        allocated (``ShapeError`` naming the op, its shapes and the bytes asked for).
        ``cache_dir``/``cache_token``: NNAPI's compilation caching
        (``ANeuralNetworksCompilation_setCaching``): prepared data is kept in ``cache_dir`` under
        the token (32 bytes or 64 hex digits; default the SHA-256 of the model's bytes,
        ``model_token``) and reused, verified, by later sessions (``mnnpy.compilation_cache``);
        ``InputError`` for an unusable folder, a malformed token or a token without a folder.
        ``priority``: NNAPI's execution priority, "low", "medium" (default) or "high": when
        runs of several sessions wait for one device, higher priority goes first
        (``mnnpy.device_queue``). ``deadline`` (``time.monotonic()`` s) or ``timeout_ms``:
        NNAPI's preparation deadline, checked before preparing, after the backends are made
        and after the plan for static shapes (``DeadlineMissedError``). Raises
        ``BackendUnavailableError`` for a named backend that cannot run here, ``InputError``
        for a bad option.
        """
        prepare_by = resolve(deadline, timeout_ms, "create_session")
        check(prepare_by, "before preparing the session")
        t0 = time.perf_counter()
        config = checked_config(precision, num_threads, tuning)  # checked before the cache folder is touched
        config = replace(config, cache=self._compilation_cache(cache_dir, cache_token))
        session = self.unplanned_session(backend, config, memory_limit, priority, preference, devices)
        check(prepare_by, "preparing the session, after its backends were made")
        fixed = {d.name: d.shape for d in session.inputs}
        static = all(s is not None and all(isinstance(x, int) and x >= 0 for x in s) for s in fixed.values())
        if static:
            session.resize(fixed)  # static shapes: plan now, as MNN's createSession does
            if prepare_by is not None and clock() > prepare_by:
                session.close()
                check(prepare_by, "preparing the session, after planning it")
        auto = {"preference": preference, "devices": devices}
        session._spawn = partial(self._sibling, backend, config, memory_limit, priority, auto, fixed if static else None)
        _log.info("session on %s created in %.1f ms", [b.name for b in session.backends], (time.perf_counter() - t0) * 1e3)
        return session

    def model_token(self) -> str:
        """The SHA-256 (64 hex digits) of the bytes the model was read from (the file as mapped
        when loaded, not as it is now); ``InputError`` for a model handed over as a ``Net``."""
        if self._token is None:
            if self.net.source is None:
                raise InputError("a model built in memory has no file: give create_session a cache_token")
            digest = self.net.source_digest  # model_file.load's
            self._token = digest.hexdigest() if digest is not None else hashlib.sha256(self.net.source).hexdigest()
        return self._token

    def _compilation_cache(self, cache_dir, cache_token):
        """The ``CompilationCache`` of ``create_session``'s options, or None without ``cache_dir``."""
        check_cache_options(cache_dir, cache_token)
        if cache_dir is None:
            return None
        from mnnpy.compilation_cache import CompilationCache

        digest = self.net.source_digest
        if cache_token is not None:
            cache = CompilationCache(cache_dir, cache_token)
        elif self._token is None and digest is not None:
            cache = CompilationCache.for_model(cache_dir, digest)  # maybe a guess while the hash runs (cache_sources)
        else:
            cache = CompilationCache(cache_dir, self.model_token(), source=digest)
        cache.names_model = cache_token is None
        return cache

    def _sibling(self, backend, config: BackendConfig, memory_limit, priority: str, auto: dict, fixed, lane: int) -> Session:
        """The session of ``create_session``'s options on the devices' queue ``lane`` (its
        asynchronous runs' context of that lane, ``mnnpy.run_queue``), planned for ``fixed``."""
        sibling = self.unplanned_session(backend, replace(config, lane=lane), memory_limit, priority, **auto)
        if fixed is not None:
            sibling.resize(fixed)
        return sibling


def resolve_backends(backend: str | Sequence[str]) -> list[str]:
    """Preference list of usable backend names, CPU appended last.

    ``"auto"``: the candidates of AUTO placement for the default preference
    (``mnnpy.auto_devices.auto_placer``: devices with measured capabilities faster than the
    CPU for some operand type, unmeasured ones that ``Runtime.in_auto`` takes, Vulkan before
    OpenCL); a session made from them places ops by cost (``create_session``). One name (``"opencl"``):
    that backend or ``BackendUnavailableError`` with the reason. A list
    (``["opencl", "cpu"]``, or the string ``"opencl,cpu"``): in order, skipping
    unavailable ones with a ``RuntimeWarning`` naming the reason (onnxruntime treats a
    provider list the same way); an unknown name in a list is still an error. A name may
    pick one device of its backend: ``"vulkan:1"`` (``mnnpy.devices()``; a device past the
    backend's list is unavailable); two names of one device count once. ``InputError`` for a
    malformed name.
    """
    if isinstance(backend, str) and "," in backend:
        backend = [b.strip() for b in backend.split(",")]
    if isinstance(backend, str):
        if backend == "auto":
            names = auto_placer()[0]
        else:
            ok, reason = backend_availability(backend)
            if not ok:
                raise BackendUnavailableError(f"backend '{backend}' is unavailable: {reason}")
            names = [backend]
    elif isinstance(backend, Sequence) and backend:
        names = []
        for n in backend:
            if not isinstance(n, str) or not n:
                raise InputError(f"backend names must be non-empty strings, got {n!r}")
            ok, reason = backend_availability(n)
            if ok:
                names.append(n)
            elif n == "auto":
                raise InputError("'auto' stands alone; it cannot be part of a backend list")
            elif split_device_name(n)[0] not in registered_backends() and n not in KNOWN_BACKENDS:
                raise BackendUnavailableError(reason)
            else:
                warnings.warn(f"backend '{n}' skipped: {reason}", RuntimeWarning, stacklevel=3)
    else:
        raise InputError(f"backend must be a name, a list of names or 'auto', got {backend!r}")
    chosen: dict[tuple, str] = {}  # device -> the first name of it
    for n in [*names, "cpu"]:
        chosen.setdefault(device_key(n), n)
    return list(chosen.values())


def load(source: str | os.PathLike | bytes, **session_options) -> Session:
    """Short path: ``mnnpy.load(path).run({...})`` — an Interpreter and one Session."""
    return Interpreter(source).create_session(**session_options)


def check_cache_options(cache_dir, cache_token) -> None:
    """``InputError`` for ``create_session``'s ``cache_token`` without a ``cache_dir`` (a token names entries of a folder)."""
    if cache_dir is None and cache_token is not None:
        raise InputError("cache_token needs a cache_dir")


def checked_config(precision: str, num_threads: int | None, tuning: str) -> BackendConfig:
    """``create_session``'s backend options as a ``BackendConfig``; ``InputError`` for a
    precision not in ``PRECISIONS``, a tuning not in ``TUNING`` or a thread count outside
    1..``MAX_THREADS``."""
    if tuning not in TUNING:
        raise InputError(f"tuning must be one of {TUNING}, got {tuning!r}")
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if num_threads is not None and (
        not isinstance(num_threads, int) or isinstance(num_threads, bool) or not 1 <= num_threads <= MAX_THREADS
    ):
        raise InputError(f"num_threads must be an int in 1..{MAX_THREADS}, got {num_threads!r}")
    return BackendConfig(precision=precision, num_threads=num_threads, tuning=tuning)

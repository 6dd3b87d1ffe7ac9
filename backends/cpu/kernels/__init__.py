"""Compiled CPU kernels (numba), see DESIGN.md "CPU kernels".

Each kernel is compiled once per signature per machine: ``njit(cache=True)`` with numba's
cache in a folder per version of the kernel sources under ``<mnnpy cache>/numba`` (or
``NUMBA_CACHE_DIR``; ``_cache_folder``). Kernels are compiled
for their explicit signatures the first time a session resizes an op that uses them
(``compiled``), never during ``run``. Where numba is missing or cannot compile (no writable
cache folder, no compiler), ``compiled`` warns once and returns ``None``, and the execution
keeps its NumPy path.

Loading numba costs about 0.5 s once per process (its import, then its typing and target
contexts, which the first kernel would build), against about 20 ms for each cached kernel after
it. ``warm_up`` does that once on a background thread when the first ``Interpreter`` is made,
so it overlaps with reading the model; ``compiled`` waits for it. ``MNNPY_NUMBA_WARMUP=0``
turns it off. The thread is joined before a ``fork`` (a child must not inherit a half-done
import) and at exit.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import threading
import warnings
from collections.abc import Callable

from mnnpy.backends.cpu.kernels import native

_LOCK = threading.RLock()  # re-entered: a kernel's build asks for the kernels it calls (jitted)
_BUILT: dict[str, Callable | None] = {}
_JITTED: dict[str, Callable] = {}  # numba dispatchers called from other kernels
_WARM: list[threading.Thread] = []  # the warm-up thread, once started


def _cache_folder() -> str:
    """numba's cache folder: ``<root>/mnnpy-<12 hex digits of the kernel sources' SHA-256>``
    under ``$NUMBA_CACHE_DIR``, else under ``<mnnpy cache>/numba`` (created; ``OSError`` where it
    cannot be). numba checks a cached function against its own file's time stamp only, not the
    files of the functions it inlines (``simd.activate`` into four kernels): a cache kept across
    a change of ``simd.py`` returned the old code."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        root = env
    else:
        from mnnpy.models import cache_dir

        root = str(cache_dir() / "numba")
    folder = os.path.join(root, "mnnpy-" + native.source_digest()[:12])
    os.makedirs(folder, exist_ok=True)
    return folder


def _import_numba():
    folder = _cache_folder()
    import numba

    numba.config.CACHE_DIR = folder  # read when a cache is made, also if numba was imported before
    probe = os.path.join(folder, f".probe-{os.getpid()}-{threading.get_ident()}")
    with open(probe, "wb"):  # an unwritable cache would make numba recompile every process
        pass
    os.remove(probe)
    return numba


def jitted(name: str, build: Callable) -> Callable:
    """numba's dispatcher ``build(numba)`` for ``name``, built once per process: for kernels
    that other kernels call from compiled code (``epilogue.span``). Raises where numba cannot
    compile; only called from inside another kernel's ``build``."""
    with _LOCK:
        if name not in _JITTED:
            _JITTED[name] = build(_import_numba())
        return _JITTED[name]


def compiled(name: str, build: Callable) -> Callable | None:
    """The compiled kernel ``name`` (or a tuple of them, as ``build`` returns): loaded as
    machine code where this machine has it (``native.py``: no numba import), else built by
    ``build(numba)`` (explicit signatures, ``cache=True``) and exported for the next process.
    Once per process, thread-safe. ``None``, with one ``RuntimeWarning``, where numba cannot
    compile here (the caller falls back to NumPy)."""
    with _LOCK:
        if name not in _BUILT:
            _BUILT[name] = _load_or_build(name, build)
        return _BUILT[name]


def _load_or_build(name: str, build: Callable):
    use_native = native.enabled()
    if use_native:
        try:
            folder = native.folder()
            found = native.load(folder, name)
        except Exception:  # noqa: BLE001 - no cache root here (ModelFetchError): numba's dispatchers
            found, use_native = None, False
        if found is not None:
            return found
    try:
        numba = _import_numba()
        built = build(numba)
    except Exception as e:  # noqa: BLE001 - any failure to compile means the NumPy path
        warnings.warn(
            f"mnnpy CPU backend: numba kernel {name!r} unavailable ({type(e).__name__}: {e}); using NumPy",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    if not use_native:
        return built
    try:
        return native.export(folder, name, built, numba)
    except Exception as e:  # noqa: BLE001 - numba's dispatcher still works
        warnings.warn(
            f"mnnpy CPU backend: kernel {name!r} kept as a numba dispatcher ({type(e).__name__}: {e})",
            RuntimeWarning,
            stacklevel=3,
        )
        return built


def _warm() -> None:
    with _LOCK:
        try:
            if native.enabled() and native.has_files(native.folder()):
                return  # kernels load as machine code: numba is needed only for one missing
            _import_numba()
            from numba.core.registry import cpu_target

            cpu_target.typing_context.refresh()
            cpu_target.target_context.refresh()
        except Exception:  # noqa: BLE001 - compiled() reports the failure when a kernel is asked for
            pass


def _join_warm_up() -> None:
    for t in _WARM:
        t.join()


def warm_up() -> None:
    """Load numba (import, typing and target contexts) on a background daemon thread, once per
    process; a no-op where numba is not installed or ``MNNPY_NUMBA_WARMUP=0``."""
    with _LOCK:
        if _WARM or _BUILT or os.environ.get("MNNPY_NUMBA_WARMUP", "1") == "0":
            return
        if importlib.util.find_spec("numba") is None:
            return
        t = threading.Thread(target=_warm, name="mnnpy-numba-warm-up", daemon=True)
        _WARM.append(t)
    os.register_at_fork(before=_join_warm_up)
    atexit.register(_join_warm_up)
    t.start()

"""Compiled CPU kernels (numba), see DESIGN.md "CPU kernels".

Each kernel is compiled once per signature per machine: ``njit(cache=True)`` with numba's
cache under ``<mnnpy cache>/numba`` unless ``NUMBA_CACHE_DIR`` is set. Kernels are compiled
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

_LOCK = threading.Lock()
_BUILT: dict[str, Callable | None] = {}
_WARM: list[threading.Thread] = []  # the warm-up thread, once started


def _cache_folder() -> str:
    """numba's cache folder: ``$NUMBA_CACHE_DIR``, else ``<mnnpy cache>/numba`` (created;
    ``OSError`` where it cannot be)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        os.makedirs(env, exist_ok=True)
        return env
    from mnnpy.models import cache_dir

    folder = cache_dir() / "numba"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def _import_numba():
    folder = _cache_folder()
    os.environ.setdefault("NUMBA_CACHE_DIR", folder)
    import numba

    numba.config.CACHE_DIR = folder  # read when a cache is made, also if numba was imported before
    probe = os.path.join(folder, f".probe-{os.getpid()}-{threading.get_ident()}")
    with open(probe, "wb"):  # an unwritable cache would make numba recompile every process
        pass
    os.remove(probe)
    return numba


def compiled(name: str, build: Callable) -> Callable | None:
    """The compiled kernel ``name``: ``build(numba)`` returns it compiled (explicit signatures,
    ``cache=True``); built once per process, thread-safe. ``None``, with one ``RuntimeWarning``,
    where numba cannot compile here (the caller falls back to NumPy)."""
    with _LOCK:
        if name not in _BUILT:
            try:
                _BUILT[name] = build(_import_numba())
            except Exception as e:  # noqa: BLE001 - any failure to compile means the NumPy path
                warnings.warn(
                    f"mnnpy CPU backend: numba kernel {name!r} unavailable ({type(e).__name__}: {e}); using NumPy",
                    RuntimeWarning,
                    stacklevel=2,
                )
                _BUILT[name] = None
        return _BUILT[name]


def _warm() -> None:
    with _LOCK:
        try:
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

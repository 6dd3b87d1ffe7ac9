"""Compiled CPU kernels (numba), see DESIGN.md "CPU kernels".

Each kernel is compiled once per signature per machine: ``njit(cache=True)`` with numba's
cache under ``<mnnpy cache>/numba`` unless ``NUMBA_CACHE_DIR`` is set. Kernels are compiled
for their explicit signatures the first time a session resizes an op that uses them
(``compiled``), never during ``run``. Where numba is missing or cannot compile (no writable
cache folder, no compiler), ``compiled`` warns once and returns ``None``, and the execution
keeps its NumPy path.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable

_LOCK = threading.Lock()
_BUILT: dict[str, Callable | None] = {}


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

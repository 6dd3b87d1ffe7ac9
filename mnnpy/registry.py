"""A keyed registry filled by decorators in the modules of one package, imported on first use.

Used for op schemas (``mnnpy.ops``), CPU Executions and ONNX op converters: each module
of the package registers its entries with an explicit decorator; registering a key
twice is an error (``ValueError``).

Lookups of one key (``get``) import only the module that registers it where the registry is
*indexed*: ``mnnpy/registry_index.py`` names, per registry kind, the module of the package
that registers each key (written by ``python -m mnnpy.registry``, which imports every module;
``tests/test_registry_index.py`` fails when it is stale). A new process's first session then
imports the schemas and Executions of the model's op types, not all of them: a fresh
process's first silero VAD session imports 49 modules instead of 79 (its creation 33-42 ->
28-31 ms on the 2-core VM). A key the index
does not have, or whose module did not register it, falls back to importing every module
(``entries``), so a stale index costs time, never a wrong answer.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from pathlib import Path
from typing import Any


class Registry:
    """``key -> entry`` for ``kind`` (used in messages), loaded from package ``package``."""

    def __init__(self, kind: str, package: str, skip: tuple[str, ...] = (), indexed: bool = False):
        self.kind, self.package, self.skip = kind, package, skip
        self.indexed = indexed  # ``get`` imports the key's module from ``mnnpy.registry_index``
        if indexed:
            _INDEXED.append(self)
        self._entries: dict[str, Any] = {}
        self.origin: dict[str, str] = {}  # key -> module of the package whose code registered it
        self._loaded = False  # set when loading starts (a module being imported may ask again)
        self._done = False
        self._lock = threading.RLock()  # other threads wait until every module is imported

    def add(self, key: str, entry: Any) -> None:
        """Register ``entry`` under ``key``; raises ``ValueError`` when ``key`` is taken."""
        if key in self._entries:
            raise ValueError(f"{self.kind} for {key} registered twice")
        self._entries[key] = entry
        self.origin[key] = _registering_module(self.package, self.skip)

    def register(self, *keys: str):
        """Decorator: register the decorated object under every key of ``keys``."""

        def deco(obj):
            for k in keys:
                self.add(k, obj)
            return obj

        return deco

    def get(self, key: str) -> Any:
        """The entry of ``key``, or ``None``. Indexed: imports the module the index names for
        ``key`` (module doc), else every module (``entries``)."""
        entry = self._entries.get(key)
        if entry is not None or self._done:
            return entry
        module = _module_of(self.kind, key) if self.indexed else None
        if module is not None:
            importlib.import_module(f"{self.package}.{module}")  # importlib's own lock: threads wait for it
            entry = self._entries.get(key)
            if entry is not None:
                return entry
        return self.entries().get(key)

    def entries(self) -> dict[str, Any]:
        """Every entry by key (imports each module of the package once, first; thread-safe:
        a thread that comes while another loads waits for the whole registry)."""
        if self._done:
            return self._entries
        with self._lock:
            if not self._loaded:
                self._loaded = True
                pkg = importlib.import_module(self.package)
                for m in pkgutil.iter_modules(pkg.__path__):
                    if m.name not in self.skip:
                        importlib.import_module(f"{self.package}.{m.name}")
                self._done = True
        return self._entries


_INDEXED: list[Registry] = []  # registries whose ``get`` uses the index
INDEXED_OWNERS = ("mnnpy.ops.registry", "mnnpy.backends.cpu.registry")  # the modules that make them
_BY_KEY: dict[str, dict[str, str]] = {}  # kind -> key -> module, from ``registry_index.INDEX``


def _module_of(kind: str, key: str) -> str | None:
    """The module (name within its package) that registers ``key`` in the registry ``kind``."""
    if not _BY_KEY:
        from mnnpy.registry_index import INDEX

        for k, modules in INDEX.items():
            _BY_KEY[k] = {key: m for m, chunks in modules.items() for key in " ".join(chunks).split()}
    return _BY_KEY.get(kind, {}).get(key)


def build_index() -> dict[str, dict[str, tuple[str, ...]]]:
    """kind -> module -> keys it registers, for every indexed registry (all modules imported;
    each key under the module whose code registered it, ``Registry.origin``)."""
    for owner in INDEXED_OWNERS:  # by name: the core imports no backend
        importlib.import_module(owner)
    index: dict[str, dict[str, tuple[str, ...]]] = {}
    for reg in _INDEXED:
        modules: dict[str, list[str]] = {}
        for key in reg.entries():
            modules.setdefault(reg.origin[key], []).append(key)
        index[reg.kind] = {m: tuple(keys) for m, keys in modules.items()}
    return index


def _registering_module(package: str, skip: tuple[str, ...]) -> str:
    """The module of ``package`` (name within it) whose code is calling, found up the stack
    (CPython frames; "" where none is: an entry added from outside the package)."""
    prefix = package + "."
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith(prefix) and name[len(prefix) :].split(".")[0] not in skip:
            return name[len(prefix) :].split(".")[0]
        frame = frame.f_back
    return ""


def write_index(path) -> None:
    """Write ``build_index()`` as the Python module ``path`` (``mnnpy/registry_index.py``): per
    registry kind and module, its keys space-separated in strings of at most 90 characters (formatted as ruff formats it)."""
    import textwrap

    lines = [
        '"""Which module registers each key of the indexed registries (``mnnpy.registry``): registry',
        "kind -> module of its package -> its keys (space-separated). Written by ``python -m",
        'mnnpy.registry``; do not edit."""',
        "",
        "INDEX = {",
    ]
    for kind, modules in build_index().items():
        lines.append(f'    "{kind}": {{')
        for m, keys in sorted(modules.items()):
            chunks = textwrap.wrap(" ".join(keys), 90, break_long_words=False)
            if len(chunks) == 1:  # as ruff formats it
                lines.append(f'        "{m}": ("{chunks[0]}",),')
            else:
                lines += [f'        "{m}": (', *(f'            "{c}",' for c in chunks), "        ),"]
        lines.append("    },")
    lines.append("}")
    Path(path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":  # run as a script: the registries live in the imported module, not here
    from mnnpy import registry

    registry.write_index(Path(registry.__file__).with_name("registry_index.py"))

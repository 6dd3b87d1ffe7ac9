"""A keyed registry filled by decorators in the modules of one package, imported on first use.

Used for op schemas (``mnnpy.ops``), CPU Executions and ONNX op converters: each module
of the package registers its entries with an explicit decorator; registering a key
twice is an error (``ValueError``).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from typing import Any


class Registry:
    """``key -> entry`` for ``kind`` (used in messages), loaded from package ``package``."""

    def __init__(self, kind: str, package: str, skip: tuple[str, ...] = ()):
        self.kind, self.package, self.skip = kind, package, skip
        self._entries: dict[str, Any] = {}
        self._loaded = False  # set when loading starts (a module being imported may ask again)
        self._done = False
        self._lock = threading.RLock()  # other threads wait until every module is imported

    def add(self, key: str, entry: Any) -> None:
        """Register ``entry`` under ``key``; raises ``ValueError`` when ``key`` is taken."""
        if key in self._entries:
            raise ValueError(f"{self.kind} for {key} registered twice")
        self._entries[key] = entry

    def register(self, *keys: str):
        """Decorator: register the decorated object under every key of ``keys``."""

        def deco(obj):
            for k in keys:
                self.add(k, obj)
            return obj

        return deco

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

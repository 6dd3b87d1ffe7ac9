"""A keyed registry filled by decorators in the modules of one package, imported on first use.

Used for op schemas (``mnnpy.ops``), CPU Executions and ONNX op converters: each module
of the package registers its entries with an explicit decorator; registering a key
twice is an error (``ValueError``).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any


class Registry:
    """``key -> entry`` for ``kind`` (used in messages), loaded from package ``package``."""

    def __init__(self, kind: str, package: str, skip: tuple[str, ...] = ()):
        self.kind, self.package, self.skip = kind, package, skip
        self._entries: dict[str, Any] = {}
        self._loaded = False

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
        """Every entry by key (imports each module of the package once, first)."""
        if not self._loaded:
            self._loaded = True
            pkg = importlib.import_module(self.package)
            for m in pkgutil.iter_modules(pkg.__path__):
                if m.name not in self.skip:
                    importlib.import_module(f"{self.package}.{m.name}")
        return self._entries

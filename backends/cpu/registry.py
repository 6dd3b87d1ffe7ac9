"""Registry of CPU Executions: ``@cpu_execution("Conv")`` on an Execution subclass."""

from __future__ import annotations

from mnnpy.backend import Execution

_EXECUTIONS: dict[str, type[Execution]] = {}


def cpu_execution(*op_types: str):
    """Register the decorated Execution class for ``op_types``; a type registered twice is an error."""

    def deco(cls):
        for t in op_types:
            if t in _EXECUTIONS:
                raise ValueError(f"CPU execution for {t} registered twice")
            _EXECUTIONS[t] = cls
        return cls

    return deco


_loaded = False


def executions() -> dict[str, type[Execution]]:
    """Every registered CPU Execution class, by op type (imports ``ops/*`` once)."""
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib
        import pkgutil

        from mnnpy.backends.cpu import ops

        for m in pkgutil.iter_modules(ops.__path__):
            importlib.import_module(f"mnnpy.backends.cpu.ops.{m.name}")
    return _EXECUTIONS

"""Registry of CPU Executions: ``@cpu_execution("Conv")`` on an Execution subclass in ``ops/``."""

from __future__ import annotations

from mnnpy.backend import Execution
from mnnpy.registry import Registry

_EXECUTIONS = Registry("CPU execution", "mnnpy.backends.cpu.ops")
cpu_execution = _EXECUTIONS.register


def executions() -> dict[str, type[Execution]]:
    """Every registered CPU Execution class, by op type (imports ``ops/*`` once)."""
    return _EXECUTIONS.entries()

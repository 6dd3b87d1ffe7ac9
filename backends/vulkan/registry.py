"""Registry of Vulkan Executions: ``@vulkan_execution("Add")`` on an Execution subclass in this package."""

from __future__ import annotations

from mnnpy.backend import Execution
from mnnpy.registry import Registry

INFRASTRUCTURE = (
    "registry",
    "device",
    "runtime",
    "pipeline",
    "memory",
    "commands",
    "backend",
    "execution",
    "validation",
    "profile",
)
_EXECUTIONS = Registry("Vulkan execution", "mnnpy.backends.vulkan", skip=INFRASTRUCTURE)
vulkan_execution = _EXECUTIONS.register


def executions() -> dict[str, type[Execution]]:
    """Every registered Vulkan Execution class, by op type (imports the package's op modules once)."""
    return _EXECUTIONS.entries()

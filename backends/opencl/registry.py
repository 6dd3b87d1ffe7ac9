"""Registry of OpenCL Executions: ``@opencl_execution("Add")`` on an Execution subclass in this package."""

from __future__ import annotations

from mnnpy.backend import Execution
from mnnpy.registry import Registry

# modules of this package that are not op families (nothing to register; never imported for it)
INFRASTRUCTURE = (
    "registry",
    "device",
    "runtime",
    "memory",
    "program",
    "backend",
    "execution",
    "launch",
    "tuning",
    "activation",
)
_EXECUTIONS = Registry("OpenCL execution", "mnnpy.backends.opencl", skip=INFRASTRUCTURE)
opencl_execution = _EXECUTIONS.register


def executions() -> dict[str, type[Execution]]:
    """Every registered OpenCL Execution class, by op type (imports the package's op modules once)."""
    return _EXECUTIONS.entries()

"""Registry of OpenCL Executions: ``@opencl_execution("Add")`` on an Execution subclass in this package."""

from __future__ import annotations

from mnnpy.backend import Execution
from mnnpy.registry import Registry

_EXECUTIONS = Registry("OpenCL execution", "mnnpy.backends.opencl", skip=("registry",))
opencl_execution = _EXECUTIONS.register


def executions() -> dict[str, type[Execution]]:
    """Every registered OpenCL Execution class, by op type (imports the package's modules once)."""
    return _EXECUTIONS.entries()

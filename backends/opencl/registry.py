"""Registry of OpenCL Executions: ``@opencl_execution("Add")`` on an Execution subclass in an
op-family module of this package (``executions()``: every class by op type, imported once)."""

from __future__ import annotations

from mnnpy.backends.gpu.registry import ExecutionRegistry

INFRASTRUCTURE = ("device", "runtime", "memory", "program", "backend", "execution", "launch", "tuning", "activation")
REGISTRY = ExecutionRegistry("OpenCL", "mnnpy.backends.opencl", INFRASTRUCTURE)
opencl_execution, executions = REGISTRY.register, REGISTRY.entries

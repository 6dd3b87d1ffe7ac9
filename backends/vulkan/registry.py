"""Registry of Vulkan Executions: ``@vulkan_execution("Add")`` on an Execution subclass in an
op-family module of this package (``executions()``: every class by op type, imported once)."""

from __future__ import annotations

from mnnpy.backends.gpu.registry import ExecutionRegistry

INFRASTRUCTURE = ("device", "runtime", "pipeline", "memory", "commands", "backend", "execution", "validation", "profile")
REGISTRY = ExecutionRegistry("Vulkan", "mnnpy.backends.vulkan", INFRASTRUCTURE)
vulkan_execution, executions = REGISTRY.register, REGISTRY.entries

"""Registries of the CPU backend, filled by decorators in ``ops/``:

- ``@cpu_execution("Conv")`` on an Execution subclass (planned ops: resize, then execute);
- ``@host_kernel("SequenceInsert")`` on a pure host function for a dynamic op whose values
  are Python objects on the host (the sequence ops): ``fn(attrs, inputs) -> outputs``, where
  ``attrs`` is the op's resolved attributes, each input an ndarray, a sequence (a Python list
  of ndarrays) or ``None`` (an absent optional input), and the outputs a list of the same kinds.
  Such a function computes, allocates its outputs and raises ``ShapeError`` naming the op rule
  a value breaks; the engine calls it when the op runs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mnnpy.backend import Execution
from mnnpy.registry import Registry

_EXECUTIONS = Registry("CPU execution", "mnnpy.backends.cpu.ops", indexed=True)
cpu_execution = _EXECUTIONS.register

HostValue = np.ndarray | list[np.ndarray] | None
HostKernel = Callable[[dict, list[HostValue]], list[np.ndarray | list[np.ndarray]]]

_HOST_KERNELS = Registry("CPU host kernel", "mnnpy.backends.cpu.ops", indexed=True)
host_kernel = _HOST_KERNELS.register


def executions() -> dict[str, type[Execution]]:
    """Every registered CPU Execution class, by op type (imports ``ops/*`` once)."""
    return _EXECUTIONS.entries()


def execution(op_type: str) -> type[Execution] | None:
    """The CPU Execution class of ``op_type``, or ``None`` (imports only its module, through
    ``mnnpy.registry_index``)."""
    return _EXECUTIONS.get(op_type)


def host_kernel_of(op_type: str) -> HostKernel | None:
    """The host kernel of the dynamic op ``op_type``, or ``None`` (imports only its module)."""
    return _HOST_KERNELS.get(op_type)


def host_kernels() -> dict[str, HostKernel]:
    """Every registered host kernel function, by op type (imports ``ops/*`` once)."""
    return _HOST_KERNELS.entries()

"""``ExecutionRegistry``: the Execution classes of one GPU backend by op type.

Each op-family module of the backend's package registers its classes with an explicit
decorator (``registry.register("Add", ...)``); the first lookup imports every module of the
package except the backend's infrastructure (runtime, memory, ...), which registers nothing.
Registering an op twice is an error (``mnnpy.registry.Registry``).
"""

from __future__ import annotations

from collections.abc import Sequence

from mnnpy.registry import Registry


class ExecutionRegistry(Registry):
    """Executions of the backend ``api`` ("OpenCL", "Vulkan") in package ``package``, whose
    modules but ``registry`` and ``infrastructure`` are op families."""

    def __init__(self, api: str, package: str, infrastructure: Sequence[str]):
        super().__init__(f"{api} execution", package, skip=("registry", *infrastructure))

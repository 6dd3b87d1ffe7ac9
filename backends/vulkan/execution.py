"""Base class of Vulkan Executions: dispatches described at resize, nothing done per op at run.

A subclass implements ``prepare(inputs, outputs)``, calling ``self.dispatch(...)`` for
each ``vkCmdDispatch`` it needs; the backend records them into the partition's command
buffer at the end of the resize. ``on_execute`` only marks the partition as due, and the
backend submits it once in ``on_execute_end``.
"""

from __future__ import annotations

from mnnpy.backend import Execution
from mnnpy.backends.vulkan.commands import Dispatch, binding_range
from mnnpy.backends.vulkan.memory import VkTensor
from mnnpy.backends.vulkan.pipeline import SpecValue

LOCAL_SIZE = 64  # invocations per work group (specialization constant 0 of every shader)


class VulkanExecution(Execution):
    """One op on the Vulkan backend (see module docstring)."""

    def on_resize(self, inputs, outputs):
        self.partition = self.backend.current_partition()
        self.prepare(inputs, outputs)

    def prepare(self, inputs: list, outputs: list) -> None:
        """Describe this op's dispatches (``self.dispatch``) for these handles."""
        raise NotImplementedError

    def elem_offset(self, t: VkTensor) -> int:
        """Offset of ``t`` in elements from the start of its descriptor range (a push constant)."""
        return binding_range(t, self.backend.align)[2]

    def dispatch(
        self,
        shader: str,
        bindings: list[VkTensor],
        writes: tuple[int, ...],
        push: bytes,
        n: int,
        spec: tuple[tuple[int, SpecValue], ...] = (),
    ) -> None:
        """Ask for one dispatch of SPIR-V variant ``shader`` over ``n`` invocations
        (``LOCAL_SIZE`` per group; groups split over x and y beyond the device's x limit).
        ``spec``: specialization constants after constant 0 (the local size)."""
        if n <= 0:
            return
        pipeline = self.backend.runtime.pipelines.get(shader, len(bindings), len(push), ((0, LOCAL_SIZE), *spec))
        groups = -(-int(n) // LOCAL_SIZE)
        max_x = self.backend.runtime.limits["maxComputeWorkGroupCount"][0]
        gx = min(groups, max_x)
        self.partition.dispatches.append(Dispatch(pipeline, list(bindings), tuple(writes), push, (gx, -(-groups // gx), 1)))

    def on_execute(self, inputs, outputs):
        self.backend.pending = self.partition

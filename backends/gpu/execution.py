"""``GPUExecution``: the base of both GPU backends' Executions, and ``checked_by``.

An Execution prepares everything at resize: ``on_resize`` resets what the last resize built
and calls ``prepare(inputs, outputs)``, which describes the op's kernels (OpenCL: launches,
enqueued by ``on_execute``; Vulkan: dispatches, recorded into the partition's command
buffer). The op families shared by both backends (``backends/gpu/<family>.py``) are written
against the few primitives declared here (``elem_offset``, ``strided``); each backend's base
(``OpenCLExecution``, ``VulkanExecution``) implements them and sets ``display``, the
backend's name in the reasons of ``check``.
"""

from __future__ import annotations

from collections.abc import Callable

from mnnpy.backend import Execution


class GPUExecution(Execution):
    """One op on a GPU backend (see the module docstring)."""

    display = "GPU"  # the backend's name in reasons ("OpenCL", "Vulkan")

    def prepare(self, inputs: list, outputs: list) -> None:
        """Describe this op's kernels for these handles (``inputs``/``outputs``: ``GPUTensor``
        per slot, ``None`` where absent)."""
        raise NotImplementedError

    def elem_offset(self, t) -> int:
        """Where ``t`` starts, in elements, as the kernels take it. Default: from its buffer's start."""
        return t.elem_offset

    def strided(self, x, x_off: int, y, y_off: int, dims, xstr, ystr) -> None:
        """One copy ``y[y_off + sum i*ystr] = x[x_off + sum i*xstr]`` over the index space
        ``dims`` (outermost first; offsets and strides in elements as ``elem_offset``);
        nothing for an empty index space."""
        raise NotImplementedError


def checked_by(*rules: Callable) -> classmethod:
    """A ``check(info) -> (ok, reason)`` classmethod for a GPU Execution class: the shared
    ``rules`` (``rule(info, backend)``, ``backend`` the class's ``display``; see
    ``backends/gpu/checks.py``) in order, the first refusal winning."""

    def check(cls, info) -> tuple[bool, str]:
        for rule in rules:
            ok, why = rule(info, cls.display)
            if not ok:
                return ok, why
        return True, ""

    return classmethod(check)

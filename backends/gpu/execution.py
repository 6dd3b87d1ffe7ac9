"""``GPUExecution``: the base of both GPU backends' Executions, and ``checked_by``.

An Execution prepares everything at resize: ``on_resize`` resets what the last resize built
and calls ``prepare(inputs, outputs)``, which describes the op's kernels (OpenCL: launches,
enqueued by ``on_execute``; Vulkan: dispatches, recorded into the partition's command
buffer). The op families shared by both backends (``backends/gpu/<family>.py``) are written
against the few primitives declared here (``elem_offset``, ``strided``); each backend's base
(``OpenCLExecution``, ``VulkanExecution``) implements them and sets ``display``, the
backend's name in the reasons of ``check``.

Dtypes: ``input_dtypes(op_type)`` (default the class's ``dtypes``, float32 only) are the dtypes
of the inputs computed at run time that the class's kernels read; ``GPUBackend.supports``
refuses others, and a device that cannot hold a dtype (``GPUBackend.dtype_limit``).
"""

from __future__ import annotations

from collections.abc import Callable

from mnnpy.backend import Execution
from mnnpy.backends.gpu.dtypes import F32


class GPUExecution(Execution):
    """One op on a GPU backend (see the module docstring)."""

    display = "GPU"  # the backend's name in reasons ("OpenCL", "Vulkan")
    dtypes: tuple = (F32,)  # input dtypes the kernels read (``input_dtypes``)

    @classmethod
    def input_dtypes(cls, op_type: str) -> tuple:
        """The dtypes of the run-time inputs that this class's kernels take for ``op_type``.
        Default: ``dtypes``."""
        return cls.dtypes

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

"""Device memory of the OpenCL backend: ``cl.Buffer`` s and the tensor handle ``CLTensor``.

Each resize gets one READ_WRITE arena buffer laid out by the memory planner; constants and
re-laid weights get their own READ_ONLY buffers, filled once at resize; scratch (border
twins, two-pass partial results) gets READ_WRITE buffers of its own. OpenCL has no empty
buffers: an empty one takes 4 bytes. Every buffer is checked against the device's
``CL_DEVICE_MAX_MEM_ALLOC_SIZE`` first (``check_allocation``), and charged to the session's
memory limit (the arena by the planner, constants and scratch here and in the backend).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mnnpy import limits
from mnnpy.backends.gpu.backend import GPUTensor
from mnnpy.errors import ShapeError


class CLTensor(GPUTensor):
    """A tensor on the device: ``buffer`` (``cl.Buffer``), byte ``offset``, ``shape``, ``dtype``."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Any, offset: int, shape, dtype):
        super().__init__(offset, shape, dtype)
        self.buffer = buffer

    def shares(self, other: GPUTensor) -> bool:
        """Same buffer, same byte offset."""
        return isinstance(other, CLTensor) and self.buffer == other.buffer and self.offset == other.offset


def check_allocation(rt, nbytes: int, what: str) -> None:
    """``ShapeError`` when one buffer of ``nbytes`` exceeds the allocation limit of ``rt``'s
    device (``OpenCLRuntime.max_alloc``); ``what`` names the buffer."""
    limit = rt.max_alloc
    if nbytes > limit:
        raise ShapeError(
            f"OpenCL: {what} needs one buffer of {nbytes} bytes ({nbytes / 2**30:.2f} GiB), more than the "
            f"{limit} bytes ({limit / 2**30:.2f} GiB) this device allows in one allocation ({rt.device.name})"
        )


def buffer(rt, nbytes: int, what: str):
    """A new READ_WRITE ``cl.Buffer`` of ``nbytes`` (at least 4) on ``rt``'s context."""
    check_allocation(rt, int(nbytes), what)
    return rt.cl.Buffer(rt.context, rt.cl.mem_flags.READ_WRITE, max(int(nbytes), 4))


def read_only(rt, value: np.ndarray) -> CLTensor:
    """A READ_ONLY buffer holding ``value`` (C-contiguous), as a handle of its shape and dtype;
    charged to the plan being made (``mnnpy.limits.charge``: ``ShapeError`` past the limit)."""
    mf = rt.cl.mem_flags
    limits.charge(value.nbytes, f"an OpenCL constant {value.shape} {value.dtype}", "opencl")
    if value.nbytes:
        check_allocation(rt, value.nbytes, "a constant")
        buf = rt.cl.Buffer(rt.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=value)
    else:
        buf = rt.cl.Buffer(rt.context, mf.READ_ONLY, 4)
    return CLTensor(buf, 0, value.shape, value.dtype)

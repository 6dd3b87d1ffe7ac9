"""Base class of OpenCL Executions: kernel launches fixed at resize, enqueued in order at run.

A subclass implements ``prepare(inputs, outputs)``, creating its ``Launch`` es with
``self.enqueue(...)`` (kernel, arguments and work sizes fixed; kept in ``self.launches``);
``on_execute`` calls each, which only enqueues (``launch.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mnnpy.backends.gpu.dtypes import F32, code, typed
from mnnpy.backends.gpu.execution import GPUExecution
from mnnpy.backends.gpu.layout import collapse
from mnnpy.backends.opencl.backend import OpenCLBackend

MAX_RANK = 8  # movement.cl's int8 index decomposition
VEC_MIN = 8  # innermost run (elements) from which the strided copy moves 4 per work item


def dtype_options(src, dst=None) -> list[str]:
    """Build options of a kernel that reads tensors of dtype ``src`` and writes ``dst`` (default
    ``src``; ``shaders/opencl/common.h``): ``-D SRC_<CODE>`` for int32, int64 or bool inputs,
    ``-D DST_<CODE>`` for an output of another kind; none for float storage (fp32 or fp16)."""
    src, dst = np.dtype(src), np.dtype(src if dst is None else dst)
    options = [f"-D SRC_{code(src).upper()}"] if typed(src) else []
    if typed(src) != typed(dst) or (typed(dst) and dst != src):
        options.append(f"-D DST_{code(dst if typed(dst) else F32).upper()}")
    return options


def int8_arg(values, fill: int) -> np.ndarray:
    """An ``int8`` kernel argument: ``values`` right-aligned, padded in front with ``fill``."""
    return np.array([fill] * (MAX_RANK - len(values)) + list(values), np.int32)


def _noop() -> None:
    pass


class OpenCLExecution(GPUExecution):
    """One op on the OpenCL backend (see module docstring)."""

    display = OpenCLBackend.display

    def on_resize(self, inputs, outputs):
        self.launches: list = []
        self.prepare(inputs, outputs)

    def enqueue(self, file: str, name: str, options: Sequence[str], args: Sequence, work: Sequence[int], local=None):
        """A ``Launch`` of kernel ``name`` of ``shaders/opencl/<file>`` (``OpenCLBackend.launch``),
        run by every ``on_execute`` after the ones before it; returns it."""
        return self.add(self.backend.launch(file, name, options, args, work, local))

    def add(self, launch):
        """Run ``launch`` (a ``Launch``) at each ``on_execute``, after the ones added before; returns it."""
        self.launches.append(launch)
        return launch

    @property
    def launch(self):
        """The last launch (one-kernel ops: their only one; a no-op when there is none)."""
        return self.launches[-1] if self.launches else _noop

    def on_execute(self, inputs, outputs):
        for la in self.launches:
            la()

    def strided(self, x, x_off: int, y, y_off: int, dims, xstr, ystr) -> None:
        """``movement.cl`` kernel ``strided`` over the merged index space (4 elements per work
        item along a contiguous innermost run of at least ``VEC_MIN``), in ``x``'s dtype."""
        if any(int(d) == 0 for d in dims):
            return
        d, sx, sy = collapse(dims, xstr, ystr)
        if len(d) > MAX_RANK:
            raise ValueError(f"strided copy of rank {len(d)} after merging dims (max {MAX_RANK})")
        inner, outer = d[-1], math.prod(d[:-1])
        args = (x.buffer, np.int32(x_off), y.buffer, np.int32(y_off), np.int32(inner), np.int32(outer))
        vecs = (int8_arg(d, 1), int8_arg(sx, 0), int8_arg(sy, 0))
        options, work = [f"-D RANK={len(d)}", *dtype_options(x.dtype)], inner
        if sx[-1] == 1 and sy[-1] == 1 and inner >= VEC_MIN:
            options.append("-D VEC4")  # 4 consecutive elements per work item
            work = -(-inner // 4)
        self.enqueue("movement.cl", "strided", options, (*args, *vecs), (work, outer))

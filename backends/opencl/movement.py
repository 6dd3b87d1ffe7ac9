"""OpenCL data movement: Reshape-likes (aliased, else one copy), Transpose, Slice, Concat, Split, Gather.

Every op here is a strided copy (``shaders/opencl/movement.cl`` kernel ``strided``,
``OpenCLExecution.strided``) over an index space whose dims are merged where both sides stay
contiguous; Transpose uses a local-memory tiled kernel when the input's innermost axis moves;
Gather with indices known at resize reads an int32 table (kernel ``gather``). Values are
copied exactly (fp32, or fp16 storage with ``precision="low"``). Shared rules and index
spaces: ``backends/gpu/movement.py``.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backends.gpu import movement as family
from mnnpy.backends.opencl.execution import OpenCLExecution, int8_arg
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "movement.cl"
TILE = 16  # transpose_tiled: TILE x TILE work-groups
MIN_TILED = 8  # both tiled dims at least this long, else the strided kernel


@opencl_execution(*family.RESHAPES)
class Reshape(family.ReshapeBase, OpenCLExecution):
    """Metadata-only: nothing runs where the planner aliased the output, else one copy kernel."""


@opencl_execution("Transpose")
class Transpose(family.TransposeBase, OpenCLExecution):
    """Any-rank transpose: ``strided``, or ``transpose_tiled`` through local memory."""

    def tile(self, x, y, d, sx, sy) -> bool:
        """The tiled launch; False when a tiled dim is short or the work-group would not fit."""
        a = sx.index(1)  # output axis read contiguously from X
        b = len(d) - 1  # output axis written contiguously to Y (sy[b] == 1)
        na, nb = d[a], d[b]
        if na < MIN_TILED or nb < MIN_TILED:
            return False
        rest = [k for k in range(len(d)) if k not in (a, b)]
        bd, bx, by = [d[k] for k in rest], [sx[k] for k in rest], [sy[k] for k in rest]
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset), np.int32(na), np.int32(nb))
        args += (np.int32(sx[b]), np.int32(sy[a]), int8_arg(bd, 1), int8_arg(bx, 0), int8_arg(by, 0))
        opts = [f"-D TILE={TILE}", f"-D NB={len(rest)}"]
        la = self.backend.launch(SOURCE, "transpose_tiled", opts, args, (nb, na, math.prod(bd)), (TILE, TILE, 1))
        limit = la.kernel.get_work_group_info(self.backend.cl.kernel_work_group_info.WORK_GROUP_SIZE, self.backend.runtime.device)
        if limit < TILE * TILE:
            return False
        la.set_local((TILE, TILE, 1))  # the kernel's tile needs exactly this group
        self.add(la)
        return True


@opencl_execution("Slice")
class Slice(family.SliceBase, OpenCLExecution):
    """One strided copy of the sliced index space."""


@opencl_execution("Concat")
class Concat(family.ConcatBase, OpenCLExecution):
    """One strided copy per input."""


@opencl_execution("Split")
class Split(family.SplitBase, OpenCLExecution):
    """One strided copy per output."""


@opencl_execution("Gather")
class Gather(family.GatherBase, OpenCLExecution):
    """Kernel ``gather``: X viewed as (pre, n, post), Y as (pre, indices, post)."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        axis, table = self.index_table(x)
        pre, post = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += tuple(np.int32(v) for v in (post, table.size, pre, x.shape[axis])) + (table.buffer,)
        self.enqueue(SOURCE, "gather", [], args, (post, table.size, pre))

"""Vulkan data movement: Reshape-likes (aliased, else one copy), Transpose, Slice, Concat, Split, Gather.

Every op here is a strided copy (``shaders/vulkan/movement.comp``, variant
``movement_strided``, ``VulkanExecution.strided``) over an index space whose dims are merged
where both sides stay contiguous; Transpose moves 32 x 32 tiles through shared memory
(``movement_transpose``) when the input's innermost axis moves and both tiled axes are long
enough; Gather with indices known at resize reads an int32 index table (``movement_gather``).
Values are copied bit for bit (float32). Shared rules and index spaces:
``backends/gpu/movement.py``.

Concat fills Y with one dispatch per 4 inputs (``movement_concat``): dispatches that write
one binding get a barrier between them from the recorder, so fewer dispatches keep the
copies of a Concat running together.
"""

from __future__ import annotations

import math
import struct

from mnnpy.backends.gpu import movement as family
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution

MAX_BATCH_RANK = 6  # movement_transpose's batch arrays
TILE = 32  # movement_transpose: TILE x TILE tiles, local (TILE, 8, 1)
MIN_TILED = 8  # both tiled dims at least this long, else the strided copy
CONCAT_INPUTS = 4  # inputs per dispatch of movement_concat


@vulkan_execution(*family.RESHAPES)
class Reshape(family.ReshapeBase, VulkanExecution):
    """Metadata-only: nothing runs where the planner aliased the output, else one copy."""

    variants = ("movement_strided",)  # the SPIR-V variants this Execution dispatches


@vulkan_execution("Transpose")
class Transpose(family.TransposeBase, VulkanExecution):
    """Transpose, rank up to 8 after merging: ``movement_strided``, or ``movement_transpose``."""

    variants = ("movement_strided", "movement_transpose")

    def tile(self, x, y, d, sx, sy) -> bool:
        """The tiled dispatch; False (nothing dispatched) when a tiled dim is short or the
        groups would not fit the device's limits."""
        a = sx.index(1)  # output axis read contiguously from X
        b = len(d) - 1  # output axis written contiguously to Y (sy[b] == 1)
        na, nb = d[a], d[b]
        rest = [k for k in range(len(d)) if k not in (a, b)]
        if na < MIN_TILED or nb < MIN_TILED or len(rest) > MAX_BATCH_RANK:
            return False
        limits = self.backend.runtime.limits
        gx, gy = -(-nb // TILE), -(-na // TILE)
        max_g, max_local = limits["maxComputeWorkGroupCount"], limits["maxComputeWorkGroupSize"]
        if gx > max_g[0] or gy > max_g[1] or max_local[1] < 8 or limits["maxComputeWorkGroupInvocations"] < TILE * 8:
            return False
        bd, bx, by = [d[k] for k in rest], [sx[k] for k in rest], [sy[k] for k in rest]
        batch = math.prod(bd)
        pad = [0] * (MAX_BATCH_RANK - len(rest))
        head = (self.elem_offset(x), self.elem_offset(y), na, nb, sx[b], sy[a], batch, len(rest))
        push = struct.pack("<6iIi18i", *head, *bd, *pad, *bx, *pad, *by, *pad)
        groups = (gx, gy, min(batch, max_g[2]))
        self.dispatch("movement_transpose", [x, y], (1,), push, y.size, groups=groups, local=(TILE, 8, 1))
        return True


@vulkan_execution("Slice")
class Slice(family.SliceBase, VulkanExecution):
    """One strided copy of the sliced index space."""

    variants = ("movement_strided",)


@vulkan_execution("Concat")
class Concat(family.ConcatBase, VulkanExecution):
    """``Y = concat(X_0..X_{k-1}, axis)``: Y viewed as (pre, A, post) rows; each dispatch of
    ``movement_concat`` fills the columns of up to ``CONCAT_INPUTS`` inputs (empty ones skipped)."""

    variants = ("movement_concat",)

    def prepare(self, inputs, outputs):
        y = outputs[0]
        if y.size == 0:
            return
        axis = self.attrs["axis"] % len(y.shape)
        pre, post = math.prod(y.shape[:axis]), math.prod(y.shape[axis + 1 :])
        parts = [(x, pos) for x, pos in family.slabs(inputs, axis) if x.size]
        for k in range(0, len(parts), CONCAT_INPUTS):
            self._chunk(parts[k : k + CONCAT_INPUTS], y, pre, post, y.shape[axis])

    def _chunk(self, parts, y, pre: int, post: int, total: int) -> None:
        cum, offs, rows = [], [], []
        width = 0
        for x, _ in parts:
            cum.append(width)
            offs.append(self.elem_offset(x))
            rows.append(x.size // pre)  # its part of a row: a_k * post
            width += x.size // pre
        pad = CONCAT_INPUTS - len(parts)
        cum += [width] * pad
        offs += [offs[0]] * pad
        rows += [rows[0]] * pad
        n = pre * width
        y_off = self.elem_offset(y) + parts[0][1] * post
        push = struct.pack("<16I", n, width, y_off, total * post, *cum, *offs, *rows)
        xs = [x for x, _ in parts] + [parts[0][0]] * pad
        self.dispatch("movement_concat", [*xs, y], (CONCAT_INPUTS,), push, n)


@vulkan_execution("Split")
class Split(family.SplitBase, VulkanExecution):
    """One strided copy per output."""

    variants = ("movement_strided",)


@vulkan_execution("Gather")
class Gather(family.GatherBase, VulkanExecution):
    """``movement_gather``: one output per invocation, read through the int32 index table."""

    variants = ("movement_gather",)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0:
            return
        axis, table = self.index_table(x)
        post = math.prod(x.shape[axis + 1 :])
        offsets = (self.elem_offset(x), self.elem_offset(table), self.elem_offset(y))
        push = struct.pack("<7I", y.size, *offsets, post, table.size, x.shape[axis])
        self.dispatch("movement_gather", [x, table, y], (2,), push, y.size)

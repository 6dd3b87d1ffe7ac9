"""Vulkan data movement: Reshape-likes (aliased, else one copy), Transpose, Slice, Concat, Split, Gather.

Every op here is a strided copy (``shaders/vulkan/movement.comp``, variant
``movement_strided``) over an index space whose dims are merged where both sides stay
contiguous (``collapse``); Transpose moves 32 x 32 tiles through shared memory
(``movement_transpose``) when the input's innermost axis moves and both tiled axes are long
enough; Gather with indices known at resize reads an int32 index table
(``movement_gather``). Values are copied bit for bit (float32). Rules: ONNX operators.md
#Reshape, #Flatten, #Squeeze, #Unsqueeze, #Identity, #Transpose, #Slice, #Concat, #Split,
#Gather.

Concat fills Y with one dispatch per 4 inputs (``movement_concat``): dispatches that write
one binding get a barrier between them from the recorder, so fewer dispatches keep the
copies of a Concat running together.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from mnnpy.backends.gpu.checks import gather_check, slice_check
from mnnpy.backends.gpu.layout import collapse, contiguous_strides, slice_ranges, transpose_geometry
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution
from mnnpy.ops import aliasing_ops

MAX_RANK = 8  # movement_strided's push-constant arrays
MAX_BATCH_RANK = 6  # movement_transpose's batch arrays
TILE = 32  # movement_transpose: TILE x TILE tiles, local (TILE, 8, 1)
MIN_TILED = 8  # both tiled dims at least this long, else the strided copy
VEC = 4  # innermost elements per invocation of the strided copy when its row is long
CONCAT_INPUTS = 4  # inputs per dispatch of movement_concat


def _float_data(info) -> tuple[bool, str]:
    x = info.inputs[0]
    if x.dtype != np.float32:
        return False, f"{info.type} of {x.dtype} data (Vulkan moves float32 only)"
    return True, ""


class Movement(VulkanExecution):
    """Base of the data-movement Executions: the strided copy."""

    variants = ("movement_strided",)  # the SPIR-V variants this Execution dispatches

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return _float_data(info)

    def strided(self, x, x_off: int, y, y_off: int, dims, xstr, ystr) -> None:
        """One dispatch copying ``x[x_off + sum i*xstr] -> y[y_off + sum i*ystr]`` over ``dims``
        (element offsets from the bindings' starts); nothing for an empty index space."""
        if any(int(d) == 0 for d in dims):
            return
        d, sx, sy = collapse(dims, xstr, ystr)
        if len(d) > MAX_RANK:
            raise ValueError(f"strided copy of rank {len(d)} after merging dims (max {MAX_RANK})")
        inner = d[-1]
        vec = VEC if inner >= 2 * VEC else 1
        chunks = -(-inner // vec)
        n = chunks * math.prod(d[:-1])
        pad = [0] * (MAX_RANK - len(d))
        push = struct.pack("<2I2i24i", n, chunks, x_off, y_off, *d, *pad, *sx, *pad, *sy, *pad)
        self.dispatch("movement_strided", [x, y], (1,), push, n, ((1, len(d)), (2, vec)))


@vulkan_execution(*aliasing_ops())
class Reshape(Movement):
    """Metadata-only on contiguous NCHW: output = input's elements under a new shape.

    When the memory planner gave the output the input's place (the backend's
    ``can_alias``), nothing runs; otherwise (e.g. the input is a graph constant) one copy."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        self.aliased = x.memory is y.memory and x.offset == y.offset
        if not self.aliased:
            self.strided(x, self.elem_offset(x), y, self.elem_offset(y), (y.size,), (1,), (1,))


def _perm(attrs, rank: int) -> list[int]:
    return [int(p) % rank for p in attrs["perm"]] if len(attrs["perm"]) else list(range(rank))[::-1]


@vulkan_execution("Transpose")
class Transpose(Movement):
    """``Y[i_0..] = X[i_perm^-1..]``, ``Y.shape[i] = X.shape[perm[i]]`` (reversed when ``perm``
    is empty); rank up to 8 after merging the dims that stay adjacent. Tiled through shared
    memory when the input's innermost axis is not the output's innermost."""

    variants = ("movement_strided", "movement_transpose")

    @staticmethod
    def check(info) -> tuple[bool, str]:
        ok, why = _float_data(info)
        if not ok:
            return ok, why
        shape = info.inputs[0].shape
        d, _, _ = transpose_geometry(shape, _perm(info.attrs, len(shape)))
        if len(d) > MAX_RANK:
            return False, f"transpose of rank {len(d)} after merging dims (Vulkan takes up to {MAX_RANK})"
        return True, ""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        d, sx, sy = transpose_geometry(x.shape, _perm(self.attrs, len(x.shape)))
        self.tiled = bool(y.size) and sx[-1] != 1 and len(d) >= 2 and self._tiled(x, y, d, sx, sy)
        if not self.tiled:
            self.strided(x, self.elem_offset(x), y, self.elem_offset(y), d, sx, sy)

    def _tiled(self, x, y, d, sx, sy) -> bool:
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
        push = struct.pack(
            "<6iIi18i",
            self.elem_offset(x),
            self.elem_offset(y),
            na,
            nb,
            sx[b],
            sy[a],
            batch,
            len(rest),
            *bd,
            *pad,
            *bx,
            *pad,
            *by,
            *pad,
        )
        groups = (gx, gy, min(batch, max_g[2]))
        self.dispatch("movement_transpose", [x, y], (1,), push, y.size, groups=groups, local=(TILE, 8, 1))
        return True


@vulkan_execution("Slice")
class Slice(Movement):
    """``Y = X[starts:ends:steps]`` on ``axes`` (negative steps too), values known at resize:
    one strided copy (negative strides)."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        ok, why = _float_data(info)
        if not ok:
            return ok, why
        return slice_check(info, "Vulkan")

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        infos = list(self.input_infos) + [None] * (5 - len(self.input_infos))
        sl = slice_ranges([None if i is None else i.value for i in infos[1:5]], x.shape)
        xs = contiguous_strides(x.shape)
        base = self.elem_offset(x) + sum(s * st for (s, _, _), st in zip(sl, xs))
        dims = [n for _, _, n in sl]
        xstr = [step * st for (_, step, _), st in zip(sl, xs)]
        self.strided(x, base, y, self.elem_offset(y), dims, xstr, contiguous_strides(y.shape))


@vulkan_execution("Concat")
class Concat(Movement):
    """``Y = concat(X_0..X_{k-1}, axis)``: Y viewed as (pre, A, post) rows; each dispatch of
    ``movement_concat`` fills the columns of up to ``CONCAT_INPUTS`` inputs (empty ones skipped)."""

    variants = ("movement_concat",)

    @staticmethod
    def check(info) -> tuple[bool, str]:
        bad = sorted({str(t.dtype) for t in info.present() if t.dtype != np.float32})
        if bad:
            return False, f"Concat of {', '.join(bad)} data (Vulkan moves float32 only)"
        return True, ""

    def prepare(self, inputs, outputs):
        y = outputs[0]
        if y.size == 0:
            return
        axis = self.attrs["axis"] % len(y.shape)
        pre, post = math.prod(y.shape[:axis]), math.prod(y.shape[axis + 1 :])
        parts, pos = [], 0  # (input, its first index along axis)
        for x in inputs:
            if x is not None and x.size:
                parts.append((x, pos))
            pos += 0 if x is None else x.shape[axis]
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
class Split(Movement):
    """``Y_k = X[..., o_k : o_k + n_k, ...]`` along ``axis``: one strided copy per output."""

    def prepare(self, inputs, outputs):
        x = inputs[0]
        axis = self.attrs["axis"] % len(x.shape)
        xs = contiguous_strides(x.shape)
        pos = 0
        for y in outputs:
            if y is None:
                continue
            off = self.elem_offset(x) + pos * xs[axis]
            self.strided(x, off, y, self.elem_offset(y), y.shape, xs, contiguous_strides(y.shape))
            pos += y.shape[axis]


@vulkan_execution("Gather")
class Gather(Movement):
    """``Y[a.., k.., b..] = X[a.., indices[k..], b..]`` along ``axis``, indices known at resize
    (negative ones counted from the end), read from an int32 table on the device."""

    variants = ("movement_gather",)

    @staticmethod
    def check(info) -> tuple[bool, str]:
        ok, why = _float_data(info)
        if not ok:
            return ok, why
        return gather_check(info, "Vulkan")

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if y.size == 0:
            return
        axis = self.attrs["axis"] % len(x.shape)
        n = x.shape[axis]
        idx = np.asarray(self.input_infos[1].value).reshape(-1).astype(np.int64)
        self.table = self.backend.constant(np.where(idx < 0, idx + n, idx).astype(np.int32))
        post = math.prod(x.shape[axis + 1 :])
        push = struct.pack(
            "<7I", y.size, self.elem_offset(x), self.elem_offset(self.table), self.elem_offset(y), post, idx.size, n
        )
        self.dispatch("movement_gather", [x, self.table, y], (2,), push, y.size)

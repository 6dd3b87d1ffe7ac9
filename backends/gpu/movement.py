"""Data-movement op family shared by the GPU backends: strided copies over merged index spaces.

Every op is one or more ``GPUExecution.strided`` copies (Transpose: a backend's tiled kernel
where the input's innermost axis moves; Gather: a backend's gather over an index table made
here). Values are copied exactly: float32 data (fp16 with fp16 storage), and for the ops that
are only strided copies (the Reshape-likes with Identity, Slice, Split) also int32, int64
and bool data (``COPY_DTYPES``). Rules: ONNX
operators.md #Reshape, #Flatten, #Squeeze, #Unsqueeze, #Identity, #Transpose, #Slice,
#Concat, #Split, #Gather.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from mnnpy.backends.gpu.checks import data_check, gather_check, slice_check
from mnnpy.backends.gpu.dtypes import ALL
from mnnpy.backends.gpu.execution import GPUExecution, checked_by
from mnnpy.backends.gpu.layout import contiguous_strides, slice_ranges, transpose_geometry
from mnnpy.ops import aliasing_ops

RESHAPES = aliasing_ops()  # the schemas' ``alias`` ops: metadata-only on NCHW
MAX_RANK = 8  # the strided copies' index arrays
COPY_DTYPES = ALL  # the data dtypes of the ops that are strided copies only
copy_check = partial(data_check, dtypes=COPY_DTYPES)


def concat_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)``: every input of a Concat float32."""
    bad = sorted({str(t.dtype) for t in info.present() if t.dtype != np.float32})
    if bad:
        return False, f"Concat of {', '.join(bad)} data ({backend} moves float32 only)"
    return True, ""


def transpose_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)``: at most ``MAX_RANK`` dims after merging."""
    shape = info.inputs[0].shape
    d, _, _ = transpose_geometry(shape, perm(info.attrs, len(shape)))
    if len(d) > MAX_RANK:
        return False, f"transpose of rank {len(d)} after merging dims ({backend} takes up to {MAX_RANK})"
    return True, ""


def perm(attrs, rank: int) -> list[int]:
    """Transpose's ``perm`` (negative axes counted from the end), reversed axes when empty."""
    return [int(p) % rank for p in attrs["perm"]] if len(attrs["perm"]) else list(range(rank))[::-1]


class ReshapeBase(GPUExecution):
    """Metadata-only on contiguous NCHW: output = input's elements under a new shape. When the
    planner gave the output the input's place (``Backend.can_alias``) nothing runs
    (``aliased``); otherwise (e.g. the input is a constant) one copy. Data of ``COPY_DTYPES``."""

    dtypes = COPY_DTYPES
    check = checked_by(copy_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        self.aliased = x.shares(y)
        if not self.aliased:
            self.strided(x, self.elem_offset(x), y, self.elem_offset(y), (y.size,), (1,), (1,))


class TransposeBase(GPUExecution):
    """``Y[i_0..] = X[i_perm^-1..]``, ``Y.shape[i] = X.shape[perm[i]]`` (reversed when ``perm`` is
    empty); dims that stay adjacent merged, up to ``MAX_RANK`` after. ``tiled`` (set at resize):
    whether the backend's tiled kernel runs (the input's innermost axis moves)."""

    check = checked_by(data_check, transpose_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        d, sx, sy = transpose_geometry(x.shape, perm(self.attrs, len(x.shape)))
        self.tiled = bool(y.size) and sx[-1] != 1 and len(d) >= 2 and self.tile(x, y, d, sx, sy)
        if not self.tiled:
            self.strided(x, self.elem_offset(x), y, self.elem_offset(y), d, sx, sy)

    def tile(self, x, y, d, sx, sy) -> bool:
        """The backend's tiled transpose of merged ``d`` (``sx[a] == 1`` for an ``a`` that is not
        the last, ``sy[-1] == 1``); False (nothing added) where it does not fit."""
        return False


class SliceBase(GPUExecution):
    """``Y = X[starts:ends:steps]`` on ``axes`` (numpy clamping = ONNX's; negative steps too),
    values known at resize: one strided copy (negative strides). Data of ``COPY_DTYPES``."""

    dtypes = COPY_DTYPES
    check = checked_by(copy_check, slice_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        infos = list(self.input_infos) + [None] * (5 - len(self.input_infos))
        sl = slice_ranges([None if i is None else i.value for i in infos[1:5]], x.shape)
        xs = contiguous_strides(x.shape)
        base = self.elem_offset(x) + sum(s * st for (s, _, _), st in zip(sl, xs))
        dims = [n for _, _, n in sl]
        xstr = [step * st for (_, step, _), st in zip(sl, xs)]
        self.strided(x, base, y, self.elem_offset(y), dims, xstr, contiguous_strides(y.shape))


def slabs(tensors, axis: int) -> list[tuple]:
    """``(tensor, first index along axis)`` of each present tensor of a Concat's inputs or a
    Split's outputs, in order."""
    out, pos = [], 0
    for t in tensors:
        if t is not None:
            out.append((t, pos))
            pos += t.shape[axis]
    return out


def copy_slabs(exe: GPUExecution, whole, parts, to_whole: bool) -> None:
    """One strided copy between each present tensor of ``parts`` and its slab of ``whole``
    along ``exe``'s ``axis``: part -> slab (Concat, ``to_whole``) or slab -> part (Split)."""
    axis = exe.attrs["axis"] % len(whole.shape)
    ws, w_off = contiguous_strides(whole.shape), exe.elem_offset(whole)
    for t, pos in slabs(parts, axis):
        slab, part = (whole, w_off + pos * ws[axis], ws), (t, exe.elem_offset(t), contiguous_strides(t.shape))
        (src, s_off, s_str), (dst, d_off, d_str) = (part, slab) if to_whole else (slab, part)
        exe.strided(src, s_off, dst, d_off, t.shape, s_str, d_str)


class ConcatBase(GPUExecution):
    """``Y = concat(X_0..X_{k-1}, axis)``, float32: one strided copy per input, into its slab of Y."""

    check = checked_by(concat_check)

    def prepare(self, inputs, outputs):
        copy_slabs(self, outputs[0], inputs, to_whole=True)


class SplitBase(GPUExecution):
    """``Y_k = X[..., o_k : o_k + n_k, ...]`` along ``axis``: one strided copy per output; data
    of ``COPY_DTYPES``."""

    dtypes = COPY_DTYPES
    check = checked_by(copy_check)

    def prepare(self, inputs, outputs):
        copy_slabs(self, inputs[0], outputs, to_whole=False)


class GatherBase(GPUExecution):
    """``Y[a.., k.., b..] = X[a.., indices[k..], b..]`` along ``axis``, indices known at resize
    (negative ones counted from the end) and in range."""

    check = checked_by(data_check, gather_check)

    def index_table(self, x):
        """``(axis, table)``: the normalised axis and the indices as a flat int32 device table
        (``table.size`` of them, each in ``[0, X.shape[axis])``), kept on ``self.table``."""
        axis = self.attrs["axis"] % len(x.shape)
        n = x.shape[axis]
        idx = np.asarray(self.input_infos[1].value).reshape(-1).astype(np.int64)
        self.table = self.backend.constant(np.where(idx < 0, idx + n, idx).astype(np.int32))
        return axis, self.table

"""OpenCL data movement: Reshape-likes (aliased, else one copy), Transpose, Slice, Concat, Split, Gather.

Every op here is a strided copy (``shaders/opencl/movement.cl`` kernel ``strided``) over an
index space whose dims are merged where both sides stay contiguous (``collapse``);
Transpose uses a local-memory tiled kernel when the input's innermost axis moves. Values
are copied exactly (fp32, or fp16 storage with ``precision="low"``). Rules: ONNX
operators.md #Reshape, #Flatten, #Squeeze, #Unsqueeze, #Identity, #Transpose, #Slice,
#Concat, #Split, #Gather (constant indices: a ``gather`` kernel with the index table).
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.gpu.checks import gather_check, slice_check
from mnnpy.backends.gpu.layout import collapse, contiguous_strides, slice_ranges, transpose_geometry
from mnnpy.backends.opencl.registry import opencl_execution
from mnnpy.ops import aliasing_ops

SOURCE = "movement.cl"
MAX_RANK = 8  # the int8 index decomposition of the kernels
TILE = 16  # transpose_tiled: TILE x TILE work-groups
MIN_TILED = 8  # both tiled dims at least this long, else the strided kernel
VEC_MIN = 8  # innermost run (elements) from which the strided copy moves 4 per work item


def _vec(values, fill: int) -> np.ndarray:
    """An ``int8`` kernel argument: ``values`` right-aligned, padded in front with ``fill``."""
    return np.array([fill] * (MAX_RANK - len(values)) + list(values), np.int32)


def _noop() -> None:
    pass


def strided_launch(backend, x, x_off: int, y, y_off: int, dims, xstr, ystr):
    """A ``Launch`` copying ``x[x_off + sum i*xstr] -> y[y_off + sum i*ystr]`` over ``dims``
    (element offsets; ``x``/``y`` are ``CLTensor``), or a no-op for an empty index space."""
    if any(int(d) == 0 for d in dims):
        return _noop
    d, sx, sy = collapse(dims, xstr, ystr)
    if len(d) > MAX_RANK:
        raise ValueError(f"strided copy of rank {len(d)} after merging dims (max {MAX_RANK})")
    inner, outer = d[-1], math.prod(d[:-1])
    args = (x.buffer, np.int32(x_off), y.buffer, np.int32(y_off), np.int32(inner), np.int32(outer))
    vecs = (_vec(d, 1), _vec(sx, 0), _vec(sy, 0))
    options, work = [f"-D RANK={len(d)}"], inner
    if sx[-1] == 1 and sy[-1] == 1 and inner >= VEC_MIN:
        options.append("-D VEC4")  # 4 consecutive elements per work item
        work = -(-inner // 4)
    return backend.launch(SOURCE, "strided", options, (*args, *vecs), (work, outer))


@opencl_execution(*aliasing_ops())
class Reshape(Execution):
    """Metadata-only on contiguous NCHW: output = input's bytes under a new shape.

    The memory planner normally gives the output the input's buffer and offset (the
    backend's ``can_alias``); then nothing runs. Otherwise (e.g. the input is a constant)
    one copy kernel, fixed at resize."""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        self.aliased = x.buffer == y.buffer and x.offset == y.offset
        if self.aliased:
            self.launch = _noop
        else:
            self.launch = strided_launch(self.backend, x, x.elem_offset, y, y.elem_offset, (y.size,), (1,), (1,))

    def on_execute(self, inputs, outputs):
        self.launch()


@opencl_execution("Transpose")
class Transpose(Execution):
    """``Y[i_0..] = X[i_perm^-1..]``, ``Y.shape[i] = X.shape[perm[i]]`` (reversed when ``perm``
    is empty); any rank, dims that stay adjacent merged. Tiled through local memory when
    the input's innermost axis is not the output's innermost."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        shape = info.inputs[0].shape
        perm = list(info.attrs["perm"]) or list(range(len(shape)))[::-1]
        d, _, _ = transpose_geometry(shape, perm)
        if len(d) > MAX_RANK:
            return False, f"transpose of rank {len(d)} after merging dims (OpenCL takes up to {MAX_RANK})"
        return True, ""

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        shape = x.shape
        perm = list(self.attrs["perm"]) or list(range(len(shape)))[::-1]
        xs = contiguous_strides(shape)
        d, sx, sy = collapse(y.shape, [xs[p] for p in perm], contiguous_strides(y.shape))
        self.launch = None
        if y.size and sx[-1] != 1 and len(d) >= 2:
            self.launch = self._tiled(x, y, d, sx, sy)
        if self.launch is None:
            self.launch = strided_launch(self.backend, x, x.elem_offset, y, y.elem_offset, d, sx, sy)

    def _tiled(self, x, y, d, sx, sy):
        """The tiled launch, or None when a tiled dim is short or the work-group would not fit."""
        a = sx.index(1)  # output axis read contiguously from X
        b = len(d) - 1  # output axis written contiguously to Y (sy[b] == 1)
        na, nb = d[a], d[b]
        if na < MIN_TILED or nb < MIN_TILED:
            return None
        rest = [k for k in range(len(d)) if k not in (a, b)]
        bd, bx, by = [d[k] for k in rest], [sx[k] for k in rest], [sy[k] for k in rest]
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset), np.int32(na), np.int32(nb))
        args += (np.int32(sx[b]), np.int32(sy[a]), _vec(bd, 1), _vec(bx, 0), _vec(by, 0))
        opts = [f"-D TILE={TILE}", f"-D NB={len(rest)}"]
        la = self.backend.launch(SOURCE, "transpose_tiled", opts, args, (nb, na, math.prod(bd)), (TILE, TILE, 1))
        limit = la.kernel.get_work_group_info(self.backend.cl.kernel_work_group_info.WORK_GROUP_SIZE, self.backend.runtime.device)
        if limit < TILE * TILE:
            return None
        la.set_local((TILE, TILE, 1))  # the kernel's tile needs exactly this group
        return la

    def on_execute(self, inputs, outputs):
        self.launch()


@opencl_execution("Slice")
class Slice(Execution):
    """``Y = X[starts:ends:steps]`` on ``axes`` (numpy clamping = ONNX's); starts/ends/axes/steps
    known at resize (negative steps too). One strided copy."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return slice_check(info, "OpenCL")

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        infos = self.input_infos + [None] * (5 - len(self.input_infos))
        vals = [None if i is None else i.value for i in infos[1:5]]
        sl = slice_ranges(vals, x.shape)
        xs = contiguous_strides(x.shape)
        base = x.elem_offset + sum(s * st for (s, _, _), st in zip(sl, xs))
        dims = [n for _, _, n in sl]
        xstr = [step * st for (_, step, _), st in zip(sl, xs)]
        self.launch = strided_launch(self.backend, x, base, y, y.elem_offset, dims, xstr, contiguous_strides(y.shape))

    def on_execute(self, inputs, outputs):
        self.launch()


@opencl_execution("Concat")
class Concat(Execution):
    """``Y = concat(X_0..X_{k-1}, axis)``: one strided copy per input, writing its slab of Y."""

    def on_resize(self, inputs, outputs):
        y = outputs[0]
        axis = self.attrs["axis"] % len(y.shape)
        ys = contiguous_strides(y.shape)
        self.launches, pos = [], 0
        for x in inputs:
            if x is None:
                continue
            off = y.elem_offset + pos * ys[axis]
            self.launches.append(strided_launch(self.backend, x, x.elem_offset, y, off, x.shape, contiguous_strides(x.shape), ys))
            pos += x.shape[axis]

    def on_execute(self, inputs, outputs):
        for la in self.launches:
            la()


@opencl_execution("Split")
class Split(Execution):
    """``Y_k = X[..., o_k : o_k + n_k, ...]`` along ``axis``: one strided copy per output."""

    def on_resize(self, inputs, outputs):
        x = inputs[0]
        axis = self.attrs["axis"] % len(x.shape)
        xs = contiguous_strides(x.shape)
        self.launches, pos = [], 0
        for y in outputs:
            if y is None:
                continue
            off = x.elem_offset + pos * xs[axis]
            self.launches.append(strided_launch(self.backend, x, off, y, y.elem_offset, y.shape, xs, contiguous_strides(y.shape)))
            pos += y.shape[axis]

    def on_execute(self, inputs, outputs):
        for la in self.launches:
            la()


@opencl_execution("Gather")
class Gather(Execution):
    """``Y[a.., k.., b..] = X[a.., indices[k..], b..]`` along ``axis`` with indices known at resize."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return gather_check(info, "OpenCL")

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        axis = self.attrs["axis"] % len(x.shape)
        n = x.shape[axis]
        idx = np.asarray(self.input_infos[1].value).reshape(-1).astype(np.int64)
        self.idx = self.backend.constant(np.where(idx < 0, idx + n, idx).astype(np.int32))
        pre, post = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += tuple(np.int32(v) for v in (post, idx.size, pre, n)) + (self.idx.buffer,)
        self.launch = self.backend.launch(SOURCE, "gather", [], args, (post, idx.size, pre))

    def on_execute(self, inputs, outputs):
        self.launch()

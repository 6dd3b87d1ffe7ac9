"""OpenCL reductions (ReduceXxx, ONNX operators.md, opset-18 form) and Softmax/LogSoftmax (opset-13 form).

Kernels: ``shaders/opencl/reduce.cl``. Every op is viewed as ``(outer, red, inner)``
(contiguous NCHW): one result per ``p < outer * inner`` from the ``red`` elements at stride
``inner``. ``rows_launch`` picks a work-group of ``P_N`` outputs times ``R_N`` reducing
items (local-memory tree combine) and builds the launch; it is shared by pooling and
LayerNormalization.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.gpu.pow2 import pow2_ceil, pow2_floor
from mnnpy.backends.gpu.reduce import REDUCE_OPS, ReduceBase, SoftmaxBase
from mnnpy.backends.opencl.execution import OpenCLExecution
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "reduce.cl"
GROUP_MAX = 256  # the kernels' local scratch (floats); a group holds at most this many items
TARGET_ITEMS = 1 << 17  # work items worth spreading a reduction over (an H200 keeps ~270k resident)
SECTOR = 8  # floats per 32-byte memory sector
CACHE_MAX = 16  # row elements a softmax/layernorm work item may keep in registers


def group_shape(p: int, red: int, inner: int = 1, group: int = GROUP_MAX) -> tuple[int, int]:
    """``(lp, lr)``: outputs per work-group and reducing items per output (powers of two,
    ``lp * lr <= group``). Reducing items are added while the outputs alone leave the
    device short of ``TARGET_ITEMS`` work items, up to the row length. Neighbouring work
    items read neighbouring elements in runs of at least ``SECTOR`` (a 32-byte memory
    sector) where the shape allows: along the row when ``inner == 1``, else across ``p``."""
    p, red = max(p, 1), max(red, 1)
    want = min(group, red, max(1, TARGET_ITEMS // p))
    if inner == 1:
        lr = pow2_floor(min(group, max(want, SECTOR if red >= SECTOR else 1)))
    else:
        lp0 = pow2_floor(min(SECTOR, inner, p))
        lr = pow2_floor(min(want, group // lp0))
    lp = pow2_floor(min(p, group // lr))
    return lp, lr


def rows_launch(backend, name: str, options, args, p: int, red: int, inner: int, cache: bool = False):
    """The ``Launch`` of ``reduce.cl`` kernel ``name`` over ``p`` outputs of ``red`` elements
    at stride ``inner`` (``-D ROW`` when ``inner == 1``); the group is capped by the kernel's
    work-group limit on this device. ``cache`` (softmax, layernorm): when a row fits in
    ``CACHE_MAX`` registers per item, widen the group to hold it (``-D CACHE=n``)."""
    base = [*options, "-D ROW"] if inner == 1 else list(options)
    group = GROUP_MAX
    for _ in range(3):  # a variant (register cache) may lower the kernel's work-group limit
        lp, lr = group_shape(p, red, inner, group)
        options = list(base)
        if cache and 0 < red <= CACHE_MAX * group:
            lr = max(lr, pow2_ceil(-(-red // CACHE_MAX)))
            lp = pow2_floor(min(max(p, 1), group // lr))
            options.append(f"-D CACHE={-(-red // lr)}")
        kernel = backend.kernel(SOURCE, name, options)
        limit = kernel.get_work_group_info(backend.cl.kernel_work_group_info.WORK_GROUP_SIZE, backend.runtime.device)
        if lp * lr <= limit:
            break
        group = pow2_floor(limit)
    work, local = ((lr, p), (lr, lp)) if inner == 1 else ((p, lr), (lp, lr))
    la = backend.launch(SOURCE, name, options, args, work, local)
    assert la.local == local, (la.local, local)  # one group along the reducing dimension
    return la


def split_count(p: int, red: int) -> int:
    """Chunks per row for a two-pass reduction: >1 only when few rows are very long (each of
    a full group's items would fold more than ``GROUP_MAX`` elements, and the rows alone
    leave the device short of ``TARGET_ITEMS`` work items)."""
    if red <= GROUP_MAX * GROUP_MAX or p * GROUP_MAX >= TARGET_ITEMS:
        return 1
    return max(2, min(-(-red // 4096), TARGET_ITEMS // (max(p, 1) * GROUP_MAX)))


def reduce_launches(backend, kind: str, x, y, outer: int, red: int, inner: int) -> tuple[list, object]:
    """``([launch, ...], scratch)`` of kernel ``reduce`` (``-D OP_<kind>``) from ``x`` (``outer,
    red, inner``) into ``y`` (``outer * inner``): one pass, or two through an fp32 scratch
    buffer of ``(outer, splits, inner)`` partial results (see ``split_count``)."""
    splits = 1 if kind == "LOGSUMEXP" else split_count(outer * inner, red)
    op = [f"-D OP_{kind}"]
    i32 = np.int32
    if splits == 1:
        args = (x.buffer, i32(x.elem_offset), y.buffer, i32(y.elem_offset), i32(outer * inner), i32(red), i32(inner))
        return [rows_launch(backend, "reduce", op, (*args, i32(1), i32(red), i32(red)), outer * inner, red, inner)], None
    chunk = -(-red // splits)
    splits = -(-red // chunk)
    parts = outer * splits * inner
    scratch = backend.scratch((parts,))
    args1 = (
        x.buffer,
        i32(x.elem_offset),
        scratch.buffer,
        i32(0),
        i32(parts),
        i32(red),
        i32(inner),
        i32(splits),
        i32(chunk),
        i32(red),
    )
    first = rows_launch(backend, "reduce", [*op, "-D NO_FINAL"], args1, parts, chunk, inner)
    args2 = (
        scratch.buffer,
        i32(0),
        y.buffer,
        i32(y.elem_offset),
        i32(outer * inner),
        i32(splits),
        i32(inner),
        i32(1),
        i32(splits),
    )
    second = rows_launch(backend, "reduce", [*op, "-D NO_MAP"], (*args2, i32(red)), outer * inner, splits, inner)
    return [first, second], scratch


class Reductions(OpenCLExecution):
    """The OpenCL side of the reduction family: ``reduce`` by ``reduce_launches``."""

    def reduce(self, kind: str, x, y, outer: int, red: int, inner: int) -> None:
        """The launches of ``reduce_launches`` for ``kind`` (a ``REDUCE_OPS`` value); a split's partial results kept in
        ``scratch``."""
        launches, self.scratch = reduce_launches(self.backend, kind.upper(), x, y, outer, red, inner)
        for la in launches:
            self.add(la)


@opencl_execution(*REDUCE_OPS)
class Reduce(ReduceBase, Reductions):
    """ReduceXxx (``ReduceBase``): one pass, or two for few very long rows."""


@opencl_execution("Softmax", "LogSoftmax")
class Softmax(SoftmaxBase, OpenCLExecution):
    """Softmax / LogSoftmax (``SoftmaxBase``): kernel ``softmax``, a row per group slice."""

    def softmax(self, x, y, outer: int, red: int, inner: int, log: bool) -> None:
        """Kernel ``softmax`` (``-D LOG`` for LogSoftmax), one row per group slice."""
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += (np.int32(outer * inner), np.int32(red), np.int32(inner))
        options = ["-D SOFTMAX"] + (["-D LOG"] if log else [])
        self.add(rows_launch(self.backend, "softmax", options, args, outer * inner, red, inner, cache=True))

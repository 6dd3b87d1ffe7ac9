"""Vulkan reductions (ReduceXxx, ONNX operators.md, opset-18 form with ``axes`` an input) and
Softmax / LogSoftmax (opset-13 form: one ``axis``, as the converter leaves them).

Shader: ``shaders/vulkan/reduce.comp`` (variants ``reduce_<op>``, ``softmax``,
``logsoftmax``; ``shaders/vulkan/manifest_reduce.json``). Every op is viewed as
``(outer, red, inner)`` of contiguous NCHW data: one result per ``p < outer * inner`` from the
``red`` elements at stride ``inner``. ``row_dispatch`` picks a work group of ``LP`` outputs
times ``LR`` reducing invocations (shared-memory tree combine) and asks for the dispatch; it
is shared by pooling (``pool.py``) and LayerNormalization (``norm.py``).
"""

from __future__ import annotations

import math
import struct

from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.pow2 import pow2_ceil, pow2_floor
from mnnpy.backends.gpu.reduce import REDUCE_OPS, ReduceBase, SoftmaxBase
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution

GROUP_MAX = 256  # reduce.comp's shared scratch (floats): a work group holds at most this many invocations
TARGET_ITEMS = 1 << 17  # invocations worth spreading a reduction over (an H200 keeps ~270k resident)
CACHE_MAX = 16  # row elements a Softmax/LayerNorm invocation may keep in registers
SPLIT_CHUNK = 2048  # elements per chunk of a split (two-pass) reduction, at least


def group_shape(p: int, red: int, inner: int = 1, group: int = GROUP_MAX) -> tuple[int, int]:
    """``(lp, lr)``: outputs per work group and reducing invocations per output, powers of two
    with ``lp * lr <= group``. Rows (``inner == 1``): up to a whole group per row, fewer
    (not under 32, a warp's coalesced read) once the rows alone give ``TARGET_ITEMS``
    invocations. Strided (``inner > 1``): up to 32 neighbouring inner positions per group
    (coalesced), the rest of the group along the row."""
    p, red = max(int(p), 1), max(int(red), 1)
    if inner == 1:
        lr = pow2_floor(min(group, red))
        while lr > 32 and p * lr > TARGET_ITEMS:
            lr //= 2
    else:
        lp = pow2_floor(min(32, inner, p))
        lr = pow2_floor(min(red, group // lp))
        while lr > 1 and p * lr > TARGET_ITEMS:
            lr //= 2
    lp = pow2_floor(min(p, group // lr))
    return lp, lr


def group_limit(backend) -> int:
    """The largest work group used here: ``GROUP_MAX`` within the device's limit."""
    return min(GROUP_MAX, pow2_floor(backend.runtime.limits["maxComputeWorkGroupInvocations"]))


def row_dispatch(exe: VulkanExecution, shader, bindings, writes, push: bytes, p, red, inner, spec=(), cache=False) -> None:
    """One dispatch of ``reduce.comp`` variant ``shader`` over ``p`` outputs of ``red`` elements
    at stride ``inner`` (``ROW`` when ``inner == 1``). ``cache`` (Softmax, LayerNorm): where a
    row fits in ``CACHE_MAX`` registers per invocation, widen the group to hold it. Sets
    ``exe.group = (lp, lr, cached)`` (the last dispatch's work-group shape)."""
    group = group_limit(exe.backend)
    lp, lr = group_shape(p, red, inner, group)
    use_cache, per = False, 1
    if cache and 0 < red <= CACHE_MAX * group:
        lr = max(lr, pow2_ceil(-(-red // CACHE_MAX)))
        lp = pow2_floor(min(max(p, 1), group // lr))
        use_cache, per = True, -(-red // lr)
    count = -(-max(int(p), 0) // lp)
    max_x = exe.backend.runtime.limits["maxComputeWorkGroupCount"][0]
    gx = max(1, min(count, max_x))
    groups = (gx, -(-count // gx), 1)
    exe.group = (lp, lr, use_cache)
    spec = ((1, lr), (2, inner == 1), (3, per), (4, use_cache), *spec)
    exe.dispatch(shader, bindings, writes, push, p, spec, groups=groups, local=(lp * lr, 1, 1))


def split_count(p: int, red: int, group: int = GROUP_MAX) -> int:
    """Chunks per row for a two-pass reduction: more than one only when few rows are long
    (the rows alone leave the device short of ``TARGET_ITEMS`` invocations)."""
    if red < 2 * SPLIT_CHUNK or max(p, 1) * group >= TARGET_ITEMS:
        return 1
    return max(2, min(red // SPLIT_CHUNK, TARGET_ITEMS // (max(p, 1) * group)))


def reduce_dispatches(exe: VulkanExecution, kind: str, x, y, outer: int, red: int, inner: int) -> int:
    """Dispatches of ``reduce_<kind>`` from ``x`` (``outer, red, inner``) into ``y`` (``outer *
    inner`` results): one pass, or two through a float32 scratch of ``(outer, splits, inner)``
    partial results (see ``split_count``). Returns the number of dispatches."""
    shader = f"reduce_{kind}"
    p = outer * inner
    splits = 1 if kind == "logsumexp" else split_count(p, red, group_limit(exe.backend))
    xo, yo = exe.elem_offset(x), exe.elem_offset(y)
    if splits == 1:
        push = struct.pack("<8I", xo, yo, p, red, inner, 1, red, red)
        row_dispatch(exe, shader, [x, y], (1,), push, p, red, inner)
        return 1
    chunk = -(-red // splits)
    splits = -(-red // chunk)
    parts = outer * splits * inner
    exe.scratch = exe.backend.scratch((parts,))  # partial results, written by pass 1
    so = exe.elem_offset(exe.scratch)
    push1 = struct.pack("<8I", xo, so, parts, red, inner, splits, chunk, red)
    row_dispatch(exe, shader, [x, exe.scratch], (1,), push1, parts, chunk, inner, spec=((6, False),))
    push2 = struct.pack("<8I", so, yo, p, splits, inner, 1, splits, red)
    row_dispatch(exe, shader, [exe.scratch, y], (1,), push2, p, splits, inner, spec=((5, False),))
    return 2


class Reductions(VulkanExecution):
    """The Vulkan side of the reduction family: ``reduce`` by ``reduce_dispatches`` (``passes``:
    how many; ``scratch``: a split reduction's partial results)."""

    def reduce(self, kind: str, x, y, outer: int, red: int, inner: int) -> None:
        """``reduce_dispatches`` of ``reduce_<kind>``; sets ``passes`` (1 or 2) and ``scratch``."""
        self.scratch = None
        self.passes = reduce_dispatches(self, kind, x, y, outer, red, inner)


@vulkan_execution(*REDUCE_OPS)
class Reduce(ReduceBase, Reductions):
    """ReduceXxx (``ReduceBase``): one pass, or two for few very long rows."""

    variants = tuple(f"reduce_{kind}" for kind in REDUCE_OPS.values())


MAX_ROW = 1 << 22  # elements of one Softmax/LayerNorm row: rows of 6M gave wrong sums on lavapipe


def row_check(info, backend: str) -> tuple[bool, str]:
    """Rows (Softmax's ``axis``, LayerNormalization's ``axis..``) longer than ``MAX_ROW`` go to
    the CPU (the row shaders' results were wrong past ~5.5M)."""
    shape = info.inputs[0].shape
    length = 1
    if shape:
        axis = info.attrs["axis"] % len(shape)
        length = math.prod(shape[axis:]) if info.type == "LayerNormalization" else shape[axis]
    if length > MAX_ROW:
        return False, f"{info.type} row of {length} elements ({backend} takes up to {MAX_ROW})"
    return True, ""


@vulkan_execution("Softmax", "LogSoftmax")
class Softmax(SoftmaxBase, VulkanExecution):
    """Softmax / LogSoftmax (``SoftmaxBase``): variants ``softmax``, ``logsoftmax``, a row per
    group slice (numerically stable; NaN and infinities as numpy gives them)."""

    variants = ("softmax", "logsoftmax")
    check = checked_by(row_check)

    def softmax(self, x, y, outer: int, red: int, inner: int, log: bool) -> None:
        """``row_dispatch`` of ``softmax`` or ``logsoftmax``, a row per group slice."""
        push = struct.pack("<5I", self.elem_offset(x), self.elem_offset(y), outer * inner, red, inner)
        row_dispatch(self, "logsoftmax" if log else "softmax", [x, y], (1,), push, outer * inner, red, inner, cache=True)

"""Vulkan MatMul and Gemm (ONNX operators.md #MatMul, #Gemm) on one tiled GEMM shader (float32).

Shader: ``shaders/vulkan/gemm.comp``, variants ``gemm_nn``, ``gemm_nt``, ``gemm_tn``,
``gemm_tt`` (transposed A and/or B read in place), listed in
``shaders/vulkan/manifest_gemm.json``. ``gemm_dispatch`` is shared with the 1x1 Conv
(``conv.py``): the C term, the batch table, alpha/beta and the fused activation are
specialization constants, sizes/offsets/strides push constants. Everything is fixed at
resize (one dispatch per op); nothing runs per op at run time.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np

from mnnpy.backends.gpu.gemm import GemmBase, MatMulBase
from mnnpy.backends.gpu.gemm_geometry import GemmProblem, gemv_shape, matmul_geometry
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution
from mnnpy.ops.activation import fused_code

RM = RN = 4  # outputs per invocation along rows / columns (gemm.comp)
MAX_GROUPS = 65535  # the smallest maxComputeWorkGroupCount the Vulkan specification allows
SMALL_GRID = 128  # fewer 64 x 64 tiles than this: 32 x 32 tiles


def act_spec(kind: str | None, params: Sequence[float] = ()) -> tuple[tuple[int, int | float], ...]:
    """Specialization constants 1 (ACT), 2, 3 (its scalars: Clip min, max; LeakyRelu alpha;
    HardSigmoid alpha, beta) for a fused activation. ``KeyError`` for an unknown kind."""
    p = [float(v) for v in params] + [0.0, 0.0]
    return (1, fused_code(kind)), (2, p[0]), (3, p[1])


def tile_config(m: int, n: int, batch: int = 1) -> tuple[int, int]:
    """Work-group size ``(LX, LY)`` for ``batch`` ``m x n`` outputs; a group covers
    ``(LY*RM) x (LX*RN)``: 64 x 64 tiles; thinner ones when m or n is small; 32 x 32 when
    64 x 64 tiles would give fewer than ``SMALL_GRID`` work groups (more groups in flight on
    a big GPU). Shared memory ``TK * (TM + TN + 2)`` floats stays within the 16 KiB every
    device has (at most 9 KiB here)."""
    if m <= 8:
        return 32, 2  # GEMV-like (classifier heads, 1-D operands): an 8 x 128 strip
    if m <= 16:
        return 32, 4  # 16 x 128
    if n <= 32:
        return 8, 16  # 64 x 32
    if math.ceil(m / 64) * math.ceil(n / 64) * batch < SMALL_GRID:
        return 8, 8  # 32 x 32
    return 16, 16


def grid(m: int, n: int, batch: int) -> tuple[int, int, int]:
    """Work groups ``(x, y, z)`` of a GEMM of ``batch`` ``m x n`` outputs."""
    lx, ly = tile_config(m, n, batch)
    return math.ceil(n / (lx * RN)), math.ceil(m / (ly * RM)), batch


def grid_fits(m: int, n: int, batch: int) -> tuple[bool, str]:
    """Whether the GEMM's work-group counts are within the limits every device has."""
    g = grid(m, n, batch)
    if max(g) > MAX_GROUPS:
        return False, f"GEMM of {batch} x ({m} x {n}) needs {g} work groups (Vulkan takes up to {MAX_GROUPS} per dimension)"
    return True, ""


def gemm_dispatch(
    exe: VulkanExecution, a, b, y, p: GemmProblem, c=None, table=None, act: tuple[str, Sequence[float]] = ("", ())
) -> None:
    """The dispatches of ``Y[b] = ACT(alpha * A[b] @ B[b] + beta * C)`` for problem ``p``: one,
    or split-K's two (``split_k``).

    ``a``, ``b``, ``y``, ``c``: ``VkTensor`` (``c`` None: no C term); ``table``: a device uint32
    ``(batch, 2)`` array of A/B element offsets used instead of their strides; ``act``: fused
    activation ``(kind, params)`` (``act_spec``)."""
    m, n, k, batch, strides = p.m, p.n, p.k, p.batch, p.strides
    lx, ly = tile_config(m, n, batch)
    cc = a if c is None else c  # unused bindings point at A
    tt = a if table is None else table
    eo = exe.elem_offset
    push = struct.pack("<16I", eo(a), eo(b), eo(cc), eo(tt), eo(y), *p.ints)
    spec = (*act_spec(*act), (4, c is not None), (5, table is not None), (6, float(p.alpha)), (7, float(p.beta)))
    name = f"gemm_{'t' if p.trans_a else 'n'}{'t' if p.trans_b else 'n'}"
    if use_gemv(m, n, k, batch, p.trans_a, p.trans_b):
        exe.dispatch("gemm_gemv", [a, b, cc, tt, y], (4,), push, m * n, spec=spec, groups=(n, m, 1), local=(GEMV_LOCAL, 1, 1))
        return
    gx, gy, gz = grid(m, n, batch)
    split = split_k(gx * gy * gz, k)
    if split == 1:
        exe.dispatch(name, [a, b, cc, tt, y], (4,), push, m * n * batch, spec=spec, groups=(gx, gy, gz), local=(lx, ly, 1))
        return
    # split-K: float32 partial products of the K slices, then their sum with alpha, C and the activation
    parts = exe.backend.scratch((batch, split, m, n))
    p1 = struct.pack("<16I", eo(a), eo(b), eo(cc), eo(tt), eo(parts), *p.ints)
    spec = (*spec, (18, split))
    groups = (gx, gy, gz * split)
    exe.dispatch(name, [a, b, cc, tt, parts], (4,), p1, m * n * batch, spec=spec, groups=groups, local=(lx, ly, 1))
    p2 = struct.pack("<16I", eo(parts), 0, eo(cc), 0, eo(y), m, n, k, 0, 0, p.ldy, 0, batch * m * n, strides[2], *p.c_strides)
    exe.dispatch("gemm_splitk", [parts, parts, cc, parts, y], (4,), p2, batch * m * n, spec=spec)


SPLIT_TARGET = 256  # work groups a GEMM should have (a big GPU runs over a hundred at once)
SPLIT_MIN_K = 128  # K per slice at least (8 steps of the K tile)
SPLIT_MAX = 16


def split_k(groups: int, k: int) -> int:
    """Slices of K for a GEMM of ``groups`` work groups: 1, or enough to reach about
    ``SPLIT_TARGET`` groups with at least ``SPLIT_MIN_K`` of K each (at most ``SPLIT_MAX``).
    Few groups over a long K (the 1x1 convolutions of 7x7 and 14x14 maps, MatMul of few rows)
    otherwise leave most of a big GPU idle."""
    if groups == 0 or groups >= SPLIT_TARGET:
        return 1
    return max(1, min(SPLIT_MAX, -(-SPLIT_TARGET // groups), k // SPLIT_MIN_K))


GEMV_LOCAL = 64  # invocations per output in gemm.comp's GEMV (a power of two)


def use_gemv(m: int, n: int, k: int, batch: int, trans_a: bool, trans_b: bool) -> bool:
    """Whether a GEMM runs on the GEMV shader: ``gemv_shape`` (few rows, B stored (N, K), one
    batch, K of a group or more), with N within the group-count limit (one group per output)."""
    return gemv_shape(m, k, batch, trans_a, trans_b, GEMV_LOCAL) and n <= MAX_GROUPS


# manifest_gemm.json: transposes of A, B; GEMV; split-K's second pass
GEMM_VARIANTS = ("gemm_nn", "gemm_nt", "gemm_tn", "gemm_tt", "gemm_gemv", "gemm_splitk")


class _Gemm(VulkanExecution):
    """The Vulkan side of MatMul/Gemm: ``gemm_dispatch``."""

    variants = GEMM_VARIANTS
    table_dtype = np.uint32

    def gemm(self, a, b, y, p: GemmProblem, c=None, table=None) -> None:
        """``gemm_dispatch`` of problem ``p``."""
        gemm_dispatch(self, a, b, y, p, c=c, table=table)


@vulkan_execution("MatMul")
class MatMul(MatMulBase, _Gemm):
    """numpy.matmul on the tiled GEMM shader (``MatMulBase``): one dispatch over the output
    batches, work groups within the device's limits."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        """Two operands of rank >= 1; work groups within the device's limits (``grid_fits``)."""
        inputs = info.inputs
        if len(inputs) != 2 or any(len(t.shape) == 0 for t in inputs):
            return False, "MatMul needs two operands of rank >= 1"
        m, n, _, batch, _, _ = matmul_geometry(inputs[0].shape, inputs[1].shape)
        return grid_fits(m, n, batch)


@vulkan_execution("Gemm")
class Gemm(GemmBase, _Gemm):
    """ONNX Gemm on the tiled GEMM shader (``GemmBase``), work groups within the device's limits."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        """2-D operands; work groups within the device's limits (``grid_fits``)."""
        a, b, attrs = info.inputs[0], info.inputs[1], info.attrs
        if len(a.shape) != 2 or len(b.shape) != 2:
            return False, "Gemm with operands that are not 2-D"
        m = a.shape[1] if attrs.get("transA") else a.shape[0]
        n = b.shape[0] if attrs.get("transB") else b.shape[1]
        return grid_fits(m, n, 1)

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

from mnnpy.backends.gpu.gemm_geometry import gemm_problem, gemv_shape, matmul_batch, matmul_geometry
from mnnpy.backends.vulkan.execution import VulkanExecution
from mnnpy.backends.vulkan.registry import vulkan_execution
from mnnpy.ops.activation import fused_code

RM = RN = 4  # outputs per invocation along rows / columns (gemm.comp)
MAX_GROUPS = 65535  # the smallest maxComputeWorkGroupCount the Vulkan specification allows
SMALL_GRID = 128  # fewer 64 x 64 tiles than this: 32 x 32 tiles


def act_spec(kind: str | None, params: Sequence[float] = ()) -> tuple[tuple[int, int | float], ...]:
    """Specialization constants 1 (ACT: ``fused_code``, the code of the generated
    ``activation.glsl``), 2, 3 (its scalars: Clip min, max; LeakyRelu alpha; HardSigmoid
    alpha, beta) for Conv's fused activation. ``KeyError`` for one Conv cannot fuse."""
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
    exe: VulkanExecution,
    a,
    b,
    y,
    m: int,
    n: int,
    k: int,
    *,
    lda: int,
    ldb: int,
    ldy: int,
    batch: int = 1,
    strides: tuple[int, int, int] = (0, 0, 0),
    table=None,
    trans_a: bool = False,
    trans_b: bool = False,
    c=None,
    c_strides: tuple[int, int] = (0, 0),
    alpha: float = 1.0,
    beta: float = 1.0,
    act: tuple[str, Sequence[float]] = ("", ()),
) -> None:
    """One dispatch of ``Y[b] = ACT(alpha * A[b] @ B[b] + beta * C)`` over ``batch`` matrices.

    ``a``, ``b``, ``y``, ``c``: ``VkTensor`` (``c`` None: no C term); A is ``(m, k)`` (stored
    ``(k, m)`` when ``trans_a``), B ``(k, n)`` (``(n, k)`` when ``trans_b``), Y ``(m, n)``, with
    leading dimensions ``lda``, ``ldb``, ``ldy``. ``strides``: per-batch element strides of
    A, B, Y; ``table``: a device uint32 ``(batch, 2)`` array of A/B element offsets used
    instead of their strides. ``c_strides``: C's element strides along rows and columns (0
    where broadcast). ``act``: fused activation ``(kind, params)`` (``act_spec``)."""
    lx, ly = tile_config(m, n, batch)
    cc = a if c is None else c  # unused bindings point at A
    tt = a if table is None else table
    eo = exe.elem_offset
    push = struct.pack("<16I", eo(a), eo(b), eo(cc), eo(tt), eo(y), m, n, k, lda, ldb, ldy, *strides, *c_strides)
    spec = (*act_spec(*act), (4, c is not None), (5, table is not None), (6, float(alpha)), (7, float(beta)))
    name = f"gemm_{'t' if trans_a else 'n'}{'t' if trans_b else 'n'}"
    if use_gemv(m, n, k, batch, trans_a, trans_b):
        exe.dispatch("gemm_gemv", [a, b, cc, tt, y], (4,), push, m * n, spec=spec, groups=(n, m, 1), local=(GEMV_LOCAL, 1, 1))
        return
    gx, gy, gz = grid(m, n, batch)
    split = split_k(gx * gy * gz, k)
    if split == 1:
        exe.dispatch(name, [a, b, cc, tt, y], (4,), push, m * n * batch, spec=spec, groups=(gx, gy, gz), local=(lx, ly, 1))
        return
    # split-K: float32 partial products of the K slices, then their sum with alpha, C and the activation
    parts = exe.backend.scratch((batch, split, m, n))
    p1 = struct.pack("<16I", eo(a), eo(b), eo(cc), eo(tt), eo(parts), m, n, k, lda, ldb, ldy, *strides, *c_strides)
    spec = (*spec, (18, split))
    groups = (gx, gy, gz * split)
    exe.dispatch(name, [a, b, cc, tt, parts], (4,), p1, m * n * batch, spec=spec, groups=groups, local=(lx, ly, 1))
    p2 = struct.pack("<16I", eo(parts), 0, eo(cc), 0, eo(y), m, n, k, 0, 0, ldy, 0, batch * m * n, strides[2], *c_strides)
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


@vulkan_execution("MatMul")
class MatMul(VulkanExecution):
    """``Y = A @ B`` (numpy.matmul: 1-D operands promoted then dropped, batch dims broadcast), float32.

    A: (..., M, K), B: (..., K, N) -> Y: (..., M, N). When B has no batch, A's batch folds into
    M: one (batch*M, K) x (K, N) GEMM. Otherwise one dispatch over the output batches, A and B
    read at a stride per batch (0 where broadcast), or through a table of offsets for
    general broadcasts."""

    variants = GEMM_VARIANTS

    @staticmethod
    def check(info) -> tuple[bool, str]:
        inputs = info.inputs
        if len(inputs) != 2 or any(len(t.shape) == 0 for t in inputs):
            return False, "MatMul needs two operands of rank >= 1"
        m, n, _, batch, _, _ = matmul_geometry(inputs[0].shape, inputs[1].shape)
        return grid_fits(m, n, batch)

    def prepare(self, inputs, outputs):
        a, b = inputs[:2]
        y = outputs[0]
        m, n, k, nb, aoff, boff = matmul_geometry(a.shape, b.shape)
        strides, offsets = matmul_batch(m, n, k, nb, aoff, boff)
        table = None if offsets is None else self.backend.constant(offsets.astype(np.uint32))
        gemm_dispatch(self, a, b, y, m, n, k, lda=k, ldb=n, ldy=n, batch=nb, strides=strides, table=table)


@vulkan_execution("Gemm")
class Gemm(VulkanExecution):
    """``Y = alpha * A' @ B' + beta * C`` (A' = A.T if transA, B' = B.T if transB), float32.

    A: (M, K) or (K, M); B: (K, N) or (N, K); C (optional) unidirectionally broadcast to
    (M, N): (), (1,), (N,), (1, N), (M, 1), (M, N). Transposes are read in place; C through
    row/column strides (0 where broadcast); beta == 0 drops C."""

    variants = GEMM_VARIANTS

    @staticmethod
    def check(info) -> tuple[bool, str]:
        a, b, attrs = info.inputs[0], info.inputs[1], info.attrs
        if len(a.shape) != 2 or len(b.shape) != 2:
            return False, "Gemm with operands that are not 2-D"
        m = a.shape[1] if attrs.get("transA") else a.shape[0]
        n = b.shape[0] if attrs.get("transB") else b.shape[1]
        return grid_fits(m, n, 1)

    def prepare(self, inputs, outputs):
        a, b = inputs[:2]
        y = outputs[0]
        beta = float(self.attrs["beta"])
        c = inputs[2] if len(inputs) > 2 and inputs[2] is not None and beta != 0.0 else None
        mnk, kw = gemm_problem(self.attrs, a.shape, b.shape, y.shape, None if c is None else c.shape)
        gemm_dispatch(self, a, b, y, *mnk, c=c, **kw)

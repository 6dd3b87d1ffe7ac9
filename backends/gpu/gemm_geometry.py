"""MatMul / Gemm geometry shared by the GPU backends' GEMM kernels.

A ``GemmProblem`` is what both backends' GEMM launchers take: sizes, leading dimensions,
batch strides, transposes, C's broadcast strides, alpha and beta. numpy.matmul batch
broadcasting (ONNX operators.md #MatMul) as per-batch element offsets or strides of A and B,
and Gemm's C broadcast strides (#Gemm). Used by ``backends/gpu/gemm.py``,
``backends/opencl/gemm.py`` and ``backends/vulkan/gemm.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class GemmProblem:
    """``Y[b] = alpha * A[b] @ B[b] + beta * C`` for ``b < batch``: A ``(m, k)`` (stored ``(k, m)``
    when ``trans_a``), B ``(k, n)`` (``(n, k)`` when ``trans_b``), Y ``(m, n)``, with leading
    dimensions ``lda``, ``ldb``, ``ldy`` (elements); ``strides``: per-batch element strides of
    A, B, Y; ``c_strides``: C's element strides along Y's rows and columns (0 where broadcast)."""

    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldy: int
    batch: int = 1
    strides: tuple[int, int, int] = (0, 0, 0)
    trans_a: bool = False
    trans_b: bool = False
    c_strides: tuple[int, int] = (0, 0)
    alpha: float = 1.0
    beta: float = 1.0

    @property
    def ints(self) -> tuple[int, ...]:
        """``(m, n, k, lda, ldb, ldy, A, B, Y batch strides, C row, column strides)``: the
        integer arguments of both backends' GEMM kernels, in their order."""
        return (self.m, self.n, self.k, self.lda, self.ldb, self.ldy, *self.strides, *self.c_strides)


def batch_offsets(batch: tuple[int, ...], shape: tuple[int, ...], size: int) -> np.ndarray:
    """Element offsets of each of ``batch``'s matrices in an operand with batch dims ``shape``
    (numpy broadcasting) and ``size`` elements per matrix; int64 ``(prod(batch),)``."""
    idx = np.arange(math.prod(shape), dtype=np.int64).reshape((1,) * (len(batch) - len(shape)) + tuple(shape))
    return np.broadcast_to(idx, batch).ravel() * size


def batch_stride(offs: np.ndarray, size: int) -> int | None:
    """0 when every offset is 0, ``size`` when they are ``b * size``, else None (needs a table)."""
    if not offs.any():
        return 0
    return size if np.array_equal(offs, np.arange(offs.size) * size) else None


def matmul_geometry(ashape, bshape):
    """``(m, n, k, batch, a_offsets, b_offsets)`` of numpy.matmul; 1-D operands promoted
    (A ``(K,)`` -> ``(1, K)``, B ``(K,)`` -> ``(K, 1)``). When B has no batch (2-D or leading
    ones), A's batch folds into m (its rows are contiguous), batch is 1 and the offsets None."""
    a2 = (1, *ashape) if len(ashape) == 1 else tuple(ashape)
    b2 = (*bshape, 1) if len(bshape) == 1 else tuple(bshape)
    m, k, n = a2[-2], a2[-1], b2[-1]
    abatch, bbatch = a2[:-2], b2[:-2]
    if math.prod(bbatch) == 1:
        return m * math.prod(abatch), n, k, 1, None, None
    batch = np.broadcast_shapes(abatch, bbatch)
    return m, n, k, math.prod(batch), batch_offsets(batch, abatch, m * k), batch_offsets(batch, bbatch, k * n)


def matmul_batch(m: int, n: int, k: int, nb: int, aoff, boff):
    """``(strides, offsets)`` of a MatMul's batches from ``matmul_geometry``: per-batch element
    strides ``(A, B, Y)``, or, when A's or B's offsets are no single stride, ``offsets``
    int64 ``(nb, 2)`` (A, B) for a device table (``strides`` then ``(0, 0, m * n)``)."""
    strides = (0, 0, m * n)
    if nb > 1:
        simple = (batch_stride(aoff, m * k), batch_stride(boff, k * n))
        if None in simple:
            return strides, np.stack([aoff, boff], axis=1)
        strides = (simple[0], simple[1], m * n)
    return strides, None


def gemm_c_strides(c_shape) -> tuple[int, int]:
    """Element strides of Gemm's C along the rows and columns of Y ``(M, N)`` (0 where C,
    of shape (), (N,), (1, N), (M, 1) or (M, N), is broadcast)."""
    cs = (1,) * (2 - len(c_shape)) + tuple(c_shape)
    return cs[1] if cs[0] != 1 else 0, 1 if cs[1] != 1 else 0


def gemm_problem(attrs, a_shape, b_shape, y_shape, c_shape=None) -> GemmProblem:
    """ONNX Gemm ``Y = alpha * A' @ B' + beta * C``: A ``(M, K)`` or ``(K, M)`` (transA), B
    ``(K, N)`` or ``(N, K)`` (transB), Y ``(M, N)``; C's strides from ``c_shape`` (None: no C term)."""
    ta, tb = bool(attrs["transA"]), bool(attrs["transB"])
    m, n = y_shape
    k = a_shape[0] if ta else a_shape[1]
    c_strides = (0, 0) if c_shape is None else gemm_c_strides(c_shape)
    alpha, beta = float(attrs["alpha"]), float(attrs["beta"])
    return GemmProblem(m, n, k, a_shape[1], b_shape[1], n, trans_a=ta, trans_b=tb, c_strides=c_strides, alpha=alpha, beta=beta)


def matmul_problem(a_shape, b_shape) -> tuple[GemmProblem, np.ndarray | None]:
    """numpy.matmul of A ``(..., M, K)`` and B ``(..., K, N)`` (``matmul_geometry``,
    ``matmul_batch``): the problem and, for general broadcasts, the int64 ``(batch, 2)`` A/B
    offsets for a device table (None when strides do)."""
    m, n, k, nb, aoff, boff = matmul_geometry(a_shape, b_shape)
    strides, offsets = matmul_batch(m, n, k, nb, aoff, boff)
    return GemmProblem(m, n, k, k, n, n, batch=nb, strides=strides), offsets


def pointwise_conv_problem(x_shape, m: int) -> GemmProblem:
    """A 1x1 stride-1 unpadded group-1 Conv as a batched GEMM: ``Y[n] (M, H*W) = W (M, C) @
    X[n] (C, H*W) + B`` (B broadcast along H*W: the C term), ``X: (N, C, H, W)``."""
    n, c, h, w = x_shape
    hw = h * w
    return GemmProblem(m, hw, c, c, hw, hw, batch=n, strides=(0, c * hw, m * hw), c_strides=(1, 0))


GEMV_ROWS = 8  # at most this many rows of Y: classifier heads and 1-D operands


def gemv_shape(m: int, k: int, batch: int, trans_a: bool, trans_b: bool, group: int) -> bool:
    """Whether a GEMM has the shape both GPU backends' GEMV kernels take: at most
    ``GEMV_ROWS`` rows, B stored (N, K) (Gemm with transB=1: every output a dot product of
    two contiguous rows), one batch, and K at least one work group (``group`` items) long.
    The tiled kernels would run ceil(N / 128) work groups, each looping over all of K (8 for a
    1000-class head: most of a big GPU idle)."""
    return m <= GEMV_ROWS and trans_b and not trans_a and batch == 1 and k >= group

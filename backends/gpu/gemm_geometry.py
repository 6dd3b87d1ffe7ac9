"""MatMul / Gemm geometry shared by the GPU backends' GEMM kernels.

numpy.matmul batch broadcasting (ONNX operators.md #MatMul) as per-batch element offsets
or strides of A and B, and Gemm's C broadcast strides (#Gemm). Used by
``backends/opencl/gemm.py`` and ``backends/vulkan/gemm.py``.
"""

from __future__ import annotations

import math

import numpy as np


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


def gemm_problem(attrs, a_shape, b_shape, y_shape, c_shape=None) -> tuple[tuple[int, int, int], dict]:
    """``((m, n, k), keywords)`` of ONNX Gemm ``Y = alpha * A' @ B' + beta * C`` for the
    backend's GEMM call: A ``(M, K)`` or ``(K, M)`` (transA), B ``(K, N)`` or ``(N, K)``
    (transB), Y ``(M, N)``; leading dims, transposes, alpha, beta and C's strides
    (``c_shape`` None: no C term)."""
    ta, tb = bool(attrs["transA"]), bool(attrs["transB"])
    m, n = y_shape
    k = a_shape[0] if ta else a_shape[1]
    kw = dict(lda=a_shape[1], ldb=b_shape[1], ldy=n, trans_a=ta, trans_b=tb)
    kw.update(c_strides=(0, 0) if c_shape is None else gemm_c_strides(c_shape))
    kw.update(alpha=float(attrs["alpha"]), beta=float(attrs["beta"]))
    return (m, n, k), kw


def pointwise_conv_problem(x_shape, m: int) -> tuple[tuple[int, int, int], dict]:
    """``((m, n, k), keywords)`` of a 1x1 stride-1 unpadded group-1 Conv as a batched GEMM:
    ``Y[n] (M, H*W) = W (M, C) @ X[n] (C, H*W) + B`` (B broadcast along H*W), ``X: (N, C, H, W)``."""
    n, c, h, w = x_shape
    hw = h * w
    kw = dict(lda=c, ldb=hw, ldy=hw, batch=n, strides=(0, c * hw, m * hw), c_strides=(1, 0))
    return (m, hw, c), kw


GEMV_ROWS = 8  # at most this many rows of Y: classifier heads and 1-D operands


def gemv_shape(m: int, k: int, batch: int, trans_a: bool, trans_b: bool, group: int) -> bool:
    """Whether a GEMM has the shape both GPU backends' GEMV kernels take: at most
    ``GEMV_ROWS`` rows, B stored (N, K) (Gemm with transB=1: every output a dot product of
    two contiguous rows), one batch, and K at least one work group (``group`` items) long.
    The tiled kernels would run ceil(N / 128) work groups, each looping over all of K (8 for a
    1000-class head: most of a big GPU idle)."""
    return m <= GEMV_ROWS and trans_b and not trans_a and batch == 1 and k >= group

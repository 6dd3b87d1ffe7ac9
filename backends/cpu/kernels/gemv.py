"""A block of columns of a vector-matrix product (numba): the classifiers' ``Gemm`` and any
``MatMul`` of one row, cut into column blocks over the CPU backend's threads.

``x: (K,) float32``, ``w: (K, N) float32`` (C-contiguous: the Gemm's weights as stored at
resize, transposed), ``y: (N,) float32``::

    y[c] = sum_{k < K} x[k] * w[k, c]        c0 <= c < c1

128 columns at a time (``gemv_jit.py``): eight 16-lane vectors of sums held in registers over
every ``k``, each step one broadcast of ``x[k]`` and eight fused multiply-adds on a contiguous
run of ``w``'s row ``k`` (masked loads and stores for the last columns). Each thread reads
its own columns of every row, so two threads stream the weights side by side: a product of one
row is bound by the memory bandwidth (MobileNetV2's 1280x1000 classifier reads 5.1 MB for
2.6 MFLOP), which one thread does not use up. BLAS's ``sgemv`` takes the whole product on one
thread here (BLAS stays single-threaded during a run, ``blas.py``), and its ``sgemm`` for a
block of columns is 2-5x slower than ``sgemv``.

Per column the terms are added in the order of ``k`` (one rounding per fused multiply-add);
the result may differ from BLAS's blocked sums in the last bits (DESIGN.md's accumulating-op
tolerance).
"""

from __future__ import annotations

from mnnpy.backends.cpu.kernels import compiled


def _build(numba):
    from mnnpy.backends.cpu.kernels import gemv_jit

    return gemv_jit.build(numba)


def kernel():
    """The compiled ``gemv(x, w, y, c0, c1)`` (module doc); it releases the GIL. ``None`` where
    numba cannot compile here (a warning was given)."""
    return compiled("gemv", _build)

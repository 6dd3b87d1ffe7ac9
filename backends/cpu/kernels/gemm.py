"""A matrix product block with its epilogue in one compiled call (numba): the pointwise
Conv's task (``ops/pointwise.py``), and the products of im2col, Winograd and ``blas.MatMul``,
as a native call that a worker thread makes without the
GIL (``worker_pool.py``).

``w: (Bw, M, K)`` (``Bw`` 1 or ``B``), ``x: (B, K, Lx)``, ``y: (B, M, Ly)`` float32
C-contiguous, ``b: (Mb,)`` float32 (``Mb`` 0: no epilogue), for each ``j < B``::

    y[j, r0:r1, yc0:yc0+n] = w[j or 0, r0:r1, :] @ x[j, :, xc0:xc0+n]         (BLAS cblas_sgemm)
    y[j, r, c] = act(y[j, r, c] + b[r % Mb])   r0 <= r < r1, yc0 <= c < yc0+n   (kernels/epilogue.py)

``product(sgemm, ilp64, w, x, y, b, r0, r1, xc0, yc0, n, act, a0, a1)``: ``sgemm`` is the address
of ``cblas_sgemm`` in the BLAS that NumPy loaded (``blas.sgemm_address``; ``ilp64``: its
integers are 64-bit, as in NumPy's ``scipy_openblas64_``), called with row-major layout, no
transposes, alpha 1 and beta 0 (the CBLAS interface, netlib ``cblas.h``). The address is an
argument, not a constant, so the machine code stays valid in every process.
"""

from __future__ import annotations

from mnnpy.backends.cpu.kernels.epilogue import compiled_with_span


def _build(numba):
    from mnnpy.backends.cpu.kernels import gemm_jit

    return gemm_jit.build(numba, globals()["_span_jit"])


def kernel():
    """The compiled ``product`` (module doc), or ``None`` where numba cannot compile here
    (a warning was given)."""
    return compiled_with_span("gemm_product", _build, globals())

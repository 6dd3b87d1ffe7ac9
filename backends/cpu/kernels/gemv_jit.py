"""The numba code of ``gemv.py``'s kernel, at module level so that numba's cache recognises it
in every process. Imported only when the kernel is built: importing it imports numba."""

from __future__ import annotations

from mnnpy.backends.cpu.kernels.simd import vbcast, vfma, vload, vload_all, vstore, vstore_all, vzero

ROWS = 4  # rows of ``w`` a pass over the columns adds (four streams read side by side)


def gemv(x, w, y, c0, c1):  # pragma: no cover - compiled
    """``gemv.py``'s kernel (its module doc)."""
    k_total, n = w.shape[0], w.shape[1]
    wf = w.reshape(-1)
    whole = c0 + (c1 - c0) // 16 * 16  # columns in whole vectors; the rest masked
    for c in range(c0, c1, 16):
        vstore(y, c, vzero(), c1 - c)
    k_full = k_total - k_total % ROWS
    for k in range(0, k_full, ROWS):
        x0, x1, x2, x3 = vbcast(x, k), vbcast(x, k + 1), vbcast(x, k + 2), vbcast(x, k + 3)
        r0, r1, r2, r3 = k * n, (k + 1) * n, (k + 2) * n, (k + 3) * n
        for c in range(c0, whole, 16):
            acc = vfma(x0, vload_all(wf, r0 + c), vload_all(y, c))
            acc = vfma(x1, vload_all(wf, r1 + c), acc)
            acc = vfma(x2, vload_all(wf, r2 + c), acc)
            vstore_all(y, c, vfma(x3, vload_all(wf, r3 + c), acc))
        if whole < c1:
            left = c1 - whole
            acc = vfma(x0, vload(wf, r0 + whole, left), vload(y, whole, left))
            acc = vfma(x1, vload(wf, r1 + whole, left), acc)
            acc = vfma(x2, vload(wf, r2 + whole, left), acc)
            vstore(y, whole, vfma(x3, vload(wf, r3 + whole, left), acc), left)
    for k in range(k_full, k_total):
        xk, row = vbcast(x, k), k * n
        for c in range(c0, c1, 16):
            vstore(y, c, vfma(xk, vload(wf, row + c, c1 - c), vload(y, c, c1 - c)), c1 - c)


def build(numba):
    """``gemv`` compiled for ``(float32 1-d, float32 2-d, float32 1-d, int64, int64)``,
    releasing the GIL, cached."""
    f1, f2, i8 = numba.float32[::1], numba.float32[:, ::1], numba.int64
    return numba.njit(numba.void(f1, f2, f1, i8, i8), cache=True, nogil=True)(gemv)

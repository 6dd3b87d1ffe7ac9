"""LayerNormalization rows (numba): statistics and the affine in one call per block of rows.

``x: (R, L) float32`` (the dims before ``axis`` flattened into rows ``R``, those from
``axis`` into ``L``), ``scale, bias: (L,) float32`` -> ``y: (R, L) float32``,
``mean, inv: (R,) float32`` (ONNX operators.md #LayerNormalization, stash type float32)::

    mean[r] = sum_j x[r, j] / L
    inv[r]  = 1 / sqrt(sum_j (x[r, j] - mean[r])**2 / L + epsilon)
    y[r, j] = (x[r, j] - mean[r]) * inv[r] * scale[j] + bias[j]

The sums are formed in float64 (two passes: the mean, then the squared deviations), so a row
costs three passes over ``L`` values; the NumPy path makes about fifteen calls for it, which on
PP-OCR rec's (40, 120) rows is all of its time. Rows ``lo <= r < hi``; the kernel releases the
GIL.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled


def _rows(x, scale, bias, eps, y, mean, inv, lo, hi):  # pragma: no cover - compiled
    """Rows ``lo <= r < hi`` (see the module doc)."""
    n = x.shape[1]
    for r in range(lo, hi):
        s = 0.0
        for j in range(n):
            s += x[r, j]
        m = s / n
        q = 0.0
        for j in range(n):
            d = x[r, j] - m
            q += d * d
        iv = 1.0 / np.sqrt(q / n + eps)
        m32, iv32 = np.float32(m), np.float32(iv)
        mean[r], inv[r] = m32, iv32
        for j in range(n):
            y[r, j] = (x[r, j] - m32) * iv32 * scale[j] + bias[j]


def _build(numba):
    f2, f1, i8 = numba.float32[:, ::1], numba.float32[::1], numba.int64
    sig = numba.void(f2, f1, f1, numba.float64, f2, f1, f1, i8, i8)
    # reassociation only, on the float64 sums: lets the compiler keep several partial sums
    return numba.njit(sig, cache=True, nogil=True, fastmath={"reassoc"})(_rows)


def kernel():
    """The compiled kernel ``(x, scale, bias, eps, y, mean, inv, lo, hi)`` (arrays as in the
    module doc, ``eps`` float64, ``lo, hi`` int64); ``None`` where numba cannot compile here (a
    warning was given)."""
    return compiled("layer_norm", _build)

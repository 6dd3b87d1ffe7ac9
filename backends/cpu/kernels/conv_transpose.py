"""The col2im step of a 2-D ConvTranspose whose taps never overlap, with the bias (numba).

``cols: (N*M, KH*KW, H*W) float32`` (the product ``W^T @ X`` per image and group, see
``ops/conv_transpose.py``), ``b: (M,) float32`` -> ``y: (N*M, Ho, Wo) float32``::

    y[nm, i*sh + ky*dh - pt, j*sw + kx*dw - pl] = cols[nm, ky*KW + kx, i*W + j] + b[nm % M]

(ONNX operators.md #ConvTranspose), where every stride is at least its dilated kernel extent,
so each output is written by at most one tap; outputs no tap reaches hold ``b`` alone.
The geometry is tabled at resize: ``rows[oy] = ky*H + i`` (-1 when no tap row reaches
``oy``), ``taps[kx] = (j0, j1, ox0)``, the inputs ``j0 <= j < j1`` of column tap ``kx``
and the output column of ``j0``; ``full`` says the column taps cover every output column,
``pair`` that they are the kernel-2, stride-2 form (``ox = 2*j + kx``, PP-OCR det's
up-sampling), stored as one interleaved loop; ``relu`` applies a following Relu in the same
pass (``backends/cpu/fusion.py``). Work is cut in output rows
``lo <= nm*Ho + oy < hi``; the kernel releases the GIL, so callers split the rows over
their threads.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled


def _scatter(cols, b, y, rows, taps, w, sw, full, pair, relu, lo, hi):  # pragma: no cover - compiled
    """Output rows ``lo <= nm*Ho + oy < hi`` of ``y`` (see the module doc)."""
    u = np.uint64
    kk, ll = cols.shape[1], cols.shape[2]
    m, ho, wo = b.shape[0], y.shape[1], y.shape[2]
    kw = taps.shape[0]
    h = ll // w
    cf, yf = cols.reshape(-1), y.reshape(-1)
    for r in range(lo, hi):
        nm, oy = r // ho, r % ho
        bias = b[nm % m]
        dst = u(r * wo)
        t = rows[oy]
        if t < 0 or not full:
            fill = np.float32(0.0) if relu and bias < 0.0 else bias
            for j in range(wo):
                yf[dst + u(j)] = fill
        if t < 0:
            continue
        ky, i = t // h, t % h
        base = u((nm * kk + ky * kw) * ll + i * w)
        if pair:
            s0, s1 = base, base + u(ll)
            if relu:
                for j in range(w):
                    v0, v1 = cf[s0 + u(j)] + bias, cf[s1 + u(j)] + bias
                    yf[dst + u(2 * j)] = np.float32(0.0) if v0 < 0.0 else v0
                    yf[dst + u(2 * j + 1)] = np.float32(0.0) if v1 < 0.0 else v1
            else:
                for j in range(w):
                    yf[dst + u(2 * j)] = cf[s0 + u(j)] + bias
                    yf[dst + u(2 * j + 1)] = cf[s1 + u(j)] + bias
            continue
        for kx in range(kw):
            j0, j1, ox0 = taps[kx, 0], taps[kx, 1], taps[kx, 2]
            src = base + u(kx * ll)
            for j in range(j0, j1):
                v = cf[src + u(j)] + bias
                if relu and v < 0.0:
                    v = np.float32(0.0)
                yf[dst + u(ox0 + (j - j0) * sw)] = v


def _build(numba):
    f3, i8 = numba.float32[:, :, ::1], numba.int64
    sig = numba.void(f3, numba.float32[::1], f3, numba.int64[::1], numba.int64[:, ::1], *(i8,) * 7)
    return numba.njit(sig, cache=True, nogil=True)(_scatter)


def kernel():
    """The compiled kernel ``(cols, b, y, rows, taps, w, sw, full, pair, relu, lo, hi)`` (arrays
    as in the module doc, int64 tables and scalars; ``relu`` 1: ``max(y, 0)`` in the same pass,
    NaN kept); ``None`` where numba cannot compile here (a
    warning was given)."""
    return compiled("conv_transpose", _build)

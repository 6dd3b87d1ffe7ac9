"""2-D Resize of the last two axes (numba): nearest, and separable linear/cubic taps.

``x: (P, H, W) float32`` (the leading axes flattened into planes ``P``) ->
``y: (P, Ho, Wo) float32``; the tables come from the shape function's coordinates
(``mnnpy.ops.geometry``: ``nearest_index``, ``interp_taps``; ONNX operators.md #Resize) and
are built once, at resize. Work is cut in ranges of output rows ``lo <= p*Ho + oy < hi``
(callers split them over their threads; the kernels release the GIL).

* ``nearest``: ``y[p, oy, ox] = x[p, iy[oy], ix[ox]]``. An output row whose source row is
  that of the row before it is a copy of that row (integer up-sampling writes each source
  row once and copies it); ``fx > 0`` says ``ix[ox] == ox // fx`` (integer up-sampling of
  the columns), so each source value is stored ``fx`` times without a gather.
* ``separable``: ``y[p, oy, ox] = sum_a wy[a, oy] * sum_b wx[b, ox] * x[p, iy[a, oy], ix[b, ox]]``
  with ``T`` taps per axis (linear 2, cubic 4), indices already clamped to the edge, weights
  float32 (as the NumPy path); the column sums of each source row are formed once per
  output row into a row buffer, then weighted by the row's taps.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled


def _nearest(x, y, iy, ix, fx, lo, hi):  # pragma: no cover - compiled
    """Output rows ``lo <= p*Ho + oy < hi`` of a nearest Resize (see the module doc)."""
    u = np.uint64
    h, w = x.shape[1], x.shape[2]
    ho, wo = y.shape[1], y.shape[2]
    xf, yf = x.reshape(-1), y.reshape(-1)
    for r in range(lo, hi):
        p, oy = r // ho, r % ho
        dst = u(r * wo)
        if r > lo and oy > 0 and iy[oy] == iy[oy - 1]:
            prev = dst - u(wo)
            for j in range(wo):
                yf[dst + u(j)] = yf[prev + u(j)]
            continue
        src = u((p * h + iy[oy]) * w)
        if fx == 2:
            n = wo // 2
            for j in range(n):
                v = xf[src + u(j)]
                yf[dst + u(2 * j)] = v
                yf[dst + u(2 * j + 1)] = v
            if wo % 2:
                yf[dst + u(wo - 1)] = xf[src + u(n)]
        elif fx > 0:
            for j in range(wo // fx):
                v = xf[src + u(j)]
                d = dst + u(j * fx)
                for k in range(fx):
                    yf[d + u(k)] = v
        else:
            for j in range(wo):
                yf[dst + u(j)] = xf[src + u(ix[j])]


def _nearest_add(x, z, y, iy, ix, fx, lo, hi):  # pragma: no cover - compiled
    """Output rows ``lo <= p*Ho + oy < hi`` of ``y = z + nearest Resize(x)`` (``z`` like ``y``)."""
    u = np.uint64
    h, w = x.shape[1], x.shape[2]
    ho, wo = y.shape[1], y.shape[2]
    xf, zf, yf = x.reshape(-1), z.reshape(-1), y.reshape(-1)
    for r in range(lo, hi):
        p, oy = r // ho, r % ho
        dst = u(r * wo)
        src = u((p * h + iy[oy]) * w)
        if fx == 2:
            n = wo // 2
            for j in range(n):
                v = xf[src + u(j)]
                yf[dst + u(2 * j)] = zf[dst + u(2 * j)] + v
                yf[dst + u(2 * j + 1)] = zf[dst + u(2 * j + 1)] + v
            if wo % 2:
                yf[dst + u(wo - 1)] = zf[dst + u(wo - 1)] + xf[src + u(n)]
        else:
            for j in range(wo):
                yf[dst + u(j)] = zf[dst + u(j)] + xf[src + u(ix[j])]


def _separable(x, y, iy, wy, ix, wx, lo, hi):  # pragma: no cover - compiled
    """Output rows ``lo <= p*Ho + oy < hi`` of a linear/cubic Resize (see the module doc)."""
    u = np.uint64
    h, w = x.shape[1], x.shape[2]
    ho, wo = y.shape[1], y.shape[2]
    ty, tx = iy.shape[0], ix.shape[0]
    xf, yf = x.reshape(-1), y.reshape(-1)
    row = np.empty(wo, np.float32)
    for r in range(lo, hi):
        p, oy = r // ho, r % ho
        dst = u(r * wo)
        for j in range(wo):
            yf[dst + u(j)] = 0.0
        for a in range(ty):
            src = u((p * h + iy[a, oy]) * w)
            for j in range(wo):
                row[j] = wx[0, j] * xf[src + u(ix[0, j])]
            for b in range(1, tx):
                for j in range(wo):
                    row[j] += wx[b, j] * xf[src + u(ix[b, j])]
            wa = wy[a, oy]
            for j in range(wo):
                yf[dst + u(j)] += wa * row[j]


def _build(numba):
    f3, i8 = numba.float32[:, :, ::1], numba.int64
    i1, i2, f2 = numba.int64[::1], numba.int64[:, ::1], numba.float32[:, ::1]
    near = numba.njit(numba.void(f3, f3, i1, i1, i8, i8, i8), cache=True, nogil=True)(_nearest)
    sep = numba.njit(numba.void(f3, f3, i2, f2, i2, f2, i8, i8), cache=True, nogil=True)(_separable)
    near_add = numba.njit(numba.void(f3, f3, f3, i1, i1, i8, i8, i8), cache=True, nogil=True)(_nearest_add)
    return near, sep, near_add


def kernels():
    """``(nearest, separable, nearest_add)``: the compiled kernels ``nearest(x, y, iy, ix, fx,
    lo, hi)``, ``separable(x, y, iy, wy, ix, wx, lo, hi)`` and ``nearest_add(x, z, y, iy, ix,
    fx, lo, hi)`` (``y = z + nearest(x)``; a following ``Add`` fused, ``backends/cpu/fusion.py``)
    (arrays as in the module doc, int64 indices, float32 weights); ``None`` where numba cannot
    compile here (a warning was given)."""
    return compiled("resize", _build)

"""Depthwise 2-D convolution with bias and fused activation in one pass (numba).

``x: (N, C, H, W) float32``, ``w: (C, KH, KW) float32``, ``b: (C,) float32`` ->
``y: (N, C, Ho, Wo) float32``::

    y[n, c, oy, ox] = act(b[c] + sum_{ky, kx} w[c, ky, kx] * x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw])

where positions outside ``x`` read zero (ONNX Conv with ``group == C == M``). The direct
algorithm: per output row, a ``(Wo,)`` accumulator starts at the bias; each kernel tap whose
input row exists adds ``w * x`` over the output columns whose input column exists (their
range computed once per tap, so the inner loop has no bounds tests and vectorises for
stride 1); the activation is applied as the row is stored. Work is split over ``N*C``
channel planes (``prange``).

Fused activation codes (``ACT``): 0 none, 1 Relu ``max(x, 0)``, 2 Clip ``min(max(x, a0),
a1)`` (Relu6 is ``a0=0, a1=6``), 3 LeakyRelu ``x < 0 ? a0*x : x``; NaN passes through all
of them as in NumPy. Other activations are applied by the caller afterwards.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled

ACT = {"": 0, "Relu": 1, "Clip": 2, "LeakyRelu": 3}


def _plane(x, w, b, y, n, c, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """One output plane ``y[n, c]`` (see the module doc)."""
    h, wd = x.shape[2], x.shape[3]
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    acc = np.empty(wo, np.float32)
    bias = b[c]
    # per kernel column: the output columns [lo, hi) whose input column ox*sw + off exists
    los = np.zeros(kw, np.int64)
    his = np.zeros(kw, np.int64)
    offs = np.zeros(kw, np.int64)
    for kx in range(kw):
        off = kx * dw - pl
        offs[kx] = off
        los[kx] = 0 if off >= 0 else (sw - 1 - off) // sw
        his[kx] = 0 if wd - 1 - off < 0 else min(wo, (wd - 1 - off) // sw + 1)
    for oy in range(ho):
        for ox in range(wo):
            acc[ox] = bias
        for ky in range(kh):
            iy = oy * sh - pt + ky * dh
            if iy < 0 or iy >= h:
                continue
            row = x[n, c, iy]
            for kx in range(kw):
                lo, hi, off = los[kx], his[kx], offs[kx]
                if hi <= lo:
                    continue
                wv = w[c, ky, kx]
                # slices whose indices start at 0 (no negative-index test), contiguous for
                # stride 1: the loop vectorises
                dst = acc[lo:hi]
                if sw == 1:
                    src = row[lo + off : hi + off]
                    for i in range(hi - lo):
                        dst[i] += wv * src[i]
                else:
                    srcs = row[lo * sw + off : (hi - 1) * sw + off + 1 : sw]
                    for i in range(hi - lo):
                        dst[i] += wv * srcs[i]
        if act == 0:
            for ox in range(wo):
                y[n, c, oy, ox] = acc[ox]
        elif act == 1:
            for ox in range(wo):
                v = acc[ox]
                y[n, c, oy, ox] = 0.0 if v < 0.0 else v
        elif act == 2:
            for ox in range(wo):
                v = acc[ox]
                if v < a0:
                    v = a0
                elif v > a1:
                    v = a1
                y[n, c, oy, ox] = v
        else:
            for ox in range(wo):
                v = acc[ox]
                y[n, c, oy, ox] = v * a0 if v < 0.0 else v


def _parallel(x, w, b, y, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    c_ = x.shape[1]
    for nc in prange(x.shape[0] * c_):  # noqa: F821 - numba's prange, bound in _build
        _plane_jit(x, w, b, y, nc // c_, nc % c_, sh, sw, dh, dw, pt, pl, act, a0, a1)  # noqa: F821


def _serial(x, w, b, y, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    c_ = x.shape[1]
    for nc in range(x.shape[0] * c_):
        _plane_jit(x, w, b, y, nc // c_, nc % c_, sh, sw, dh, dw, pt, pl, act, a0, a1)  # noqa: F821


def _build(numba):
    f4 = numba.float32[:, :, :, ::1]
    i8, f = numba.int64, numba.float32
    sig = numba.void(f4, numba.float32[:, :, ::1], numba.float32[::1], f4, i8, i8, i8, i8, i8, i8, i8, f, f)
    g = globals()
    g["prange"] = numba.prange
    g["_plane_jit"] = numba.njit(cache=True, nogil=True, inline="always")(_plane)
    serial = numba.njit(sig, cache=True, nogil=True)(_serial)
    par = numba.njit(sig, cache=True, nogil=True, parallel=True)(_parallel)
    return serial, par


def kernels():
    """``(serial, parallel)`` compiled depthwise kernels (signature in the module doc, then
    ``sh, sw, dh, dw, pt, pl, act`` int64 and ``a0, a1`` float32), or ``None`` where numba
    cannot compile (a warning was given)."""
    return compiled("depthwise", _build)

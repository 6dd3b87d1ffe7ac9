"""Depthwise 2-D convolution with bias and fused activation in one pass (numba).

``x: (N, C, H, W) float32``, ``w: (C, KH, KW) float32``, ``b: (C,) float32`` ->
``y: (N, C, Ho, Wo) float32``::

    y[n, c, oy, ox] = act(b[c] + sum_{ky, kx} w[c, ky, kx] * x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw])

where positions outside ``x`` read zero (ONNX Conv with ``group == C == M``). Per channel
plane: the zero-padded input is copied into ``sh*sw`` phase planes (phase ``(a, e)`` holds
``X_pad[a::sh, e::sw]`` on a ``(Hq, Wq)`` grid), so that every kernel tap, for every stride
and dilation, reads one contiguous slice shifted by ``(ky*dh // sh)*Wq + kx*dw // sw``;
the sums are formed on the wide ``(Ho, Wq)`` grid, starting at the bias (long contiguous
loops that vectorise, also for small maps), and cropped to ``Wo`` columns through the
activation into ``y``. Work is split over ``N*C`` channel planes (``prange``).

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
    hq = -(-max(h + pt, (ho - 1) * sh + (kh - 1) * dh + 1) // sh)
    wq = -(-max(wd + pl, (wo - 1) * sw + (kw - 1) * dw + 1) // sw)
    p = hq * wq
    # phase (a, e) of the zero-padded plane, X_pad[a::sh, e::sw], is row a*sw + e of buf
    buf = np.zeros((sh * sw, p), np.float32)
    for iy in range(h):
        a, r = (iy + pt) % sh, (iy + pt) // sh
        row = x[n, c, iy]
        for e in range(sw):
            ix0 = (e - pl) % sw
            if ix0 >= wd:
                continue
            cnt = (wd - 1 - ix0) // sw + 1
            dst = buf[a * sw + e, r * wq + (ix0 + pl) // sw : r * wq + (ix0 + pl) // sw + cnt]
            if sw == 1:
                for i in range(cnt):
                    dst[i] = row[i]
            else:
                src = row[ix0::sw]
                for i in range(cnt):
                    dst[i] = src[i]
    # the output on the wide (Ho, Wq) grid: every tap is one contiguous shifted slice of a phase
    span = (ho - 1) * wq + wo
    acc = np.empty(span, np.float32)
    bias = b[c]
    for j in range(span):
        acc[j] = bias
    for ky in range(kh):
        for kx in range(kw):
            ph = (ky * dh % sh) * sw + kx * dw % sw
            off = (ky * dh // sh) * wq + kx * dw // sw
            src = buf[ph, off : off + span]
            wv = w[c, ky, kx]
            for j in range(span):
                acc[j] += wv * src[j]
    for oy in range(ho):
        accr = acc[oy * wq : oy * wq + wo]
        if act == 0:
            for ox in range(wo):
                y[n, c, oy, ox] = accr[ox]
        elif act == 1:
            for ox in range(wo):
                v = accr[ox]
                y[n, c, oy, ox] = 0.0 if v < 0.0 else v
        elif act == 2:
            for ox in range(wo):
                v = accr[ox]
                if v < a0:
                    v = a0
                elif v > a1:
                    v = a1
                y[n, c, oy, ox] = v
        else:
            for ox in range(wo):
                v = accr[ox]
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

"""Depthwise 2-D convolution with bias and fused activation in one pass (numba).

``x: (N, C, H, W) float32``, ``w: (C, KH, KW) float32``, ``b: (C,) float32`` ->
``y: (N, C, Ho, Wo) float32``::

    y[n, c, oy, ox] = act(b[c] + sum_{ky, kx} w[c, ky, kx] * x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw])

where positions outside ``x`` read zero (ONNX Conv with ``group == C == M``). Per channel
plane: the zero-padded input is copied into ``sh*sw`` phase planes (phase ``(a, e)`` holds
``X_pad[a::sh, e::sw]`` on a ``(Hq, Wq)`` grid), so that every kernel tap, for every stride
and dilation, reads one contiguous slice shifted by ``(ky*dh // sh)*Wq + kx*dw // sw``;
the sums are formed on the wide ``(Ho, Wq)`` grid, starting at the bias, up to eight taps
per pass (long contiguous loops that vectorise, also for small maps), and cropped to ``Wo``
columns into ``y``, then the activation runs over the plane. Callers split the ``N*C``
planes over their threads (numba's own threads, ``parallel=True``, measured worse: their OpenMP workers spin after each launch and
slowed the BLAS product after it, MobileNetV2 53.7 ms against 14.5 with NumPy).

A channels-innermost variant (blocks of 16 channels transposed into a zero-padded
``(Hp, Wp, 16)`` buffer, taps vectorised over the channels, the output transposed back) was
measured slower on every depthwise layer of MobileNetV2, PP-OCRv4 rec/cls and det's first
(12.8 ms against 5.5 for the 30 shapes, 960x7x7: 0.148 against 0.111 ms): numba leaves a
16-lane channel loop scalar (its stores may alias its loads), long loops over channels need
weights repeated along the row, and the two transposes cost about as much as the taps on
small maps. So this kernel serves every size.

Fused activation codes (``ACT``): those of the epilogue (``kernels/epilogue.py``: none, Relu,
Clip, LeakyRelu, HardSigmoid, HardSwish), applied in place to each output plane after its
crop while it is in cache; NaN passes through all of them as in NumPy. Other activations
(Sigmoid, Tanh) are applied by the caller afterwards.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels.epilogue import ACT, compiled_with_span

__all__ = ["ACT", "kernel"]


def _grid(x, w, y, sh, sw, dh, dw, pt, pl):  # pragma: no cover - compiled
    """``(Hq, Wq)``: each phase plane's grid (see the module doc)."""
    ho, wo = y.shape[2], y.shape[3]
    hq = -(-max(x.shape[2] + pt, (ho - 1) * sh + (w.shape[1] - 1) * dh + 1) // sh)
    wq = -(-max(x.shape[3] + pl, (wo - 1) * sw + (w.shape[2] - 1) * dw + 1) // sw)
    return hq, wq


def _planes(x, w, b, y, lo, hi, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """Output planes ``lo <= n*C + c < hi`` of ``y`` (see the module doc).

    One phase buffer serves all of them: row ``a*sw + e`` of ``buf`` is phase ``(a, e)``,
    ``X_pad[a::sh, e::sw]``; its padding is zeroed once and each plane overwrites the rest.
    Indices are unsigned (``u``) and arrays flat: numba then tests no negative index and
    makes no array view per row, so the loops vectorise and a small plane costs little.
    """
    u = np.uint64
    h, wd = x.shape[2], x.shape[3]
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    c_ = x.shape[1]
    hq, wq = _grid_jit(x, w, y, sh, sw, dh, dw, pt, pl)  # noqa: F821
    p = hq * wq
    span = (ho - 1) * wq + wo  # the wide (Ho, Wq) grid up to the last output
    buf = np.zeros(sh * sw * p, np.float32)
    acc = np.empty(span, np.float32)
    xf, yf, wf = x.reshape(-1), y.reshape(-1), w.reshape(-1)
    usw = u(sw)
    # geometry shared by every plane, computed once (integer divisions are slow per plane):
    # per (input row, column phase) the destination, source offset and count of the fill;
    # per tap the offset of its slice in buf
    fd = np.zeros(h * sw, np.int64)
    fs = np.zeros(h * sw, np.int64)
    fc = np.zeros(h * sw, np.int64)
    for iy in range(h):
        a, r = (iy + pt) % sh, (iy + pt) // sh
        for e in range(sw):
            ix0 = (e - pl) % sw
            if ix0 < wd:
                fd[iy * sw + e] = (a * sw + e) * p + r * wq + (ix0 + pl) // sw
                fs[iy * sw + e] = iy * wd + ix0
                fc[iy * sw + e] = (wd - 1 - ix0) // sw + 1
    kk = kh * kw
    toff = np.zeros(kk, np.int64)
    for ky in range(kh):
        for kx in range(kw):
            toff[ky * kw + kx] = ((ky * dh) % sh * sw + (kx * dw) % sw) * p + (ky * dh // sh) * wq + kx * dw // sw
    for nc in range(lo, hi):
        c = nc % c_
        base = nc * h * wd
        if sw == 2:
            # both column phases of a row in one loop over column pairs: one interleaved
            # load the compiler vectorises (phase e holds the columns ix with (ix+pl)%2 == e)
            pairs, e0 = wd // 2, pl % 2
            for iy in range(h):
                de, do = u(fd[iy * 2 + e0]), u(fd[iy * 2 + 1 - e0])  # even / odd input columns
                s0 = u(base + iy * wd)
                for j in range(pairs):
                    buf[de + u(j)] = xf[s0 + u(2 * j)]
                    buf[do + u(j)] = xf[s0 + u(2 * j + 1)]
                if wd % 2:
                    buf[de + u(pairs)] = xf[s0 + u(wd - 1)]
        elif sw == 1:  # rows copied whole: contiguous loops that vectorise
            for k in range(h):
                d0, s0 = u(fd[k]), u(base + fs[k])
                for i in range(wd):
                    buf[d0 + u(i)] = xf[s0 + u(i)]
        else:
            for k in range(h * sw):
                d0, s0 = u(fd[k]), u(base + fs[k])
                for i in range(fc[k]):
                    buf[d0 + u(i)] = xf[s0 + u(i) * usw]
        bias = b[c]
        t, w0 = 0, c * kk
        if kk >= 8:  # the first eight taps start from the bias: no pass of its own
            s0, s1, s2, s3 = u(toff[0]), u(toff[1]), u(toff[2]), u(toff[3])
            s4, s5, s6, s7 = u(toff[4]), u(toff[5]), u(toff[6]), u(toff[7])
            v0, v1, v2, v3 = wf[w0], wf[w0 + 1], wf[w0 + 2], wf[w0 + 3]
            v4, v5, v6, v7 = wf[w0 + 4], wf[w0 + 5], wf[w0 + 6], wf[w0 + 7]
            for j in range(span):
                acc[j] = bias + (
                    (v0 * buf[s0 + u(j)] + v1 * buf[s1 + u(j)] + v2 * buf[s2 + u(j)] + v3 * buf[s3 + u(j)])
                    + (v4 * buf[s4 + u(j)] + v5 * buf[s5 + u(j)] + v6 * buf[s6 + u(j)] + v7 * buf[s7 + u(j)])
                )
            t = 8
        else:
            for j in range(span):
                acc[j] = bias
        # taps eight, then four at a time: one load and store of acc per eight products (the
        # single-tap loop was bound by its three memory accesses per product; measured on the
        # 30 depthwise layers of MobileNetV2, PP-OCR rec and cls, det's first: 5.44 ms one tap
        # per pass, 3.93 four, 3.52 eight; 5x5 kernels up to twice as fast; the first eight
        # starting from the bias instead of a pass that writes it: 3.34 against 3.64)
        while t + 8 <= kk:
            s0, s1, s2, s3 = u(toff[t]), u(toff[t + 1]), u(toff[t + 2]), u(toff[t + 3])
            s4, s5, s6, s7 = u(toff[t + 4]), u(toff[t + 5]), u(toff[t + 6]), u(toff[t + 7])
            v0, v1, v2, v3 = wf[w0 + t], wf[w0 + t + 1], wf[w0 + t + 2], wf[w0 + t + 3]
            v4, v5, v6, v7 = wf[w0 + t + 4], wf[w0 + t + 5], wf[w0 + t + 6], wf[w0 + t + 7]
            for j in range(span):
                acc[j] += (v0 * buf[s0 + u(j)] + v1 * buf[s1 + u(j)] + v2 * buf[s2 + u(j)] + v3 * buf[s3 + u(j)]) + (
                    v4 * buf[s4 + u(j)] + v5 * buf[s5 + u(j)] + v6 * buf[s6 + u(j)] + v7 * buf[s7 + u(j)]
                )
            t += 8
        while t + 4 <= kk:
            s0, s1, s2, s3 = u(toff[t]), u(toff[t + 1]), u(toff[t + 2]), u(toff[t + 3])
            v0, v1, v2, v3 = wf[w0 + t], wf[w0 + t + 1], wf[w0 + t + 2], wf[w0 + t + 3]
            for j in range(span):
                acc[j] += v0 * buf[s0 + u(j)] + v1 * buf[s1 + u(j)] + v2 * buf[s2 + u(j)] + v3 * buf[s3 + u(j)]
            t += 4
        while t < kk - 1:
            s0, v0 = u(toff[t]), wf[w0 + t]
            for j in range(span):
                acc[j] += v0 * buf[s0 + u(j)]
            t += 1
        # the last tap (3x3, 5x5 and 7x7 kernels leave one) is added in the crop
        s0, v0 = (u(toff[t]), wf[w0 + t]) if t < kk else (u(0), np.float32(0.0))
        for oy in range(ho):
            src, dst = u(oy * wq), u((nc * ho + oy) * wo)
            for ox in range(wo):
                yf[dst + u(ox)] = acc[src + u(ox)] + v0 * buf[s0 + src + u(ox)]
        if act != 0:  # the plane is still in cache
            _span_jit(yf, nc * ho * wo, ho * wo, np.float32(0.0), act, a0, a1)  # noqa: F821


def _build(numba):
    f4, i8, f = numba.float32[:, :, :, ::1], numba.int64, numba.float32
    ints = (i8,) * 9  # lo, hi, sh, sw, dh, dw, pt, pl, act
    sig = numba.void(f4, numba.float32[:, :, ::1], numba.float32[::1], f4, *ints, f, f)
    globals()["_grid_jit"] = numba.njit(cache=True, nogil=True)(_grid)
    return numba.njit(sig, cache=True, nogil=True)(_planes)


def kernel():
    """The compiled kernel ``(x, w, b, y, lo, hi, sh, sw, dh, dw, pt, pl, act, a0, a1)``
    computing planes ``lo <= n*C + c < hi`` (arrays as in the module doc; the rest int64,
    ``a0, a1`` float32); it releases the GIL, so callers split planes over threads. ``None``
    where numba cannot compile here (a warning was given)."""
    return compiled_with_span("depthwise", _build, globals())

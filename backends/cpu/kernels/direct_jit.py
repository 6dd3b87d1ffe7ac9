"""The numba code of ``direct.py``'s kernel, at module level so that numba's cache recognises it
in every process; its loops use ``simd.py``'s vectors. Imported only when the kernel is built
(``direct._build``): importing it imports numba and llvmlite."""

from __future__ import annotations

import numba
import numpy as np

from mnnpy.backends.cpu.kernels.simd import (
    activate,
    prefetch,
    transpose16,
    vbcast,
    vfma,
    vload,
    vload_all,
    vstore,
    vstore_all,
    vzero,
)

PREFETCH = 256  # floats of a block's weights (1 KiB, 16 taps) asked for ahead of their use
PR = 8  # output positions of a step at most (``direct8``; ``direct7`` takes seven: 16 or 14 sums with two blocks of 16 channels)


@numba.njit(inline="always", cache=True)
def _tap7(rows, base, st, wv, s0, s1, s2, s3, s4, s5, s6):  # pragma: no cover - compiled
    """One tap on seven positions (inputs ``rows[base + i*st]``, broadcast) of one channel block."""
    return (
        vfma(vbcast(rows, base), wv, s0),
        vfma(vbcast(rows, base + st), wv, s1),
        vfma(vbcast(rows, base + 2 * st), wv, s2),
        vfma(vbcast(rows, base + 3 * st), wv, s3),
        vfma(vbcast(rows, base + 4 * st), wv, s4),
        vfma(vbcast(rows, base + 5 * st), wv, s5),
        vfma(vbcast(rows, base + 6 * st), wv, s6),
    )


@numba.njit(inline="always", cache=True)
def _keep7(outc, o, mp, s0, s1, s2, s3, s4, s5, s6):  # pragma: no cover - compiled
    """Seven positions' sums of one block into the row's staging buffer (row stride ``mp``)."""
    vstore_all(outc, o, s0)
    vstore_all(outc, o + mp, s1)
    vstore_all(outc, o + 2 * mp, s2)
    vstore_all(outc, o + 3 * mp, s3)
    vstore_all(outc, o + 4 * mp, s4)
    vstore_all(outc, o + 5 * mp, s5)
    vstore_all(outc, o + 6 * mp, s6)


@numba.njit(inline="always", cache=True)
def _tap8(rows, base, st, wv, s0, s1, s2, s3, s4, s5, s6, s7):  # pragma: no cover - compiled
    """``_tap7`` and the eighth position (unpacked and packed again: ``_tap7(...) + (x,)``, a
    tuple concatenation, compiled 2x slower)."""
    s0, s1, s2, s3, s4, s5, s6 = _tap7(rows, base, st, wv, s0, s1, s2, s3, s4, s5, s6)
    return s0, s1, s2, s3, s4, s5, s6, vfma(vbcast(rows, base + 7 * st), wv, s7)


@numba.njit(inline="always", cache=True)
def _keep8(outc, o, mp, s0, s1, s2, s3, s4, s5, s6, s7):  # pragma: no cover - compiled
    """``_keep7`` and the eighth position."""
    _keep7(outc, o, mp, s0, s1, s2, s3, s4, s5, s6)
    vstore_all(outc, o + 7 * mp, s7)


@numba.njit(inline="always", cache=True)
def _row7(rows, wf, toff, taps, w0, w1, b0, b1, outc, o0, mp, wo, sw):  # pragma: no cover - compiled
    """One output row's sums for two channel blocks (weights at ``w0``, ``w1``; bias vectors
    ``b0``, ``b1``), seven positions a step, into ``outc`` from ``o0`` (row stride ``mp``)."""
    for ox in range(0, wo, 7):
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = b0
        t0 = t1 = t2 = t3 = t4 = t5 = t6 = b1
        base = ox * sw
        for t in range(taps):
            o = base + toff[t]
            prefetch(wf, w0 + 16 * t + PREFETCH)  # the two blocks' weights stream from memory: ask ahead
            prefetch(wf, w1 + 16 * t + PREFETCH)
            s0, s1, s2, s3, s4, s5, s6 = _tap7(rows, o, sw, vload_all(wf, w0 + 16 * t), s0, s1, s2, s3, s4, s5, s6)
            t0, t1, t2, t3, t4, t5, t6 = _tap7(rows, o, sw, vload_all(wf, w1 + 16 * t), t0, t1, t2, t3, t4, t5, t6)
        _keep7(outc, o0 + ox * mp, mp, s0, s1, s2, s3, s4, s5, s6)
        _keep7(outc, o0 + ox * mp + 16, mp, t0, t1, t2, t3, t4, t5, t6)


@numba.njit(inline="always", cache=True)
def _row8(rows, wf, toff, taps, w0, w1, b0, b1, outc, o0, mp, wo, sw):  # pragma: no cover - compiled
    """``_row7`` with eight positions a step."""
    for ox in range(0, wo, 8):
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = b0
        t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = b1
        base = ox * sw
        for t in range(taps):
            o = base + toff[t]
            prefetch(wf, w0 + 16 * t + PREFETCH)
            prefetch(wf, w1 + 16 * t + PREFETCH)
            s0, s1, s2, s3, s4, s5, s6, s7 = _tap8(rows, o, sw, vload_all(wf, w0 + 16 * t), s0, s1, s2, s3, s4, s5, s6, s7)
            t0, t1, t2, t3, t4, t5, t6, t7 = _tap8(rows, o, sw, vload_all(wf, w1 + 16 * t), t0, t1, t2, t3, t4, t5, t6, t7)
        _keep8(outc, o0 + ox * mp, mp, s0, s1, s2, s3, s4, s5, s6, s7)
        _keep8(outc, o0 + ox * mp + 16, mp, t0, t1, t2, t3, t4, t5, t6, t7)


@numba.njit(inline="always", cache=True)
def _direct(x, wq, b, y, kh, kw, lo, hi, q0, q1, sh, sw, dh, dw, pt, pl, act, a0, a1, pr):  # pragma: no cover - compiled
    """Output rows ``lo <= n*Ho + oy < hi`` of ``y``, output channels ``16*q0 <= o < 16*q1``
    (``q0``, ``q1`` even counts of 16-channel blocks; ``direct.py``'s module doc), ``pr``
    (7 or 8, a constant of each compiled kernel) positions a step."""
    c_, h, wd = x.shape[1], x.shape[2], x.shape[3]
    m, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    nb, taps = wq.shape[0], wq.shape[1]  # an even count of 16-channel blocks; C*KH*KW taps
    mp = nb * 16
    wp = max(
        wd + pl, (wo - 1 + PR) * sw + (kw - 1) * dw + 1
    )  # a padded input row, room for a last step's extra positions (direct.row_bytes)
    rows = np.zeros(c_ * kh * wp, np.float32)  # the C*KH input rows one output row reads, zero-padded
    outc = np.empty((wo + PR) * mp, np.float32)  # one output row: positions x channels
    bias = np.zeros(mp, np.float32)
    for i in range(m):
        bias[i] = b[i]
    toff = np.zeros(taps, np.int64)
    for c in range(c_):
        for ky in range(kh):
            for kx in range(kw):
                toff[(c * kh + ky) * kw + kx] = (c * kh + ky) * wp + kx * dw
    wf, xf, yf = wq.reshape(-1), x.reshape(-1), y.reshape(-1)
    for unit in range(lo, hi):
        n, oy = unit // ho, unit % ho
        for c in range(c_):  # the rows' padding stays zero: only their inside is written
            for ky in range(kh):
                iy = oy * sh - pt + ky * dh
                r = (c * kh + ky) * wp + pl
                s = ((n * c_ + c) * h + iy) * wd
                inside = 0 <= iy < h
                for j in range(0, wd, 16):
                    k = min(16, wd - j)
                    vstore(rows, r + j, vload(xf, s + j, k) if inside else vzero(), k)
        for q in range(q0, min(q1, nb), 2):
            w0, w1 = q * taps * 16, (q + 1) * taps * 16
            b0, b1 = vload_all(bias, q * 16), vload_all(bias, q * 16 + 16)
            if pr == 7:
                _row7(rows, wf, toff, taps, w0, w1, b0, b1, outc, q * 16, mp, wo, sw)
            else:
                _row8(rows, wf, toff, taps, w0, w1, b0, b1, outc, q * 16, mp, wo, sw)
        if act:  # one loop: the activation's branches compiled once
            for p in range(wo):
                for j in range(p * mp + q0 * 16, p * mp + min(q1, nb) * 16, 16):
                    vstore_all(outc, j, activate(vload_all(outc, j), act, a0, a1))
        ybase = (n * m * ho + oy) * wo
        for q in range(q0 * 16, min(m, q1 * 16), 16):
            for p0 in range(0, wo, 16):
                transpose16(outc, p0 * mp + q, mp, min(16, wo - p0), min(16, m - q), yf, ybase + q * ho * wo + p0, ho * wo)


def direct7(x, wq, b, y, kh, kw, lo, hi, q0, q1, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """``_direct`` seven positions a step (its other loop folded away: compiled beside it, the
    loops of both ran 23% slower)."""
    _direct(x, wq, b, y, kh, kw, lo, hi, q0, q1, sh, sw, dh, dw, pt, pl, act, a0, a1, 7)


def direct8(x, wq, b, y, kh, kw, lo, hi, q0, q1, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """``_direct`` eight positions a step."""
    _direct(x, wq, b, y, kh, kw, lo, hi, q0, q1, sh, sw, dh, dw, pt, pl, act, a0, a1, 8)


def build(numba_module, positions: int = 8):
    """``direct7`` or ``direct8`` (``positions``) compiled for ``(float32 4-d, float32 3-d,
    float32 1-d, float32 4-d, int64 x 13, float32 x 2)``, releasing the GIL, cached."""
    nb = numba_module
    f4, i8, f = nb.float32[:, :, :, ::1], nb.int64, nb.float32
    sig = nb.void(f4, nb.float32[:, :, ::1], nb.float32[::1], f4, *(i8,) * 13, f, f)
    return nb.njit(sig, cache=True, nogil=True)(direct7 if positions == 7 else direct8)

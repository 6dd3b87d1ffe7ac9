"""The numba code of ``depthwise.py``'s kernel, at module level so that numba's cache
recognises it in every process; its loops use ``simd.py``'s vectors. Imported only when the
kernel is built (``depthwise._build``): importing it imports numba and llvmlite."""

from __future__ import annotations

import numba
import numpy as np

from mnnpy.backends.cpu.kernels.simd import (
    activate,
    transpose16,
    vadd,
    vbcast,
    vfma,
    vload,
    vload_all,
    vsplat,
    vstore,
    vstore_all,
)

V = 16  # lanes of a vector


@numba.njit(cache=True, nogil=True)
def grid(x, w, y, sh, sw, dh, dw, pt, pl):  # pragma: no cover - compiled
    """``(Hq, Wq)``: each phase plane's grid (``depthwise.py``'s module doc)."""
    ho, wo = y.shape[2], y.shape[3]
    hq = -(-max(x.shape[2] + pt, (ho - 1) * sh + (w.shape[1] - 1) * dh + 1) // sh)
    wq = -(-max(x.shape[3] + pl, (wo - 1) * sw + (w.shape[2] - 1) * dw + 1) // sw)
    return hq, wq


@numba.njit(inline="always", cache=True)
def _tap_all(buf, wt, o, s0, s1, s2, s3):  # pragma: no cover - compiled
    """``_tap`` on four whole vectors (plain loads)."""
    return (
        vfma(wt, vload_all(buf, o), s0),
        vfma(wt, vload_all(buf, o + V), s1),
        vfma(wt, vload_all(buf, o + 2 * V), s2),
        vfma(wt, vload_all(buf, o + 3 * V), s3),
    )


@numba.njit(inline="always", cache=True)
def _tap(buf, wt, o, s0, s1, s2, s3, n0, n1, n2, n3):  # pragma: no cover - compiled
    """One kernel tap (weight ``wt`` in every lane, its slice at ``o``) added to four vectors of sums."""
    return (
        vfma(wt, vload(buf, o, n0), s0),
        vfma(wt, vload(buf, o + V, n1), s1),
        vfma(wt, vload(buf, o + 2 * V, n2), s2),
        vfma(wt, vload(buf, o + 3 * V, n3), s3),
    )


def planes(x, w, b, y, lo, hi, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """Output planes ``lo <= n*C + c < hi`` of ``y`` (``depthwise.py``'s module doc).

    One phase buffer serves all of them: row ``a*sw + e`` of ``buf`` is phase ``(a, e)``,
    ``X_pad[a::sh, e::sw]``; its padding is zeroed once and each plane overwrites the rest.
    """
    u = np.uint64
    h, wd = x.shape[2], x.shape[3]
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    c_ = x.shape[1]
    hq, wq = grid(x, w, y, sh, sw, dh, dw, pt, pl)
    p = hq * wq
    span = (ho - 1) * wq + wo  # the wide (Ho, Wq) grid up to the last output
    buf = np.zeros(sh * sw * p, np.float32)
    acc = np.empty(span, np.float32)
    xf, yf, wf = x.reshape(-1), y.reshape(-1), w.reshape(-1)
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
        if sw == 1:  # rows copied whole, a vector at a time
            for k in range(h):
                d0, s0 = fd[k], base + fs[k]
                for i in range(0, wd, V):
                    n = min(V, wd - i)
                    vstore(buf, d0 + i, vload(xf, s0 + i, n), n)
        elif sw == 2:
            # both column phases of a row in one loop over column pairs (phase e holds the
            # columns ix with (ix + pl) % 2 == e); unsigned indices: numba then tests no
            # negative index and the loop vectorises
            pairs, e0 = wd // 2, pl % 2
            for iy in range(h):
                de, do = u(fd[iy * 2 + e0]), u(fd[iy * 2 + 1 - e0])  # even / odd input columns
                s0 = u(base + iy * wd)
                for j in range(pairs):
                    buf[de + u(j)] = xf[s0 + u(2 * j)]
                    buf[do + u(j)] = xf[s0 + u(2 * j + 1)]
                if wd % 2:
                    buf[de + u(pairs)] = xf[s0 + u(wd - 1)]
        else:
            usw = u(sw)
            for k in range(h * sw):
                d0, s0 = u(fd[k]), u(base + fs[k])
                for i in range(fc[k]):
                    buf[d0 + u(i)] = xf[s0 + u(i) * usw]
        # the sums on the wide grid, four vectors at a time (four independent chains of
        # fused multiply-adds, every tap's weight broadcast), starting from the bias
        w0 = c * kk
        bias = vsplat(b[c])
        zero = vsplat(np.float32(0.0))
        if kk == 9:  # 3x3: the nine weights and offsets held in registers, the taps unrolled
            w_0, w_1, w_2 = vbcast(wf, w0), vbcast(wf, w0 + 1), vbcast(wf, w0 + 2)
            w_3, w_4, w_5 = vbcast(wf, w0 + 3), vbcast(wf, w0 + 4), vbcast(wf, w0 + 5)
            w_6, w_7, w_8 = vbcast(wf, w0 + 6), vbcast(wf, w0 + 7), vbcast(wf, w0 + 8)
            o0, o1, o2, o3, o4 = toff[0], toff[1], toff[2], toff[3], toff[4]
            o5, o6, o7, o8 = toff[5], toff[6], toff[7], toff[8]
            whole = span - span % (4 * V)
            for j in range(0, whole, 4 * V):
                s0, s1, s2, s3 = _tap_all(buf, w_0, o0 + j, bias, bias, bias, bias)
                t0, t1, t2, t3 = _tap_all(buf, w_5, o5 + j, zero, zero, zero, zero)
                s0, s1, s2, s3 = _tap_all(buf, w_1, o1 + j, s0, s1, s2, s3)
                t0, t1, t2, t3 = _tap_all(buf, w_6, o6 + j, t0, t1, t2, t3)
                s0, s1, s2, s3 = _tap_all(buf, w_2, o2 + j, s0, s1, s2, s3)
                t0, t1, t2, t3 = _tap_all(buf, w_7, o7 + j, t0, t1, t2, t3)
                s0, s1, s2, s3 = _tap_all(buf, w_3, o3 + j, s0, s1, s2, s3)
                t0, t1, t2, t3 = _tap_all(buf, w_8, o8 + j, t0, t1, t2, t3)
                s0, s1, s2, s3 = _tap_all(buf, w_4, o4 + j, s0, s1, s2, s3)
                vstore_all(acc, j, vadd(s0, t0))
                vstore_all(acc, j + V, vadd(s1, t1))
                vstore_all(acc, j + 2 * V, vadd(s2, t2))
                vstore_all(acc, j + 3 * V, vadd(s3, t3))
            for j in range(whole, span, 4 * V):
                n0 = min(V, span - j)
                n1 = max(0, min(V, span - j - V))
                n2 = max(0, min(V, span - j - 2 * V))
                n3 = max(0, min(V, span - j - 3 * V))
                # two chains of sums per vector (taps 0-4 from the bias, 5-8 from zero): eight
                # independent chains keep both FMA units busy despite their latency
                s0, s1, s2, s3 = _tap(buf, w_0, o0 + j, bias, bias, bias, bias, n0, n1, n2, n3)
                t0, t1, t2, t3 = _tap(buf, w_5, o5 + j, zero, zero, zero, zero, n0, n1, n2, n3)
                s0, s1, s2, s3 = _tap(buf, w_1, o1 + j, s0, s1, s2, s3, n0, n1, n2, n3)
                t0, t1, t2, t3 = _tap(buf, w_6, o6 + j, t0, t1, t2, t3, n0, n1, n2, n3)
                s0, s1, s2, s3 = _tap(buf, w_2, o2 + j, s0, s1, s2, s3, n0, n1, n2, n3)
                t0, t1, t2, t3 = _tap(buf, w_7, o7 + j, t0, t1, t2, t3, n0, n1, n2, n3)
                s0, s1, s2, s3 = _tap(buf, w_3, o3 + j, s0, s1, s2, s3, n0, n1, n2, n3)
                t0, t1, t2, t3 = _tap(buf, w_8, o8 + j, t0, t1, t2, t3, n0, n1, n2, n3)
                s0, s1, s2, s3 = _tap(buf, w_4, o4 + j, s0, s1, s2, s3, n0, n1, n2, n3)
                vstore(acc, j, vadd(s0, t0), n0)
                vstore(acc, j + V, vadd(s1, t1), n1)
                vstore(acc, j + 2 * V, vadd(s2, t2), n2)
                vstore(acc, j + 3 * V, vadd(s3, t3), n3)
        # other kernels: passes over the grid eight taps at a time, then four, then one (long
        # contiguous loops the compiler vectorises; the first pass starts from the bias, the
        # last tap is added in the crop)
        t = 0
        if kk != 9:
            if kk >= 8:
                s0, s1, s2, s3 = u(toff[0]), u(toff[1]), u(toff[2]), u(toff[3])
                s4, s5, s6, s7 = u(toff[4]), u(toff[5]), u(toff[6]), u(toff[7])
                v0, v1, v2, v3 = wf[w0], wf[w0 + 1], wf[w0 + 2], wf[w0 + 3]
                v4, v5, v6, v7 = wf[w0 + 4], wf[w0 + 5], wf[w0 + 6], wf[w0 + 7]
                for j in range(span):
                    acc[j] = b[c] + (
                        (v0 * buf[s0 + u(j)] + v1 * buf[s1 + u(j)] + v2 * buf[s2 + u(j)] + v3 * buf[s3 + u(j)])
                        + (v4 * buf[s4 + u(j)] + v5 * buf[s5 + u(j)] + v6 * buf[s6 + u(j)] + v7 * buf[s7 + u(j)])
                    )
                t = 8
            else:
                for j in range(span):
                    acc[j] = b[c]
            while t + 8 <= kk - 1:
                s0, s1, s2, s3 = u(toff[t]), u(toff[t + 1]), u(toff[t + 2]), u(toff[t + 3])
                s4, s5, s6, s7 = u(toff[t + 4]), u(toff[t + 5]), u(toff[t + 6]), u(toff[t + 7])
                v0, v1, v2, v3 = wf[w0 + t], wf[w0 + t + 1], wf[w0 + t + 2], wf[w0 + t + 3]
                v4, v5, v6, v7 = wf[w0 + t + 4], wf[w0 + t + 5], wf[w0 + t + 6], wf[w0 + t + 7]
                for j in range(span):
                    acc[j] += (v0 * buf[s0 + u(j)] + v1 * buf[s1 + u(j)] + v2 * buf[s2 + u(j)] + v3 * buf[s3 + u(j)]) + (
                        v4 * buf[s4 + u(j)] + v5 * buf[s5 + u(j)] + v6 * buf[s6 + u(j)] + v7 * buf[s7 + u(j)]
                    )
                t += 8
            while t + 4 <= kk - 1:
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
        # cropped to Wo columns into y, with the last tap of other kernels than 3x3 and the
        # activation applied on the way
        last = kk != 9 and t < kk
        vl = vbcast(wf, w0 + t) if last else zero
        tl = toff[t] if last else 0
        for oy in range(ho):
            src, dst = oy * wq, (nc * ho + oy) * wo
            for ox in range(0, wo, V):
                n = min(V, wo - ox)
                r = vload(acc, src + ox, n)
                if last:
                    r = vfma(vl, vload(buf, tl + src + ox, n), r)
                vstore(yf, dst + ox, activate(r, act, a0, a1), n)


PR = 8  # output positions of one step of ``blocks`` (eight chains of fused multiply-adds)


@numba.njit(inline="always", cache=True)
def _step(bufc, wblk, bias, kk, toff, o, st, outc, oo, n, act, a0, a1):  # pragma: no cover - compiled
    """``PR`` output positions of one channel block (``n`` of them kept: ``outc`` has room for
    ``PR`` past its last position): position ``i``'s taps start at ``o + i*st`` in ``bufc``, its
    16 channels go to ``outc`` at ``oo + 16*i``."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = bias
    for t in range(kk):
        wt = vload_all(wblk, 16 * t)
        q = o + toff[t]
        s0 = vfma(wt, vload_all(bufc, q), s0)
        s1 = vfma(wt, vload_all(bufc, q + st), s1)
        s2 = vfma(wt, vload_all(bufc, q + 2 * st), s2)
        s3 = vfma(wt, vload_all(bufc, q + 3 * st), s3)
        s4 = vfma(wt, vload_all(bufc, q + 4 * st), s4)
        s5 = vfma(wt, vload_all(bufc, q + 5 * st), s5)
        s6 = vfma(wt, vload_all(bufc, q + 6 * st), s6)
        s7 = vfma(wt, vload_all(bufc, q + 7 * st), s7)
    vstore_all(outc, oo, s0)
    vstore_all(outc, oo + 16, s1)
    vstore_all(outc, oo + 32, s2)
    vstore_all(outc, oo + 48, s3)
    vstore_all(outc, oo + 64, s4)
    vstore_all(outc, oo + 80, s5)
    vstore_all(outc, oo + 96, s6)
    vstore_all(outc, oo + 112, s7)
    if act:  # one loop over the stored sums: the activation's branches compiled once
        for i in range(n):
            vstore_all(outc, oo + 16 * i, activate(vload_all(outc, oo + 16 * i), act, a0, a1))


def blocks(x, w, b, y, lo, hi, sh, sw, dh, dw, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """Blocks of 16 channels ``lo <= n*ceil(C/16) + cb < hi`` of ``y`` with the channels in the
    vector lanes (``depthwise.py``'s module doc): the block's planes transposed into a
    zero-padded ``(Hp, Wp, 16)`` buffer, ``PR`` outputs at a time summed over the taps (one
    fused multiply-add per tap and 16 channels), the activation applied, and the ``(Ho, Wo, 16)``
    result transposed back into the planes of ``y`` (``simd.transpose16``)."""
    c_, h, wd = x.shape[1], x.shape[2], x.shape[3]
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    kk = kh * kw
    hp = max(h + pt, (ho - 1) * sh + (kh - 1) * dh + 1)
    wp = max(wd + pl, (wo - 1) * sw + (kw - 1) * dw + 1)
    # the last step of a row reads up to PR - 1 positions past it: slack after the last row
    bufc = np.zeros((hp * wp + PR * sw) * 16, np.float32)
    outc = np.empty((ho * wo + PR) * 16, np.float32)
    stage = np.empty((h * wd + 16) * 16, np.float32)  # short rows' positions before their rows are placed
    wblk = np.zeros(kk * 16, np.float32)
    bblk = np.zeros(16, np.float32)
    toff = np.zeros(kk, np.int64)
    for ky in range(kh):
        for kx in range(kw):
            toff[ky * kw + kx] = (ky * dh * wp + kx * dw) * 16
    xf, yf, wf = x.reshape(-1), y.reshape(-1), w.reshape(-1)
    cb_ = (c_ + 15) // 16
    for unit in range(lo, hi):
        n, cb = unit // cb_, unit % cb_
        c0 = cb * 16
        nc = min(16, c_ - c0)
        for lane in range(16):
            bblk[lane] = b[c0 + lane] if lane < nc else np.float32(0.0)
            for t in range(kk):
                wblk[t * 16 + lane] = wf[(c0 + lane) * kk + t] if lane < nc else np.float32(0.0)
        xbase, hwi = (n * c_ + c0) * h * wd, h * wd
        if wd < 16:  # short rows: 16 positions at a time across rows, then each row into place
            for q0 in range(0, hwi, 16):
                transpose16(xf, xbase + q0, hwi, nc, min(16, hwi - q0), stage, q0 * 16, 16)
            for iy in range(h):
                d0, s0 = ((iy + pt) * wp + pl) * 16, iy * wd * 16
                for j in range(wd):
                    vstore_all(bufc, d0 + 16 * j, vload_all(stage, s0 + 16 * j))
        else:
            for iy in range(h):
                for ix0 in range(0, wd, 16):
                    transpose16(xf, xbase + iy * wd + ix0, hwi, nc, min(16, wd - ix0), bufc, ((iy + pt) * wp + ix0 + pl) * 16, 16)
        bias = vload_all(bblk, 0)
        for oy in range(ho):
            for ox in range(0, wo, PR):
                _step(
                    bufc,
                    wblk,
                    bias,
                    kk,
                    toff,
                    (oy * sh * wp + ox * sw) * 16,
                    sw * 16,
                    outc,
                    (oy * wo + ox) * 16,
                    min(PR, wo - ox),
                    act,
                    a0,
                    a1,
                )
        ybase, hw = (n * c_ + c0) * ho * wo, ho * wo
        for q0 in range(0, hw, 16):  # the planes are contiguous: 16 positions at a time across rows
            transpose16(outc, q0 * 16, 16, min(16, hw - q0), nc, yf, ybase + q0, hw)


def _compiled(nb, fn):
    """``fn`` (``planes`` or ``blocks``: one signature) compiled for ``(float32 4-d, float32 3-d,
    float32 1-d, float32 4-d, int64 x 9, float32 x 2)``, releasing the GIL, cached."""
    f4, i8, f = nb.float32[:, :, :, ::1], nb.int64, nb.float32
    sig = nb.void(f4, nb.float32[:, :, ::1], nb.float32[::1], f4, *(i8,) * 9, f, f)
    return nb.njit(sig, cache=True, nogil=True)(fn)


def build_blocks(numba_module):
    """``blocks`` compiled (``_compiled``)."""
    return _compiled(numba_module, blocks)


def build(numba_module):
    """``planes`` compiled (``_compiled``)."""
    return _compiled(numba_module, planes)

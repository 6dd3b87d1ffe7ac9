"""The numba code of ``packed_gemm.py``'s kernel, at module level so that numba's cache
recognises it in every process. Imported only when the kernel is built (``packed_gemm._build``):
importing it imports numba and llvmlite."""

from __future__ import annotations

import numba
import numpy as np

from mnnpy.backends.cpu.kernels.simd import activate, prefetch, vadd, vbcast, vfma, vload, vsplat, vstore, vzero

MR = 8  # rows of a weight panel (packed_gemm.MR)
KC = 256  # rows of X in one pass over the output (packed_gemm.KC)
NR = 32  # output columns of one pass of the inner loop: two vectors
PREFETCH = 256  # floats of packed weights (1 KiB, 32 steps of k) asked for ahead of their use


@numba.njit(inline="always", cache=True)
def _row(yf, yo, lo, hi, n0, n1, first):  # pragma: no cover - compiled
    """Store one output row's two vectors of sums (``n0``, ``n1`` lanes), added to what is there
    unless ``first``."""
    if not first:
        lo = vadd(lo, vload(yf, yo, n0))
        hi = vadd(hi, vload(yf, yo + 16, n1))
    vstore(yf, yo, lo, n0)
    if n1 > 0:
        vstore(yf, yo + 16, hi, n1)


@numba.njit(cache=True)
def _finish(yf, yo, ly, rows, b, r, n0, n1, act, a0, a1):  # pragma: no cover - compiled
    """Bias and activation on the tile just stored (``rows`` rows from output row ``r``, still in
    cache): one loop, so the activation's branches are compiled once, not once per register."""
    nb = b.shape[0]
    for i in range(rows):
        bias = vsplat(b[(r + i) % nb] if nb else np.float32(0.0))
        o = yo + i * ly
        vstore(yf, o, activate(vadd(vload(yf, o, n0), bias), act, a0, a1), n0)
        if n1 > 0:
            vstore(yf, o + 16, activate(vadd(vload(yf, o + 16, n1), bias), act, a0, a1), n1)


def packed(wp, x, y, b, r0, r1, xc0, yc0, cols, act, a0, a1):  # pragma: no cover - compiled
    """``packed_gemm.py``'s kernel (its module doc)."""
    k, lx, ly, m = x.shape[1], x.shape[2], y.shape[2], y.shape[1]
    xf, yf, wf = x.reshape(-1), y.reshape(-1), wp.reshape(-1)
    nb = b.shape[0]
    p0, p1 = r0 // MR, (r1 + MR - 1) // MR
    xs = np.empty(KC * NR, np.float32)  # the pass's columns of X, contiguous (written whole before each read)
    for j in range(x.shape[0]):
        wj = j if wp.shape[0] > 1 else 0
        for k0 in range(0, k, KC):
            k1 = min(k, k0 + KC)
            first, last = k0 == 0, k1 == k
            # copy the strip when its rows are far apart (TLB) and several panels read it
            copy = lx > 64 and p1 - p0 > 1 and k1 - k0 >= 32
            for s in range(0, cols, NR):
                n0 = min(16, cols - s)
                n1 = min(16, cols - s - n0)
                src, step, xb = xf, lx, (j * k + k0) * lx + xc0 + s
                if copy:
                    o = 0
                    for _ in range(k1 - k0):
                        vstore(xs, o, vload(xf, xb, n0), 16)
                        vstore(xs, o + 16, vload(xf, xb + 16, n1), 16)
                        xb += lx
                        o += NR
                    src, step, xb = xs, NR, 0
                for p in range(p0, p1):
                    c0 = vzero()
                    c1 = vzero()
                    c2 = vzero()
                    c3 = vzero()
                    c4 = vzero()
                    c5 = vzero()
                    c6 = vzero()
                    c7 = vzero()
                    d0 = vzero()
                    d1 = vzero()
                    d2 = vzero()
                    d3 = vzero()
                    d4 = vzero()
                    d5 = vzero()
                    d6 = vzero()
                    d7 = vzero()
                    xo = xb
                    wo = (wj * wp.shape[1] * k + k0 * wp.shape[1] + p * (k1 - k0)) * MR  # pass k0's panels in a row
                    for _ in range(k1 - k0):
                        lo = vload(src, xo, n0)
                        hi = vload(src, xo + 16, n1)
                        w = vbcast(wf, wo)
                        c0, d0 = vfma(w, lo, c0), vfma(w, hi, d0)
                        w = vbcast(wf, wo + 1)
                        c1, d1 = vfma(w, lo, c1), vfma(w, hi, d1)
                        w = vbcast(wf, wo + 2)
                        c2, d2 = vfma(w, lo, c2), vfma(w, hi, d2)
                        w = vbcast(wf, wo + 3)
                        c3, d3 = vfma(w, lo, c3), vfma(w, hi, d3)
                        w = vbcast(wf, wo + 4)
                        c4, d4 = vfma(w, lo, c4), vfma(w, hi, d4)
                        w = vbcast(wf, wo + 5)
                        c5, d5 = vfma(w, lo, c5), vfma(w, hi, d5)
                        w = vbcast(wf, wo + 6)
                        c6, d6 = vfma(w, lo, c6), vfma(w, hi, d6)
                        w = vbcast(wf, wo + 7)
                        c7, d7 = vfma(w, lo, c7), vfma(w, hi, d7)
                        prefetch(wf, wo + PREFETCH)  # the weights stream from memory: ask ahead
                        xo += step
                        wo += MR
                    r = p * MR
                    yo = (j * m + r) * ly + yc0 + s
                    if r < r1:
                        _row(yf, yo, c0, d0, n0, n1, first)
                    if r + 1 < r1:
                        _row(yf, yo + ly, c1, d1, n0, n1, first)
                    if r + 2 < r1:
                        _row(yf, yo + 2 * ly, c2, d2, n0, n1, first)
                    if r + 3 < r1:
                        _row(yf, yo + 3 * ly, c3, d3, n0, n1, first)
                    if r + 4 < r1:
                        _row(yf, yo + 4 * ly, c4, d4, n0, n1, first)
                    if r + 5 < r1:
                        _row(yf, yo + 5 * ly, c5, d5, n0, n1, first)
                    if r + 6 < r1:
                        _row(yf, yo + 6 * ly, c6, d6, n0, n1, first)
                    if r + 7 < r1:
                        _row(yf, yo + 7 * ly, c7, d7, n0, n1, first)
                    if last and (nb or act):
                        _finish(yf, yo, ly, min(MR, r1 - r), b, r, n0, n1, act, a0, a1)


def build(numba_module):
    """``packed`` compiled for ``(float32 4-d, float32 3-d x 2, float32 1-d, int64 x 6, float32
    x 2)``, releasing the GIL, cached."""
    nb = numba_module
    f3, i8, f = nb.float32[:, :, ::1], nb.int64, nb.float32
    sig = nb.void(nb.float32[:, :, :, ::1], f3, f3, nb.float32[::1], i8, i8, i8, i8, i8, i8, f, f)
    return nb.njit(sig, nogil=True, cache=True)(packed)


def pack(w, out):  # pragma: no cover - compiled
    """``packed_gemm.pack``'s panels, compiled: ``w: (Bw, M, K)`` -> ``out: (Bw, P, K, MR)``,
    pass by pass of ``KC`` rows of ``K``, zero rows past ``M``."""
    bw, m, k = w.shape
    panels, mr = out.shape[1], out.shape[3]
    flat = out.reshape(bw, panels * k * mr)
    for b in range(bw):
        for k0 in range(0, k, KC):
            kc = min(k, k0 + KC) - k0
            for p in range(panels):
                at = k0 * panels * mr + p * kc * mr
                for i in range(mr):
                    row = p * mr + i
                    if row < m:
                        for kk in range(kc):
                            flat[b, at + kk * mr + i] = w[b, row, k0 + kk]
                    else:
                        for kk in range(kc):
                            flat[b, at + kk * mr + i] = 0.0


def build_pack(numba_module):
    """``pack`` compiled for ``(float32 3-d, float32 4-d)``, releasing the GIL, cached."""
    nb = numba_module
    return nb.njit(nb.void(nb.float32[:, :, ::1], nb.float32[:, :, :, ::1]), nogil=True, cache=True)(pack)

"""Winograd minimal filtering F(m x m, 3 x 3) for 2-D Conv (numba kernels and the transforms).

Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks" (CVPR 2016): an
``m x m`` output tile of a 3x3, stride-1 correlation is ``A^T [(G g G^T) . (B^T d B)] A``,
with ``d`` the ``a x a`` input tile (``a = m + 2``) and ``.`` the elementwise product. Over
``C`` input and ``M`` output channels the elementwise products become ``a*a`` independent
matrix products, one per tile position ``k = (i, j)``::

    U[k] (M, C) = (G g G^T)[k]                 weights, transformed once (``weights``)
    V[k] (C, T) = (B^T d B)[k] for T tiles     ``input_tiles``
    P[k] (M, T) = U[k] @ V[k]                  BLAS, by the caller
    Y tile      = A^T P A + bias, activation   ``output_tiles``

``m = 4`` (6x6 tiles, 36 products, 4x fewer multiplications than direct) and ``m = 2`` (4x4
tiles, 16 products, 2.25x fewer, smaller rounding error) with the interpolation points
0, +-1, +-2 (Lavin and Gray's F(4x4, 3x3) matrices) and 0, +-1.

Tiles are numbered ``t = ty * TW + tx`` over a band of tile rows of one image (``TW =
ceil(Wo / m)`` tiles a row); tile ``(ty, tx)`` reads input rows ``ty*m - pt ..`` and columns
``tx*m - pl ..``, zero outside ``x`` (the padding is handled here, no padded copy), and writes
output rows ``ty*m ..`` and columns ``tx*m ..`` cropped to ``(Ho, Wo)``. Both kernels work on
one channel at a time with loops running over all tiles of the band, contiguous, so they
vectorise; they release the GIL (callers split channels or bands over their threads).

Fused activation codes: those of the shared epilogue (``kernels/epilogue.py``: none, Relu,
Clip, LeakyRelu, HardSigmoid, HardSwish), applied by it to each finished band of a channel.

Non-finite inputs: the transforms add and subtract neighbouring inputs, so one inf or NaN
reaches every output of its tiles (inf - inf), where the convolution's definition gives
non-finite values only to the outputs whose window reads it; a finite value near float32's
limit overflows in them the same way. ``input_tiles`` therefore reports whether every input it
read was finite and at most ``LARGE`` (2^100) in magnitude, and the caller recomputes a Conv
whose input was not with ``exact`` (the definition's sum, tap by tap, IEEE semantics as onnxruntime's).
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels.epilogue import compiled_with_span

# F(4x4, 3x3): points 0, 1, -1, 2, -2, infinity
_BT4 = [
    [4, 0, -5, 0, 1, 0],
    [0, -4, -4, 1, 1, 0],
    [0, 4, -4, -1, 1, 0],
    [0, -2, -1, 2, 1, 0],
    [0, 2, -1, -2, 1, 0],
    [0, 4, 0, -5, 0, 1],
]
_G4 = [
    [1 / 4, 0, 0],
    [-1 / 6, -1 / 6, -1 / 6],
    [-1 / 6, 1 / 6, -1 / 6],
    [1 / 24, 1 / 12, 1 / 6],
    [1 / 24, -1 / 12, 1 / 6],
    [0, 0, 1],
]
_AT4 = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
# F(2x2, 3x3): points 0, 1, -1, infinity
_BT2 = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
_G2 = [[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]
_AT2 = [[1, 1, 1, 0], [0, 1, -1, -1]]

MATRICES = {m: tuple(np.array(a, np.float64) for a in mats) for m, mats in ((4, (_BT4, _G4, _AT4)), (2, (_BT2, _G2, _AT2)))}


def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B^T (a, a), G (a, 3), A^T (m, a))`` float64 for F(m x m, 3 x 3), ``m`` 2 or 4."""
    return MATRICES[m]


def weights(w: np.ndarray, m: int) -> np.ndarray:
    """``U: (a*a, M, C) float32``, ``U[i*a + j] = (G w G^T)[i, j]`` for ``w: (M, C, 3, 3)``,
    computed as one product: ``vec(G w G^T) = (G kron G) vec(w)`` (one GEMM over all ``M*C``
    kernels rather than ``M*C`` tiny ones), in float32: within 6e-8 of the float64 product
    relative to its largest value for a 512x512 layer, at 5-13 ms against 18-220 ms."""
    g = matrices(m)[1]
    k = np.kron(g, g).astype(np.float32)  # (a*a, 9)
    u = k @ np.asarray(w, np.float32).reshape(-1, 9).T  # (a*a, M*C)
    return u.reshape(-1, w.shape[0], w.shape[1])


Z = np.float32(0)


F2, F4, F5, F8 = (np.float32(k) for k in (2, 4, 5, 8))  # float32 constants keep numba's arithmetic in float32
# inputs beyond this magnitude take the exact path: the transforms multiply by up to about
# 100 (F(4x4)) and the products sum C of them, so a finite 1e37 overflowed to inf - inf
LARGE = np.float32(2.0**100)


def _input_tiles(x, v, n, c0, c1, ty0, ty1, tw, pt, pl, m, flags, slot):  # pragma: no cover - compiled
    """``v[k, c, t] = (B^T d B)[k]`` for channels ``c0 <= c < c1`` of image ``n`` and the band
    of tile rows ``ty0 <= ty < ty1`` (``t = (ty - ty0) * tw + tx``); ``x: (N, C, H, W)``,
    ``v: (a*a, C, >= T)``, ``m`` 2 or 4. ``flags[slot]`` (int64) is set to 1 where an input
    read was inf, NaN or of a magnitude over ``LARGE``, else 0 (module doc).

    Per channel, first each of the band's ``m*(ty1-ty0) + 2`` input rows (copied, zero-padded,
    into a row buffer) is transformed along its columns, tile by tile, into ``hb``, laid out by
    row phase ``R % m`` so that for every tap row ``r`` the rows ``ty*m + r`` of all the band's
    tiles are one contiguous run of ``T``; then the row transform combines those runs into
    ``v``: one loop over all ``T`` tiles per column ``k``, which vectorises.
    """
    u = np.uint64
    a = m + 2
    h, wd, cc, cap = x.shape[2], x.shape[3], x.shape[1], v.shape[2]
    nty = ty1 - ty0
    nt = nty * tw
    nrow = m * nty + 2
    nq = nty + 1  # rows per phase
    plane = nq * tw
    hb = np.zeros(m * a * plane, np.float32)
    width = m * tw + 2
    row = np.zeros(m * (tw + 1), np.float32)
    w1, w2, w3 = tw + 1, 2 * (tw + 1), 3 * (tw + 1)
    ph = np.zeros(m * (tw + 1), np.float32)
    jlo, jhi = min(max(pl, 0), width), min(max(pl + wd, 0), width)  # row columns inside x
    xf, vf = x.reshape(-1), v.reshape(-1)
    finite = True
    for c in range(c0, c1):
        for rr in range(nrow):
            iy = ty0 * m - pt + rr
            base = u((rr % m) * a * plane + (rr // m) * tw)
            if iy < 0 or iy >= h:
                for k in range(a):
                    for tx in range(tw):
                        hb[base + u(k * plane + tx)] = 0.0
                continue
            src = u(((n * cc + c) * h + iy) * wd + jlo - pl)
            for j in range(jhi - jlo):
                e = xf[src + u(j)]
                row[u(jlo + j)] = e
                finite &= abs(e) <= LARGE  # False for inf, NaN and values the transforms could overflow
            # deinterleave the padded row by column phase: ph[e, q] = row[q*m + e]
            if m == 4:
                for q in range(tw + 1):
                    o = u(4 * q)
                    ph[u(q)], ph[u(w1 + q)], ph[u(w2 + q)], ph[u(w3 + q)] = row[o], row[o + u(1)], row[o + u(2)], row[o + u(3)]
                for tx in range(tw):
                    ut = u(tx)
                    d0, d1, d2, d3 = ph[ut], ph[u(w1) + ut], ph[u(w2) + ut], ph[u(w3) + ut]
                    d4, d5 = ph[ut + u(1)], ph[u(w1 + 1) + ut]
                    t = base + ut
                    hb[t] = F4 * d0 - F5 * d2 + d4
                    hb[t + u(plane)] = d3 + d4 - F4 * (d1 + d2)
                    hb[t + u(2 * plane)] = d4 - d3 + F4 * (d1 - d2)
                    hb[t + u(3 * plane)] = d4 - d2 + F2 * (d3 - d1)
                    hb[t + u(4 * plane)] = d4 - d2 + F2 * (d1 - d3)
                    hb[t + u(5 * plane)] = F4 * d1 - F5 * d3 + d5
            else:
                for q in range(tw + 1):
                    o = u(2 * q)
                    ph[u(q)], ph[u(w1 + q)] = row[o], row[o + u(1)]
                for tx in range(tw):
                    ut = u(tx)
                    d0, d1, d2, d3 = ph[ut], ph[u(w1) + ut], ph[ut + u(1)], ph[u(w1 + 1) + ut]
                    t = base + ut
                    hb[t] = d0 - d2
                    hb[t + u(plane)] = d1 + d2
                    hb[t + u(2 * plane)] = d2 - d1
                    hb[t + u(3 * plane)] = d1 - d3
        for k in range(a):
            # tap row r of tile row ty is band row ty*m + r: phase r % m, run offset (r // m)*tw
            s0 = u(k * plane)
            dst = u((k * cc + c) * cap)
            step = u(a * cc * cap)  # from v[i*a + k] to v[(i+1)*a + k]
            if m == 4:
                s1, s2, s3 = s0 + u(a * plane), s0 + u(2 * a * plane), s0 + u(3 * a * plane)
                s4, s5 = s0 + u(tw), s1 + u(tw)
                for t in range(nt):
                    ut = u(t)
                    d0, d1, d2, d3, d4, d5 = hb[s0 + ut], hb[s1 + ut], hb[s2 + ut], hb[s3 + ut], hb[s4 + ut], hb[s5 + ut]
                    e = dst + ut
                    vf[e] = F4 * d0 - F5 * d2 + d4
                    vf[e + step] = d3 + d4 - F4 * (d1 + d2)
                    vf[e + u(2) * step] = d4 - d3 + F4 * (d1 - d2)
                    vf[e + u(3) * step] = d4 - d2 + F2 * (d3 - d1)
                    vf[e + u(4) * step] = d4 - d2 + F2 * (d1 - d3)
                    vf[e + u(5) * step] = F4 * d1 - F5 * d3 + d5
            else:
                s1 = s0 + u(a * plane)
                s2, s3 = s0 + u(tw), s1 + u(tw)
                for t in range(nt):
                    ut = u(t)
                    d0, d1, d2, d3 = hb[s0 + ut], hb[s1 + ut], hb[s2 + ut], hb[s3 + ut]
                    e = dst + ut
                    vf[e] = d0 - d2
                    vf[e + step] = d1 + d2
                    vf[e + u(2) * step] = d2 - d1
                    vf[e + u(3) * step] = d1 - d3
    flags[slot] = 0 if finite else 1


def _exact(x, w, b, y, n, m0, m1, pt, pl, act, a0, a1):  # pragma: no cover - compiled
    """``y[n, o] = act(b[o] + sum_{c, i, j} w[o, c, i, j] * x_pad[n, c, oy + i, ox + j])`` for
    output channels ``m0 <= o < m1``: the 3x3 stride-1 Conv by its definition (ONNX Conv),
    tap by tap over whole output rows; ``x: (N, C, H, W)``, ``w: (M, C, 3, 3)``, ``b: (M,)``,
    ``y: (N, M, Ho, Wo)``, padding ``pt`` rows above and ``pl`` columns left, zero. Used where
    an input is not finite or over ``LARGE`` (module doc): every output gets exactly the
    values its window gives, in IEEE arithmetic."""
    h, wd, cc = x.shape[2], x.shape[3], x.shape[1]
    ho, wo = y.shape[2], y.shape[3]
    for o in range(m0, m1):
        for oy in range(ho):
            for ox in range(wo):
                y[n, o, oy, ox] = b[o]
        for c in range(cc):
            for i in range(3):
                for j in range(3):
                    k = w[o, c, i, j]
                    x0, x1 = max(0, pl - j), min(wo, wd + pl - j)  # outputs whose tap column lies in x
                    for oy in range(ho):
                        iy = oy + i - pt
                        if iy < 0 or iy >= h:
                            continue
                        for ox in range(x0, x1):
                            y[n, o, oy, ox] += k * x[n, c, iy, ox + j - pl]
        if act != 0:
            r0 = (n * y.shape[1] + o) * ho * wo
            _span_jit(y.reshape(-1), r0, ho * wo, Z, act, a0, a1)  # noqa: F821


def _output_tiles(p, y, b, n, m0, m1, ty0, ty1, tw, m, act, a0, a1):  # pragma: no cover - compiled
    """``y[n, o, ty*m + i, tx*m + j] = act(b[o] + (A^T p[:, o, t] A)[i, j])`` for output
    channels ``m0 <= o < m1`` and the band of tile rows ``ty0 <= ty < ty1``, cropped to
    ``y``'s ``(Ho, Wo)``; ``p: (a*a, M, >= T)``, ``y: (N, M, Ho, Wo)``, ``b: (M,)``; activation
    codes as in the module doc. Per channel the column transform runs over all ``T`` tiles
    at once into ``s (m, a, T)``; the row transform, bias and activation then write ``y``
    row by row."""
    u = np.uint64
    a = m + 2
    ho, wo, mm, cap = y.shape[2], y.shape[3], y.shape[1], p.shape[2]
    nt = (ty1 - ty0) * tw
    s = np.empty(m * a * nt, np.float32)
    full = min(wo // m, tw)  # tiles of a row whose m columns all lie inside y
    q = np.zeros(6, np.float32)
    pf, yf = p.reshape(-1), y.reshape(-1)
    step = u(mm * cap)  # from p[k] to p[k + 1]
    snt = u(a * nt)  # from s[i] to s[i + 1]
    for c in range(m0, m1):
        for j in range(a):
            src = u((j * mm + c) * cap)
            d = u(j * nt)
            if m == 4:
                for t in range(nt):
                    e = src + u(t)
                    p0, p1, p2, p3, p4, p5 = (
                        pf[e],
                        pf[e + u(6) * step],
                        pf[e + u(12) * step],
                        pf[e + u(18) * step],
                        pf[e + u(24) * step],
                        pf[e + u(30) * step],
                    )
                    f = d + u(t)
                    s[f] = p0 + p1 + p2 + p3 + p4
                    s[f + snt] = p1 - p2 + F2 * (p3 - p4)
                    s[f + u(2) * snt] = p1 + p2 + F4 * (p3 + p4)
                    s[f + u(3) * snt] = p1 - p2 + F8 * (p3 - p4) + p5
            else:
                for t in range(nt):
                    e = src + u(t)
                    p0, p1, p2, p3 = pf[e], pf[e + u(4) * step], pf[e + u(8) * step], pf[e + u(12) * step]
                    f = d + u(t)
                    s[f] = p0 + p1 + p2
                    s[f + snt] = p1 - p2 - p3
        bias = b[c]
        ntu = u(nt)
        for ty in range(ty0, ty1):
            for i in range(m):
                oy = ty * m + i
                if oy >= ho:
                    break
                si = u(i) * snt + u((ty - ty0) * tw)
                yo = u(((n * mm + c) * ho + oy) * wo)
                for tx in range(full):
                    e = si + u(tx)
                    q0, q1, q2 = s[e], s[e + ntu], s[e + u(2) * ntu]
                    q3 = s[e + u(3) * ntu]
                    o = yo + u(m * tx)
                    if m == 4:
                        q4, q5 = s[e + u(4) * ntu], s[e + u(5) * ntu]
                        yf[o] = bias + q0 + q1 + q2 + q3 + q4
                        yf[o + u(1)] = bias + q1 - q2 + F2 * (q3 - q4)
                        yf[o + u(2)] = bias + q1 + q2 + F4 * (q3 + q4)
                        yf[o + u(3)] = bias + q1 - q2 + F8 * (q3 - q4) + q5
                    else:
                        yf[o] = bias + q0 + q1 + q2
                        yf[o + u(1)] = bias + q1 - q2 - q3
                for tx in range(full, tw):  # the last tile of the row, cropped
                    e = si + u(tx)
                    for j in range(a):
                        q[j] = s[e + u(j) * ntu]
                    if m == 4:
                        r = (
                            q[0] + q[1] + q[2] + q[3] + q[4],
                            q[1] - q[2] + F2 * (q[3] - q[4]),
                            q[1] + q[2] + F4 * (q[3] + q[4]),
                            q[1] - q[2] + F8 * (q[3] - q[4]) + q[5],
                        )
                    else:
                        r = (q[0] + q[1] + q[2], q[1] - q[2] - q[3], q[0], q[0])
                    for k in range(m):
                        if tx * m + k < wo:
                            yf[yo + u(m * tx + k)] = bias + r[k]
        if act != 0:  # over the band's rows of this channel, contiguous: the shared epilogue
            r0 = ((n * mm + c) * ho + ty0 * m) * wo
            _span_jit(yf, r0, ((n * mm + c) * ho + min(ty1 * m, ho)) * wo - r0, Z, act, a0, a1)  # noqa: F821


def _build(numba):
    f3, f4, i8, f = numba.float32[:, :, ::1], numba.float32[:, :, :, ::1], numba.int64, numba.float32
    opts = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}
    inp = numba.njit(numba.void(f4, f3, *(i8,) * 9, numba.int64[::1], i8), **opts)(_input_tiles)
    out = numba.njit(numba.void(f3, f4, numba.float32[::1], *(i8,) * 8, f, f), **opts)(_output_tiles)
    exact = numba.njit(numba.void(f4, f4, numba.float32[::1], f4, *(i8,) * 6, f, f), **opts)(_exact)
    return inp, out, exact


def kernels():
    """``(input_tiles, output_tiles, exact)`` compiled (signatures as ``_input_tiles``,
    ``_output_tiles`` and ``_exact``: arrays float32 C-contiguous, ``flags`` int64, ints
    int64, ``a0, a1`` float32), or ``None`` where numba cannot compile here (a warning was
    given)."""
    return compiled_with_span("winograd", _build, globals())

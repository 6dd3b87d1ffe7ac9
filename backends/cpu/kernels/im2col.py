"""im2col for 2-D Conv and the bias + activation epilogue after its product (numba).

``im2col``: for ``x: (N, C, H, W) float32`` and the output rows ``oy0 <= oy < oy1`` of image
``n``, channels ``c0 <= c < c1``::

    col[((c - c0)*KH + ky)*KW + kx, (oy - oy0)*Wo + ox] = x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw]

zero where the tap reads padding (ONNX Conv, operators.md); ``col: (>= (c1-c0)*KH*KW,
>= (oy1-oy0)*Wo)`` C-contiguous, so the product ``W (M, C*KH*KW) @ col`` gives those output
rows (Chellapilla et al., "High Performance Convolutional Neural Networks for Document
Processing", 2006). One pass, every stride, dilation and padding; the columns inside ``x``
are found once per tap column, so the inner loop is a plain (strided for ``sw > 1``) copy.

``epilogue``: ``y[n, o, p] = act(y[n, o, p] + b[o])`` for ``m0 <= o < m1``, ``p0 <= p < p1``
on ``y: (N, M, P)``; activation codes those of the shared epilogue (``kernels/epilogue.py``: none, Relu, Clip,
LeakyRelu, HardSigmoid, HardSwish), which it calls per channel. Both release the GIL; callers split the
work over their threads.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels.epilogue import compiled_with_span

Z = np.float32(0)


def _im2col(x, col, n, c0, c1, oy0, oy1, wo, kh, kw, sh, sw, dh, dw, pt, pl):  # pragma: no cover - compiled
    """Fill ``col`` (see the module doc)."""
    u = np.uint64
    cc, h, wd = x.shape[1], x.shape[2], x.shape[3]
    cap = col.shape[1]
    xf, cf = x.reshape(-1), col.reshape(-1)
    lo = np.empty(kw, np.int64)  # per tap column: the outputs ox whose input column is inside x
    hi = np.empty(kw, np.int64)
    for kx in range(kw):
        off = kx * dw - pl
        a = 0 if off >= 0 else (-off + sw - 1) // sw
        b = (wd - 1 - off) // sw + 1 if wd - 1 - off >= 0 else 0
        lo[kx], hi[kx] = min(a, wo), max(min(a, wo), min(b, wo))
    for c in range(c0, c1):
        for ky in range(kh):
            for kx in range(kw):
                r = u((((c - c0) * kh + ky) * kw + kx) * cap)
                a, b = lo[kx], hi[kx]
                off = kx * dw - pl
                for oy in range(oy0, oy1):
                    d = r + u((oy - oy0) * wo)
                    iy = oy * sh - pt + ky * dh
                    if iy < 0 or iy >= h:
                        for ox in range(wo):
                            cf[d + u(ox)] = Z
                        continue
                    for ox in range(a):
                        cf[d + u(ox)] = Z
                    s = u(((n * cc + c) * h + iy) * wd + off)
                    if sw == 1:
                        for ox in range(a, b):
                            cf[d + u(ox)] = xf[s + u(ox)]
                    else:
                        for ox in range(a, b):
                            cf[d + u(ox)] = xf[s + u(ox * sw)]
                    for ox in range(b, wo):
                        cf[d + u(ox)] = Z


def _epilogue(y, b, n, m0, m1, p0, p1, act, a0, a1):  # pragma: no cover - compiled
    """Bias and activation in place (see the module doc), by the shared epilogue
    (``kernels/epilogue.py``) on each output channel's run of positions."""
    mm, pp = y.shape[1], y.shape[2]
    yf = y.reshape(-1)
    for o in range(m0, m1):
        _span_jit(yf, (n * mm + o) * pp + p0, p1 - p0, b[o], act, a0, a1)  # noqa: F821


def _build(numba):
    i8, f = numba.int64, numba.float32
    opts = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}
    fill = numba.njit(numba.void(numba.float32[:, :, :, ::1], numba.float32[:, ::1], *(i8,) * 14), **opts)(_im2col)
    epi = numba.njit(numba.void(numba.float32[:, :, ::1], numba.float32[::1], *(i8,) * 6, f, f), **opts)(_epilogue)
    return fill, epi


def kernels():
    """``(im2col, epilogue)`` compiled (signatures as ``_im2col`` and ``_epilogue``: arrays
    float32 C-contiguous, ints int64, ``a0, a1`` float32), or ``None`` where numba cannot
    compile here (a warning was given)."""
    return compiled_with_span("im2col", _build, globals())

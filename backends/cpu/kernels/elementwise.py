"""Elementwise chains in one pass (numba): the scalar scale-and-shift ``y = x * a + b``, the
residual channel scale ``y = x + x * s[channel]``, and ``y = max(a + b, 0)`` (``Add`` then
``Relu``: ResNet's residual joins), each rounded as the separate ops round; and ``y = a + b``
of two maps of one shape (MobileNetV2's residual joins: a native call, so that the ops around
it stay in one ``program.py`` Program).

``x, y: (L,) float32`` (flat views, distinct or ``y`` is ``x``), ``a, b`` float32 scalars::

    y[i] = x[i] * a + b

rounded after the product and after the sum, exactly as ``Mul`` then ``Add`` compute it (no
fused multiply-add: numba contracts nothing without ``fastmath``). It is what PP-OCRv4's
"learnable affine blocks" leave after a Conv with a fused activation (``Mul`` by a scalar,
then ``Add`` of one), one read and one write of the map instead of two of each. Elements
``lo <= i < hi``; the kernel releases the GIL, so callers split the range over threads.

``residual_scale``: ``x, y: (P*L,) float32`` (``P = N*C`` planes of ``L`` elements, distinct
arrays), ``s: (P,) float32``::

    y[p*L + i] = x[p*L + i] + x[p*L + i] * s[p]

rounded as ``Mul(x, s)`` then ``Add(x, .)`` (PP-OCRv4 det's residual squeeze-and-excitation:
``x + x * hardsigmoid(...)``), for planes ``lo <= p < hi``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled


def _scale_shift(x, y, a, b, lo, hi):  # pragma: no cover - compiled
    """``y[i] = x[i] * a + b`` for ``lo <= i < hi`` (unsigned indices: no wrap-around test)."""
    for i in range(np.uint64(lo), np.uint64(hi)):
        y[i] = x[i] * a + b


def _scale_shift_in_place(y, a, b, lo, hi):  # pragma: no cover - compiled
    """``y[i] = y[i] * a + b`` for ``lo <= i < hi``."""
    for i in range(np.uint64(lo), np.uint64(hi)):
        y[i] = y[i] * a + b


def _residual_scale(x, s, y, plane, lo, hi):  # pragma: no cover - compiled
    """``y = x + x * s[p]`` on planes ``lo <= p < hi`` of ``plane`` elements."""
    u = np.uint64
    for p in range(lo, hi):
        sc = s[p]
        base = u(p * plane)
        for i in range(u(plane)):
            v = x[base + i]
            y[base + i] = v + v * sc


def _add_relu(a, b, y, lo, hi):  # pragma: no cover - compiled
    """``y[i] = max(a[i] + b[i], 0)`` for ``lo <= i < hi`` (NaN passes, as ``np.maximum``)."""
    zero = np.float32(0.0)
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = a[i] + b[i]
        y[i] = zero if v < zero else v


def _add_relu_in_place(y, b, lo, hi):  # pragma: no cover - compiled
    """``y[i] = max(y[i] + b[i], 0)`` for ``lo <= i < hi``."""
    zero = np.float32(0.0)
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = y[i] + b[i]
        y[i] = zero if v < zero else v


def _add(a, b, y, lo, hi):  # pragma: no cover - compiled
    """``y[i] = a[i] + b[i]`` for ``lo <= i < hi``."""
    for i in range(np.uint64(lo), np.uint64(hi)):
        y[i] = a[i] + b[i]


def _add_in_place(y, b, lo, hi):  # pragma: no cover - compiled
    """``y[i] += b[i]`` for ``lo <= i < hi``."""
    for i in range(np.uint64(lo), np.uint64(hi)):
        y[i] += b[i]


def _build_pair(numba, two, one):
    """``two(a, b, y, lo, hi)`` and ``one(y, b, lo, hi)`` compiled (flat float32 arrays)."""
    f1, i8 = numba.float32[::1], numba.int64
    return (
        numba.njit(numba.void(f1, f1, f1, i8, i8), cache=True, nogil=True)(two),
        numba.njit(numba.void(f1, f1, i8, i8), cache=True, nogil=True)(one),
    )


def _build_add(numba):
    return _build_pair(numba, _add, _add_in_place)


def add_kernel():
    """The compiled kernels ``(add(a, b, y, lo, hi), in_place(y, b, lo, hi))``: ``y = a + b``, the
    arrays flat float32 of one length (``y`` distinct from both, or in place of one); ``None``
    where numba cannot compile here (a warning was given)."""
    return compiled("add", _build_add)


def _build_add_relu(numba):
    return _build_pair(numba, _add_relu, _add_relu_in_place)


def add_relu_kernel():
    """The compiled kernels ``(add_relu(a, b, y, lo, hi), in_place(y, b, lo, hi))``: ``y = max(a +
    b, 0)``, the arrays flat float32 of one length (``y`` distinct from both, or in place of
    one); ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("add_relu", _build_add_relu)


def _build(numba):
    f1, f, i8 = numba.float32[::1], numba.float32, numba.int64
    two = numba.njit(numba.void(f1, f1, f, f, i8, i8), cache=True, nogil=True)(_scale_shift)
    one = numba.njit(numba.void(f1, f, f, i8, i8), cache=True, nogil=True)(_scale_shift_in_place)
    return two, one


def _build_residual(numba):
    f1, i8 = numba.float32[::1], numba.int64
    return numba.njit(numba.void(f1, f1, f1, i8, i8, i8), cache=True, nogil=True)(_residual_scale)


def residual_scale_kernel():
    """The compiled kernel ``(x, s, y, plane, lo, hi)`` (see the module doc); ``None`` where
    numba cannot compile here (a warning was given)."""
    return compiled("residual_scale", _build_residual)


def kernel():
    """The compiled kernels ``(scale_shift(x, y, a, b, lo, hi), in_place(y, a, b, lo, hi))``
    (see the module doc): ``x`` and ``y`` distinct, or the same array (a loop over one array:
    given the same array twice, the compiler's overlap test sends the first to its scalar loop,
    measured 4x slower); ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("scale_shift", _build)

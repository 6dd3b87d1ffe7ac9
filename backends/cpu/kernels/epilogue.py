"""Bias and fused activation on rows of a Conv output, in place (numba): the epilogue of
the pointwise product (``ops/pointwise.py``) and of the depthwise kernels.

``y: (R, L) float32`` (C-contiguous; for Conv ``R = N*M`` rows of ``L = H*W`` positions),
``b: (M,) float32``::

    y[r, c] = act(y[r, c] + b[r % M])      for r0 <= r < r1, c0 <= c < c1

Activation codes (``ACT``, the Conv ``activation`` names, formulas from ONNX
operators.md; ``a0, a1`` are ``activation_params`` as float32)::

    0 none         x
    1 Relu         max(x, 0)
    2 Clip         min(max(x, a0), a1)            (Relu6: a0 = 0, a1 = 6)
    3 LeakyRelu    x < 0 ? a0 * x : x
    4 HardSigmoid  max(0, min(1, a0 * x + a1))
    5 HardSwish    a0 * x * max(0, min(1, x / 6 + 1/2)) + a1   (scale, shift)

NaN passes through every one of them, as in NumPy. Sigmoid and Tanh are left to NumPy
(``codes`` gives ``None``): numba's ``exp`` has no vector form without SVML, so a compiled
loop took 3.4 ms on a (96, 12544) map against 4 NumPy passes' ~0.3. ``span`` is the
building block: one contiguous run of a flat array, the activation branch taken once
outside the loop so each loop vectorises (0.064 ms for that map with bias and Clip, NumPy's
bias add alone 0.08).
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled, jitted

ACT = {"": 0, "Relu": 1, "Clip": 2, "LeakyRelu": 3, "HardSigmoid": 4, "HardSwish": 5}


def _span(f, d0, n, bias, act, a0, a1):  # pragma: no cover - compiled
    """In place on a flat float32 array: ``f[d0 + i] = act(f[d0 + i] + bias)`` for ``i < n``.

    One array, not a source and a destination: with two that alias (in place), LLVM's
    runtime overlap test sends the loop down its scalar path (measured 4x slower). Offsets
    are unsigned: no negative-index tests in the loops."""
    u = np.uint64
    d = u(d0)
    one, six, half, zero = np.float32(1.0), np.float32(1.0 / 6.0), np.float32(0.5), np.float32(0.0)
    if act == 0:
        for i in range(n):
            f[d + u(i)] = f[d + u(i)] + bias
    elif act == 1:
        for i in range(n):
            v = f[d + u(i)] + bias
            f[d + u(i)] = zero if v < zero else v
    elif act == 2:
        for i in range(n):
            v = f[d + u(i)] + bias
            if v < a0:
                v = a0
            elif v > a1:
                v = a1
            f[d + u(i)] = v
    elif act == 3:
        for i in range(n):
            v = f[d + u(i)] + bias
            f[d + u(i)] = v * a0 if v < zero else v
    elif act == 4:
        for i in range(n):
            t = (f[d + u(i)] + bias) * a0 + a1
            if t < zero:
                t = zero
            elif t > one:
                t = one
            f[d + u(i)] = t
    else:
        for i in range(n):
            v = f[d + u(i)] + bias
            t = v * six + half
            if t < zero:
                t = zero
            elif t > one:
                t = one
            f[d + u(i)] = v * t * a0 + a1


def _rows(y, b, r0, r1, c0, c1, act, a0, a1):  # pragma: no cover - compiled
    """``y[r, c0:c1] = act(y[r, c0:c1] + b[r % M])`` for ``r0 <= r < r1`` (module doc)."""
    m, width = b.shape[0], y.shape[1]
    yf = y.reshape(-1)
    for r in range(r0, r1):
        _span_jit(yf, r * width + c0, c1 - c0, b[r % m], act, a0, a1)  # noqa: F821


def _build_span(numba):
    i8, f = numba.int64, numba.float32
    sig = numba.void(numba.float32[::1], i8, i8, f, i8, f, f)
    return numba.njit(sig, cache=True, nogil=True)(_span)


def span():
    """The compiled ``span(f, d0, n, bias, act, a0, a1)`` (a flat float32 array, int64
    offsets and codes, float32 scalars), numba's dispatcher, to be called from other
    compiled kernels (inside their ``build``); raises where numba cannot compile here."""
    return jitted("epilogue_span", _build_span)


def _build_rows(numba):
    f2, i8, f = numba.float32[:, ::1], numba.int64, numba.float32
    sig = numba.void(f2, numba.float32[::1], i8, i8, i8, i8, i8, f, f)
    return numba.njit(sig, cache=True, nogil=True)(_rows)


def kernel():
    """The compiled ``rows(y, b, r0, r1, c0, c1, act, a0, a1)`` (module doc; ``y`` a
    C-contiguous float32 ``(R, L)``, ints int64, ``a0, a1`` float32); it releases the GIL.
    ``None`` where numba cannot compile here (a warning was given)."""
    return compiled_with_span("epilogue_rows", _build_rows, globals())


def compiled_with_span(name: str, build, namespace: dict):
    """``compiled(name, build)`` for a kernel whose code calls the epilogue as ``_span_jit``:
    when it is built, the numba ``span`` is built first and put in the kernel module's
    ``namespace``; ``None`` where numba cannot compile here."""

    def build_with_span(numba):
        namespace["_span_jit"] = span()
        return build(numba)

    return compiled(name, build_with_span)


def codes(activation: str | None, params) -> tuple[int, np.float32, np.float32] | None:
    """``(code, a0, a1)`` of a Conv's fused ``activation`` with its ``activation_params``, or
    ``None`` for an activation the epilogue does not compute."""
    code = ACT.get(activation or "")
    if code is None:
        return None
    p = tuple(params) + (0.0, 0.0)
    return code, np.float32(p[0]), np.float32(p[1])

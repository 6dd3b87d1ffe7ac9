"""Direct 2-D convolution with the output channels in the vector lanes (numba, ``simd.py``): no
column buffer.

``x: (N, C, H, W) float32``, ``wq: (B, C*KH*KW, 16) float32`` (``pack``: the weights
``(M, C, KH, KW)`` as ``B`` blocks of 16 output channels, an even count, zero past ``M``),
``b: (M,)`` -> ``y: (N, M, Ho, Wo)``::

    y[n, m, oy, ox] = act(b[m] + sum_{c, ky, kx} w[m, c, ky, kx] * x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw])

(ONNX Conv, ``group`` 1; positions outside ``x`` read zero). Per output row: the ``C*KH``
input rows it reads are copied into zero-padded rows; seven or eight outputs at a time
(``positions``: two kernels) and two blocks of 16 channels are summed over the ``C*KH*KW``
taps in 14 or 16 vector registers (each tap's
input broadcast, its weights one vector load per block: any stride and dilation); the row's
sums (positions x channels) get the activation (``kernels/epilogue.py``'s codes) and are
transposed into ``y``'s planes (``simd.transpose16``). Work is cut in output rows
``lo <= n*Ho + oy < hi`` and pairs of channel blocks ``q0 <= q < q1``; the kernel releases the
GIL, so callers split either over threads.

The im2col path it replaces writes and reads back a column buffer ``KH*KW`` times the input
(a 3-channel 3x3 stride-2 stem at 224x224: 1.35 MB a run), and for a first layer runs a
product whose inner dimension is only ``C*KH*KW`` (27 or 147).
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled


def pack(w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``w: (M, C, KH, KW)`` float32 -> ``(B, C*KH*KW, 16)``: blocks of 16 output channels (an
    even count ``B``), zero past ``M``; into ``out`` where given."""
    m, taps = w.shape[0], int(np.prod(w.shape[1:]))
    blocks = 2 * -(-m // 32)
    if out is None:
        out = np.empty((blocks, taps, 16), np.float32)
    full = np.zeros((blocks * 16, taps), np.float32)
    full[:m] = w.reshape(m, taps)
    out[...] = full.reshape(blocks, 16, taps).transpose(0, 2, 1)
    return out


def row_bytes(c: int, kh: int, kw: int, w: int, wo: int, sw: int, dw: int, pl: int) -> int:
    """Bytes of the kernel's input-row buffer for ``C`` channels and a ``KH x KW`` kernel on rows
    of ``W`` (``Wo`` outputs, stride ``sw``, dilation ``dw``, left pad ``pl``): ``C*KH`` padded
    rows with room for a last step's extra outputs."""
    wp = max(w + pl, (wo - 1 + 8) * sw + (kw - 1) * dw + 1)
    return 4 * c * kh * wp


def out_bytes(m: int, wo: int) -> int:
    """Bytes of the kernel's buffer for one output row of ``M`` channels and ``Wo`` positions
    (positions x channels, blocks of 16 in an even count, room for a last step's extra outputs)."""
    return 4 * (wo + 8) * 32 * -(-m // 32)


def _build(numba):
    from mnnpy.backends.cpu.kernels import direct_jit

    return direct_jit.build(numba, 8)


def _build7(numba):
    from mnnpy.backends.cpu.kernels import direct_jit

    return direct_jit.build(numba, 7)


STEP7_COST = 0.91  # time per output position of a seven-position step against an eight-position one


def positions(wo: int) -> int:
    """Output positions a step (7 or 8) for rows of ``wo`` outputs: seven, whose step of 14
    sums takes 9% less time per position than eight's 16 (one thread, paired calls: ResNet-18's
    stem 1466 -> 1321 µs, also where neither wastes a position), unless eight compute fewer
    positions past ``wo`` by more than that (rows of 8 or 16: 7 would compute 14 or 21)."""
    return 7 if STEP7_COST * (wo + (-wo) % 7) <= wo + (-wo) % 8 else 8


def kernel(steps: int = 8):
    """The compiled ``(x, wq, b, y, kh, kw, lo, hi, q0, q1, sh, sw, dh, dw, pt, pl, act, a0, a1)``
    (module doc; integers int64, ``a0, a1`` float32) taking ``steps`` (7 or 8, ``positions``)
    output positions at a time, or ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("direct_conv7", _build7) if steps == 7 else compiled("direct_conv", _build)

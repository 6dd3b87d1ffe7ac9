"""Depthwise 2-D convolution with bias and fused activation in one pass (numba).

``x: (N, C, H, W) float32``, ``w: (C, KH, KW) float32``, ``b: (C,) float32`` ->
``y: (N, C, Ho, Wo) float32``::

    y[n, c, oy, ox] = act(b[c] + sum_{ky, kx} w[c, ky, kx] * x[n, c, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw])

where positions outside ``x`` read zero (ONNX Conv with ``group == C == M``). Per channel
plane: the zero-padded input is copied into ``sh*sw`` phase planes (phase ``(a, e)`` holds
``X_pad[a::sh, e::sw]`` on a ``(Hq, Wq)`` grid), so that every kernel tap, for every stride
and dilation, reads one contiguous slice shifted by ``(ky*dh // sh)*Wq + kx*dw // sw``;
the sums are formed on the wide ``(Ho, Wq)`` grid, starting at the bias, and cropped to ``Wo``
columns into ``y`` a vector at a time, the activation applied on the way
(``depthwise_jit.py``; vectors of ``simd.py``, the last one of a row masked):

* 3x3 kernels: the nine weights and tap offsets held in registers, the grid summed four
  16-lane vectors at a time in two chains of fused multiply-adds each (taps 0-4 from the
  bias, 5-8 from zero, added at the end), plain loads for whole blocks of 64, masked ones
  for the last;
* other kernels: passes over the grid eight taps at a time, then four, then one (long loops
  the compiler vectorises), the last tap added in the crop.

Measured against the former kernel (every size through the second scheme, its crop and a
separate activation pass), one thread, medians of 200 calls interleaved, MobileNetV2's shapes
with Relu6, µs: 960x7x7 100 -> 66, 576x14x14 136 -> 78, 384x14x14 91 -> 51, 576x14x14/2 96
-> 77, 192x28x28 94 -> 86, 192x28x28/2 88 -> 77, 144x56x56 201 -> 225, 144x56x56/2, 96x112x112/2
and 32x112x112 unchanged within 3%; PP-OCRv4 rec's 5x5 240x12x80 191 -> 199; all eleven
1559 -> 1428. Callers split the ``N*C`` planes over their threads (numba's own threads,
``parallel=True``, measured worse: their OpenMP workers spin after each launch and slowed the
BLAS product after it, MobileNetV2 53.7 ms against 14.5 with NumPy).

Channel blocks (``channel_blocks``, ``depthwise_jit.blocks``): for small output maps (the
Conv takes it up to ``ops/depthwise.BLOCKS_MAX_MAP`` positions, up to
``BLOCKS_MAX_STRIDED_MAP`` with strides over 1) the 16 lanes of a vector hold 16 channels
instead of 16 positions: a block's planes are transposed (``simd.transpose16``: masked loads,
four stages of two-source shuffles, masked stores) into a zero-padded ``(Hp, Wp, 16)``
buffer, eight outputs at a time are summed over the taps (one fused multiply-add per tap
for 16 channels, any stride and dilation), the activation applied, and the ``(Ho, Wo, 16)``
result transposed back into the planes. Measured against the plane kernel, one thread, µs:
960x7x7 54 -> 30-33, 576x14x14/2 52-58 -> 28-30, 192x28x28/2 53-55 -> 27-29, 144x56x56/2
92-108 -> 92-104; on larger maps it loses (576x14x14 55 -> 62-66, 192x28x28 61-65 -> 58-78).
An earlier channels-innermost variant, before ``simd.py``, was slower on every layer: numba
left its 16-lane channel loop scalar (its stores may alias its loads) and the scalar
transposes cost as much as the taps. In MobileNetV2, two threads, one process, alternated:
4.86 / 4.82 -> 4.76 / 4.74 ms (the depthwise layers on 7x7 and strided maps are a small part
of the run); PP-OCRv4 rec and cls unchanged.

Fused activation codes (``ACT``): those of the epilogue (``kernels/epilogue.py``: none, Relu,
Clip, LeakyRelu, HardSigmoid, HardSwish; ``simd.activate``), applied in the crop; NaN passes
through all of them as in NumPy. Other activations (Sigmoid, Tanh) are applied by the caller
afterwards.
"""

from __future__ import annotations

from mnnpy.backends.cpu.kernels import compiled
from mnnpy.backends.cpu.kernels.epilogue import ACT

__all__ = ["ACT", "kernel"]


def _build(numba):
    from mnnpy.backends.cpu.kernels import depthwise_jit

    return depthwise_jit.build(numba)


def _build_blocks(numba):
    from mnnpy.backends.cpu.kernels import depthwise_jit

    return depthwise_jit.build_blocks(numba)


def channel_blocks():
    """The compiled channel-block kernel (module doc, "Channel blocks"), the arguments of
    ``kernel`` but ``lo, hi`` counting blocks of 16 channels (``n*ceil(C/16) + block``);
    ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("depthwise_blocks", _build_blocks)


def kernel():
    """The compiled kernel ``(x, w, b, y, lo, hi, sh, sw, dh, dw, pt, pl, act, a0, a1)``
    computing planes ``lo <= n*C + c < hi`` (arrays as in the module doc; the rest int64,
    ``a0, a1`` float32); it releases the GIL, so callers split planes over threads. ``None``
    where numba cannot compile here (a warning was given)."""
    return compiled("depthwise", _build)

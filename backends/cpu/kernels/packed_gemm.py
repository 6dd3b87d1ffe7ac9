"""A float32 matrix product on weights packed at resize, with bias and the fused activation
applied before the output leaves the registers (numba, ``simd.py``'s vectors): the product
of the pointwise Conv (``ops/pointwise.py``) where it is faster than BLAS.

``wp: (Bw, P, K, MR)`` the weights ``w: (Bw, M, K)`` packed by ``pack`` (``P = ceil(M / MR)``
panels of ``MR`` rows, row ``r`` of panel ``p`` is ``w[p*MR + r]``, zero rows past ``M``; stored
pass by pass, see ``pack``),
``x: (B, K, Lx)``, ``y: (B, M, Ly)``, ``b: (Mb,)`` (``Mb`` 0: no bias), all float32
C-contiguous; ``Bw`` is 1 or ``B``. For each ``j < B``, rows ``r0 <= r < r1`` (``r0`` a
multiple of ``MR``) and ``c < cols``::

    y[j, r, yc0 + c] = act(b[r % Mb] + sum_k w[j or 0, r, k] * x[j, k, xc0 + c])

with the activations of ``kernels/epilogue.py`` (``ACT``). Each inner step multiplies one
panel's ``MR`` weights (broadcast) by 32 columns of one row of X (two vectors) into ``MR x 32``
sums held in 16 vector registers, one fused multiply-add each; the sums run over ``KC`` rows
of X at a time (partial sums are stored and read back between passes). A pass copies its 32
columns of X into a contiguous strip first where X's rows are far apart and several panels
read them. The last strip of columns uses masked loads and stores: nothing outside the block
is read or written. In a model the weights come from memory, not cache (MobileNetV2's are 14
MB, read once a run): each pass reads its panels as one contiguous stream and asks for them
``packed_gemm_jit.PREFETCH`` floats ahead (``simd.prefetch``). One thread, 48 weight sets
rotated so none stays in cache, µs: 160x960x49 179 -> 103, 320x960x49 356 -> 203,
1280x320x49 509 -> 277, 96x576x196 165 -> 134, 64x384x196 75 -> 62 (as fast as with the
weights in cache, where nothing changed); the contiguous order alone gave 153, 317, 434, 147
and 68. Sums are formed in the order of ``k`` with one rounding per step, so they can differ
from BLAS's in the last bits (within DESIGN.md's accumulating-op tolerance).

This is MLAS's and MNN's scheme (a register tile over packed weights, the epilogue fused),
not a BLAS call: OpenBLAS packs the weights again in every call and has no fused epilogue.
It serves the Conv executions (pointwise, im2col); MatMul and Gemm stay on BLAS (DESIGN.md,
"CPU kernels"). Measured on the 2-core Zen 5 machine, one thread, medians of 200 calls, GFLOP/s
of this kernel (with bias) against NumPy's OpenBLAS ``cblas_sgemm`` (without), M x K x
columns: 80x960x49 159 / 126, 160x960x49 162 / 142, 256x4608x49 166 / 151, 480x160x49
175 / 167, 32x384x196 148 / 123, 48x576x196 158 / 160, 128x1152x784 193 / 178,
32x147x12544 139 / 131; slower: 64x576x3136 117 / 138, 16x32x12544 113 / 136. A variant with
the vectors along the output rows (32-row panels, tiles of 7 columns, stores transposed
through a small buffer) was faster on 160x960x49 (+8%) and 64x576x3136 (+30%), slower on
480x160x49 (-40%) and 16x32x12544 (-75%), and is not kept.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import compiled
from mnnpy.backends.cpu.kernels.native import NativeKernel, bind
from mnnpy.backends.cpu.parallel import split

MR = 8  # rows of one weight panel of ``packed``
KC = 256  # rows of X (inner dimension) summed in one pass over the output by ``packed``
# output columns from which callers take the kernel: its vectors are 16 columns wide, so a
# product of a few columns wastes most lanes (silero VAD's convs, 1-4 positions: its run
# 0.150 -> 0.185 ms with them on this kernel; BLAS stays faster there)
MIN_COLS = 16


def pack(w: np.ndarray, out: np.ndarray | None = None, mr: int = MR) -> np.ndarray:
    """``w: (Bw, M, K)`` float32 -> the kernel's panels, an ``(Bw, P, K, mr)`` float32 array
    (``P = ceil(M/mr)``, zero rows past ``M``) in the order the kernel reads them: per batch,
    for each pass of ``KC`` rows of ``K`` (``k0 = 0, KC, ..``), the ``P`` panels' ``(kc, mr)``
    blocks one after the other, so a pass reads one contiguous stream (module doc). Written
    into ``out`` where given (that shape, C-contiguous). Each pass is written in place one
    lane of every panel at a time (rows ``i, i + mr, ..`` of ``W``: long contiguous reads):
    faster than one transposed copy into panels then reordered by pass (PP-OCRv4 det's 384x384
    weights: 134 -> 75 µs; 192x192: 31 -> 24)."""
    bw, m, k = w.shape
    p = -(-m // mr)
    if out is None:
        out = np.empty((bw, p, k, mr), np.float32)
    flat, full = out.reshape(bw, -1), m // mr
    for k0 in range(0, k, KC):
        k1 = min(k, k0 + KC)
        block = flat[:, k0 * p * mr : k1 * p * mr].reshape(bw, p, k1 - k0, mr)
        src = w[:, :, k0:k1]
        for i in range(mr):
            block[:, :full, :, i] = src[:, i : full * mr : mr]
        if full < p:
            block[:, full] = 0
            block[:, full, :, : m - full * mr] = src[:, full * mr :].transpose(0, 2, 1)
    return out


def pack_later(w: np.ndarray, out: np.ndarray, beside=None) -> None:
    """``pack(w, out)``; with ``beside`` (a callable that runs a call of no arguments on
    another thread: the CPU backend's ``ResizeHelper.submit``), by the compiled ``pack_kernel``
    there where it compiles and ``w`` is a C-contiguous float32 array (the session's resize
    waits for it), else now."""
    kernel = pack_kernel() if beside is not None else None
    # numba's own dispatcher (native kernels off) takes no read-only array, and a model's constants are read-only
    usable = kernel is not None and (isinstance(kernel, NativeKernel) or w.flags.writeable)
    if usable and w.dtype == np.float32 and w.flags.c_contiguous and out.flags.c_contiguous:
        beside(bind(kernel, w, out))
    else:
        pack(w, out)


def _build_pack(numba):
    from mnnpy.backends.cpu.kernels import packed_gemm_jit

    return packed_gemm_jit.build_pack(numba)


def pack_kernel():
    """The compiled ``pack(w, out)`` (``pack``'s layout; ``w`` C-contiguous float32), releasing
    the GIL; ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("packed_gemm_pack", _build_pack)


def panel_rows(m: int, parts: int) -> list[tuple[int, int]]:
    """``[r0, r1)`` row blocks of an ``m``-row output, at most ``parts``, each of whole panels
    (``r0`` a multiple of ``MR``, as the kernel asks)."""
    return [(p0 * MR, min(m, p1 * MR)) for p0, p1 in split(-(-m // MR), parts)]


def _build(numba):
    from mnnpy.backends.cpu.kernels import packed_gemm_jit

    return packed_gemm_jit.build(numba)


def kernel():
    """The compiled ``(wp, x, y, b, r0, r1, xc0, yc0, cols, act, a0, a1)`` (module doc; the
    integers int64, ``a0, a1`` float32), releasing the GIL; ``None`` where numba cannot
    compile here (a warning was given)."""
    return compiled("packed_gemm", _build)

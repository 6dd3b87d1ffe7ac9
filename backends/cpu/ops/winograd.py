"""Winograd Conv for the CPU Conv execution (``conv.py``): float32 2-D 3x3, stride 1,
dilation 1, group 1, any padding; the kernels and the algorithm are in
``mnnpy.backends.cpu.kernels.winograd`` (Lavin and Gray, 2016).

Which convolutions take it, and how the work is cut, follows measurements on the 2-core
reference machine (AMD EPYC Zen 4, OpenBLAS sgemm, machine shared, so medians of runs
alternated in one process; whole Conv with bias and Relu on 2 threads, ms):

===================  =============  ==========  ==========  ==========  ==========
layer                before         F(2x2)      F(2x2)      F(4x4)      F(4x4)
                                    by channel  by band     by channel  by band
===================  =============  ==========  ==========  ==========  ==========
64->64, 56x56        2.23 im2col    1.44        1.33        0.94        0.96
128->128, 28x28      1.88 im2col    1.14        1.11        0.99        0.96
256->256, 14x14      1.82 im2col    1.30        1.62        1.30        1.61
512->512, 7x7        2.42 im2col    2.16        3.76        2.43        3.68
96->24, 160x160      9.28 kn2row    11.7        7.07        7.78        6.27
96->24, 80x80        2.41 kn2row    2.88        1.87        1.65        1.50
===================  =============  ==========  ==========  ==========  ==========

* output maps of at least ``MIN_SIDE`` on both sides and at least ``MIN_CHANNELS`` input
  and output channels. 7x7 maps are left to the direct Conv (``direct.py``): the transformed
  weights take ``a*a/9`` times the weights' memory (16.8 MB for a 512x512 layer with F(2x2),
  read from memory every run), and since the direct kernel prefetches its weights and splits
  a 7-row map by channel blocks, ResNet-18's three 512-channel 7x7 layers take 2.69-2.81 ms
  on it against 3.40-3.74 on F(2x2) (per-op profile, 2 threads, 3 rounds alternated in one
  process; whole model 10.4-11.0 against 11.0-12.1 ms). ``conv.py`` also leaves to the direct
  kernel every Conv that would take F(2x2) and that kernel takes (at least 32 output channels):
  ResNet-18's three 256-channel 14x14 layers measured 1.91-2.04 ms on F(2x2) against 2.12-2.23
  direct on a quiet machine (2026-12-02), but 2.99 against 2.72 (2 threads) and 5.11 against
  4.31 (one thread) on 2026-12-03 with the machine's memory busier: F(2x2) reads 16/9 of the
  weights' bytes every run, and only the direct kernel held up;
* F(4x4, 3x3) (36 products) from ``F4_MIN_SIDE``, F(2x2, 3x3) (16 products) below it: on
  14x14 maps a 4x4 tile wastes an eighth of the products on the crop and the two measured
  the same; F(2x2) also has the smaller rounding error;
* split by channels where the weights outweigh the tiles (``M > T``, see ``_Winograd``),
  else by bands of tile rows of at most ``BAND_BYTES`` of transformed input (4 MiB measured
  best of 0.25/1/4/16 MiB on the 160x160 layer: 5.5 ms against 6.0-6.6).

Single-core split of one 64->64 56x56 layer, F(4x4): input transform 0.12-0.16 ms, the 36
products 0.26-0.29 ms, output transform 0.08-0.10 ms, against 1.2-1.3 ms for the im2col
product alone.
"""

from __future__ import annotations

import functools

import numpy as np

from mnnpy.backends.cpu.blas import native_product
from mnnpy.backends.cpu.kernels.epilogue import codes
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.kernels.winograd import kernels as winograd_kernels
from mnnpy.backends.cpu.kernels.winograd import weights as winograd_weights
from mnnpy.backends.cpu.parallel import parallel, run_phases, sequence, split
from mnnpy.backends.cpu.prepared import bias_into, code_digest, prepared
from mnnpy.backends.cpu.scratch import scratch

MIN_SIDE = 8  # output maps from this side (both axes) take Winograd
F4_MIN_SIDE = 16  # ... and F(4x4, 3x3) from this side, F(2x2, 3x3) below
MIN_CHANNELS = 8  # input and output channels from which Winograd pays
BAND_BYTES = 1 << 22  # bytes of one band's transformed input V, at least one tile row
SPLIT_CHANNELS = None  # None: split by channels where M > tiles an image (see _Winograd); True/False force it


def choose(x, w, y, strides, dil, group) -> int:
    """The output tile side ``m`` (4 or 2) of the Winograd kernel for this Conv, or 0 where it
    is not taken (see the module doc); ``x: (N, C, H, W)``, ``w: (M, C, KH, KW)``,
    ``y: (N, M, Ho, Wo)``."""
    if x.ndim != 4 or group != 1 or tuple(w.shape[2:]) != (3, 3) or any(s != 1 for s in strides) or any(d != 1 for d in dil):
        return 0
    if any(a.dtype != np.float32 for a in (x, w, y)) or not (x.flags.c_contiguous and y.flags.c_contiguous):
        return 0
    out = y.shape[2:]
    if min(out) < MIN_SIDE or min(x.shape[1], w.shape[0]) < MIN_CHANNELS:
        return 0
    if winograd_kernels() is None:
        return 0
    return 4 if min(out) >= F4_MIN_SIDE else 2


class _Winograd:
    """F(m x m, 3 x 3) Winograd Conv ``X: (N, C, H, W) -> Y: (N, M, Ho, Wo)`` float32 with
    bias and the fused activation (none, Relu, Clip, LeakyRelu; others by ``Conv`` after).
    ``U: (a*a, M, C)`` is made from the weights at ``prepare``. Two ways to cut the work
    over the backend's threads:

    * by bands (``M`` at most the tiles of an image, ``T``): the ``N * ceil(Ho/m)`` tile rows
      are cut into bands of at most ``BAND_BYTES`` of transformed input, dealt out among the
      threads; each thread has its own ``V: (a*a, C, T_band)`` and ``P: (a*a, M, T_band)``
      and runs, band after band, the input transform, the ``a*a`` products
      ``P[k] = U[k] @ V[k]`` (one batched ``np.matmul``) and the output transform into ``Y``;
    * by channels (``M > T``: small maps, many channels, where reading ``U`` dominates): per
      image, the input transform of all tiles split by input channels, then the products
      and the output transform split by output channels, so each thread reads only its rows
      of ``U``.

    Each input transform reports whether its inputs were finite and at most the kernels'
    ``LARGE`` in magnitude (one flag per call, written every run); where one was not, the Conv
    is computed again by the definition (the kernel's ``exact``) over the same threads, so an
    inf or NaN reaches only the outputs whose window reads it, as in onnxruntime (the
    transforms would spread it, or overflow on a huge value, over whole tiles).
    """

    fused_bias = True

    def __init__(self, exe, x, w, y, bias, out, pads, m):
        n, c, mo = x.shape[0], x.shape[1], w.shape[0]
        a2 = (m + 2) ** 2
        th, tw = -(-out[0] // m), -(-out[1] // m)
        threads = exe.backend.num_threads
        self.exe, self.m = exe, m
        # constant weights: U as the compilation cache holds it (a view of the bytes read) or as
        # computed; else a buffer that ``prepare`` writes whole every run
        self.u = self._transformed(np.asarray(w)) if exe.const else scratch((a2, mo, c), np.float32, fill=None)
        self.b = scratch((mo,), np.float32)
        fused = codes(exe.attrs["activation"], exe.attrs["activation_params"])
        self.fused_activation = fused is not None  # else Conv applies the activation afterwards
        code, a0, a1 = fused or (0, np.float32(0), np.float32(0))
        inp, outp, self.exact = winograd_kernels()
        self.phases = []  # lists of tasks, run one list after the other
        by_channels = SPLIT_CHANNELS if SPLIT_CHANNELS is not None else mo > th * tw
        calls = n * c if by_channels else n * th
        self.flags = np.zeros(calls, np.int64)  # one slot per input-transform call (at most one per channel or tile row)
        slots = iter(range(calls))
        self.x, self.y, self.pads, self.code = x, y, pads, (code, a0, a1)
        self.w = None  # the weights as given (M, C, 3, 3), for the exact path
        if by_channels:
            # the weights outweigh the tiles: per image, the input transform split by input
            # channels, then products and output transform split by output channels
            v, p = exe.ws.take((a2, c, th * tw), np.float32), exe.ws.take((a2, mo, th * tw), np.float32)
            for i in range(n):
                self.phases.append(
                    [
                        bind(inp, x, v, i, c0, c1, 0, th, tw, pads[0], pads[1], m, self.flags, next(slots))
                        for c0, c1 in split(c, threads)
                    ]
                )
                self.phases.append(
                    [
                        sequence(
                            [
                                native_product(self.u, v, p, m0, m1, 0, 0, th * tw)
                                or functools.partial(np.matmul, self.u[:, m0:m1], v, out=p[:, m0:m1]),
                                bind(outp, p, y, self.b, i, m0, m1, 0, th, tw, m, code, a0, a1),
                            ],
                        )
                        for m0, m1 in split(mo, threads)
                    ]
                )
            return
        rows = max(1, min(th, BAND_BYTES // (a2 * c * tw * 4), -(-n * th // threads)))
        bands = [(i, r, min(th, r + rows)) for i in range(n) for r in range(0, th, rows)]
        tasks = []
        for lo, hi in split(len(bands), threads):
            cap = rows * tw
            v, p = exe.ws.take((a2, c, cap), np.float32), exe.ws.take((a2, mo, cap), np.float32)
            steps = []
            for i, t0, t1 in bands[lo:hi]:
                nt = (t1 - t0) * tw
                steps.append(bind(inp, x, v, i, 0, c, t0, t1, tw, pads[0], pads[1], m, self.flags, next(slots)))
                steps.append(
                    native_product(self.u, v, p, 0, mo, 0, 0, nt)
                    or functools.partial(np.matmul, self.u, v[:, :, :nt], out=p[:, :, :nt])
                )
                steps.append(bind(outp, p, y, self.b, i, 0, mo, t0, t1, tw, m, code, a0, a1))
            tasks.append(sequence(steps))
        self.phases.append(tasks)

    def _transformed(self, w: np.ndarray) -> np.ndarray:
        """``U (a*a, M, C)`` float32, C-contiguous, of ``w (M, C, 3, 3)``: from the session's
        compilation cache where the weights are constants (``prepared``), else computed."""

        def transform():
            with self.exe.backend.runtime.blas.single():  # only when computed (not when loaded from the cache)
                return winograd_weights(w, self.m)

        u = prepared(self.exe, "winograd", w, transform, self.m, code_digest(winograd_weights))
        return np.ascontiguousarray(u, np.float32)

    def prepare(self, w, b):
        w = np.asarray(w)
        self.w = w
        if not self.exe.const:  # constants' U was made once, in ``__init__``
            np.copyto(self.u, self._transformed(w))
        bias_into(self.b, b)

    def native_phases(self):
        """The transforms and products, phase by phase (``program.py``); ``after`` must follow them."""
        return self.phases

    def after(self, exe):
        """What follows the phases in a run: the exact sums where an input was not finite."""
        if self.flags.any():  # an input was inf, NaN or huge: the definition's sums (class doc)
            self.run_exact(exe)

    def run(self, exe):
        run_phases(exe.backend, self.phases)
        self.after(exe)

    def run_exact(self, exe):
        """``Y`` by the Conv's definition (``kernels.winograd._exact``), split by output channels."""
        x, y, (pt, pl), (code, a0, a1) = self.x, self.y, self.pads[:2], self.code
        w = np.ascontiguousarray(self.w, np.float32)
        tasks = [
            functools.partial(self.exact, x, w, self.b, y, i, m0, m1, pt, pl, code, a0, a1)
            for i in range(x.shape[0])
            for m0, m1 in split(y.shape[1], exe.backend.num_threads)
        ]
        parallel(exe.backend, tasks)

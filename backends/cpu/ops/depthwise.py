"""Depthwise Conv kernels (``G == C == M``) for the CPU Conv execution (``conv.py``).

float32 2-D depthwise Convs run the compiled kernel (``_DepthwiseNumba``); the NumPy
kernels below remain for other dtypes and for machines where numba cannot compile.

Per channel ``y = B + sum_tap w[tap] * X_pad[shifted]``: NumPy has no fused multiply-add,
so each tap is a multiply pass and an add pass over the map (this is what keeps depthwise
models such as MobileNetV2 slower than onnxruntime; see bench/RESULTS.md).
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels.depthwise import ACT, channel_blocks
from mnnpy.backends.cpu.kernels.depthwise import kernel as depthwise_kernels
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.activation import apply_activation
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import parallel, split
from mnnpy.backends.cpu.scratch import scratch

# elements of a depthwise output split over the threads (measured with native tasks,
# worker_pool.py: MobileNetV2 5.99 -> 5.42 ms, 2 threads, against 1 << 17)
DEPTHWISE_PARALLEL_MIN = 1 << 14
# output maps (Ho*Wo) up to which the compiled kernel puts 16 channels in the vector lanes
# (kernels/depthwise.py, "channel blocks"), and up to which it does so for strides over 1
BLOCKS_MAX_MAP = 64
BLOCKS_MAX_STRIDED_MAP = 256
# ... and input maps (H*W) up to which it does: its padded buffer holds a whole block of 16
# channels (4096 positions: 256 KiB), where a large stride could make a huge input's output small
BLOCKS_MAX_INPUT_MAP = 4096
SHORT_MAPS = 0.8  # depthwise maps whose output rows are under this share of the padded rows: _DepthwiseRows
SMALL_GRID = 400  # depthwise grids up to this many positions per channel use a batched matmul (measured)


class _DepthwiseRows:
    """Stride-1 2-D depthwise Conv on short, wide maps, channels innermost.

    X is copied into a zero-padded ``(Hp, Wp, C)`` buffer; each tap is then one contiguous
    ``(Ho*Wp, C)`` slice at offset ``(i*d_h*Wp + j*d_w)*C`` multiplied by its ``(C,)``
    weights. Unlike the channel-major layout of ``_Depthwise`` it computes no rows of
    padding: on PP-OCR rec's (240, 12, 80) 5x5 maps that is 25% fewer elements per pass
    (measured 2.29 ms against 2.72 ms), while on square maps the transposing copies cost more.
    """

    fused_bias = True

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        n, c, h, wd = x.shape
        kh, kw = w.shape[2:]
        (dh, dw), (pt, pl, pb, pr) = dil, pads
        hp, wp = h + pt + pb, wd + pl + pr
        ho, wo = out
        rows = ho * wp
        self.n, self.c, self.kk = n, c, kh * kw
        margin = ((kh - 1) * dh * wp + (kw - 1) * dw) * c + c
        self.pad = scratch((n, hp * wp * c + margin), x.dtype)
        grids = self.pad[:, : hp * wp * c].reshape(n, hp, wp, c)
        self.fill = (grids[:, pt : pt + h, pl : pl + wd, :], x.transpose(0, 2, 3, 1))
        offsets = [(i * dh * wp + j * dw) * c for i in range(kh) for j in range(kw)]
        self.taps = [[self.pad[b, o : o + rows * c].reshape(rows, c) for o in offsets] for b in range(n)]
        self.acc = exe.ws.take((n, rows, c), x.dtype)
        self.tmp = exe.ws.take((n, rows, c), x.dtype)
        self.crop = self.acc.reshape(n, ho, wp, c)[:, :, :wo, :].transpose(0, 3, 1, 2)
        self.y = y
        self.w = scratch((self.kk, c), x.dtype)
        self.b = scratch((c, 1, 1), x.dtype) if bias is not None else None
        parts = exe.backend.num_threads if n * rows * c >= DEPTHWISE_PARALLEL_MIN else 1
        self.tasks = [lambda r=r, b=b: self._block(b, *r) for b in range(n) for r in split(rows, parts)]

    def prepare(self, w, b):
        np.copyto(self.w, w.reshape(self.c, self.kk).T)
        if b is not None:
            np.copyto(self.b, b.reshape(-1, 1, 1))

    def _block(self, b, r0, r1):
        acc, tmp, taps = self.acc[b, r0:r1], self.tmp[b, r0:r1], self.taps[b]
        np.multiply(taps[0][r0:r1], self.w[0], out=acc)
        for t in range(1, self.kk):
            np.multiply(taps[t][r0:r1], self.w[t], out=tmp)
            np.add(acc, tmp, out=acc)

    def run(self, exe):
        np.copyto(*self.fill)
        parallel(exe.backend, self.tasks)
        if self.b is not None:
            np.add(self.crop, self.b, out=self.y)
        else:
            np.copyto(self.y, self.crop)


class _Depthwise:
    """2-D depthwise Conv (``G == C == M``), per channel ``y = sum_tap w[tap] * x_pad[shifted]``.

    X is copied into ``s_h*s_w`` flat zero-padded phase buffers (phase ``(a, b)`` holds
    ``X_pad[a::s_h, b::s_w]`` on a ``(Hq, Wq)`` grid per channel) so that every tap is a
    contiguous shifted slice; sums are formed on the wide grid, then cropped with the bias.
    """

    fused_bias = True

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        n, c, h, wd = x.shape
        kh, kw = w.shape[2:]
        (sh, sw), (dh, dw), (pt, pl) = strides, dil, pads[:2]
        ho, wo = out
        hq = -(-max(h + pt, (ho - 1) * sh + (kh - 1) * dh + 1) // sh)
        wq = -(-max(wd + pl, (wo - 1) * sw + (kw - 1) * dw + 1) // sw)
        nc, p = n * c, hq * wq
        self.n, self.p = n, p
        taps = [
            (i * kw + j, (i * dh % sh, j * dw % sw), (i * dh // sh) * wq + j * dw // sw) for i in range(kh) for j in range(kw)
        ]
        margin = max(t[2] for t in taps)
        xs = view_as(x, (nc, h, wd))
        phases, self.fills = {}, []
        for _, ph, _ in taps:
            if ph in phases:
                continue
            buf = phases[ph] = scratch(nc * p + margin, x.dtype)
            h0, w0 = (ph[0] - pt) % sh, (ph[1] - pl) % sw
            if h0 < h and w0 < wd:
                src = xs[:, h0::sh, w0::sw]
                r0, c0 = (pt + h0) // sh, (pl + w0) // sw
                grid = view_as(buf[: nc * p], (nc, hq, wq))
                self.fills.append((grid[:, r0 : r0 + src.shape[1], c0 : c0 + src.shape[2]], src))
        self.taps = [(t, view_as(phases[ph][off : off + nc * p], (nc, p))) for t, ph, off in taps]
        self.wide = exe.ws.take((nc, p), x.dtype)
        self.tmp = exe.ws.take((nc, p), x.dtype)
        self.crop = view_as(self.wide, (nc, hq, wq))[:, :ho, :wo]
        self.y = view_as(y, (nc, ho, wo))
        self.w = scratch((nc, kh * kw), x.dtype)
        self.b = scratch((nc, 1, 1), x.dtype) if bias is not None else None
        act = exe.attrs["activation"]
        self.act = (act, tuple(exe.attrs["activation_params"]))
        self.scratch = exe.ws.like(self.y) if act == "HardSwish" else None
        # small grids: taps gathered into (NC, K, P) and one batched (1 x K) @ (K x P) product
        self.cols = exe.ws.take((nc, kh * kw, p), x.dtype) if p <= SMALL_GRID else None
        parts = exe.backend.num_threads if nc * p >= DEPTHWISE_PARALLEL_MIN else 1
        self.tasks = [lambda r=r: self._range(*r) for r in split(nc, parts)]

    def prepare(self, w, b):
        np.copyto(self.w, np.tile(w.reshape(-1, self.w.shape[1]), (self.n, 1)))
        if b is not None:
            np.copyto(self.b, np.tile(b, self.n).reshape(-1, 1, 1))

    def _range(self, c0, c1):
        for dst, src in self.fills:
            np.copyto(dst[c0:c1], src[c0:c1])
        self._block(c0, c1)
        y = self.y[c0:c1]
        if self.b is not None:
            np.add(self.crop[c0:c1], self.b[c0:c1], out=y)
        else:
            np.copyto(y, self.crop[c0:c1])
        apply_activation(*self.act, y, None if self.scratch is None else self.scratch[c0:c1])

    def _block(self, a, b):
        acc, tmp, w = self.wide[a:b], self.tmp[a:b], self.w[a:b]
        if self.cols is not None:
            cols = self.cols[a:b]
            for t, src in self.taps:
                np.copyto(cols[:, t], src[a:b])
            np.matmul(w[:, None, :], cols, out=acc[:, None, :])
            return
        t0, src0 = self.taps[0]
        np.multiply(src0[a:b], w[:, t0 : t0 + 1], out=acc)
        for t, src in self.taps[1:]:
            np.multiply(src[a:b], w[:, t : t + 1], out=tmp)
            np.add(acc, tmp, out=acc)

    def run(self, exe):
        parallel(exe.backend, self.tasks)


class _DepthwiseNumba:
    """2-D float32 depthwise Conv by the compiled kernel (``mnnpy.backends.cpu.kernels.depthwise``):
    taps, bias and the fused activation (none, Relu, Clip, LeakyRelu, HardSigmoid, HardSwish:
    ``kernels/epilogue.py``) in one pass over
    ``Y: (N, C, Ho, Wo)``, any stride, dilation and padding; other activations are applied by
    ``Conv`` afterwards. Split by channel plane over the backend's pool (``num_threads``) when
    the output has at least ``DEPTHWISE_PARALLEL_MIN`` elements (the kernel releases the GIL)."""

    fused_bias = True

    @staticmethod
    def usable(x, w, y) -> bool:
        """Whether the kernel takes these arrays (float32, C-contiguous) and numba compiles here."""
        if w.dtype != np.float32 or any(a.dtype != np.float32 or not a.flags.c_contiguous for a in (x, y)):
            return False
        return depthwise_kernels() is not None

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        c, kh, kw = w.shape[0], w.shape[2], w.shape[3]
        self.w = scratch((c, kh, kw), np.float32)
        self.b = scratch((c,), np.float32)
        self.b.fill(0)
        act = exe.attrs["activation"] or ""
        params = tuple(exe.attrs["activation_params"]) + (0.0, 0.0)
        self.code = ACT.get(act, 0)
        self.fused_activation = act in ACT
        a0, a1 = (params[0], params[1]) if self.code else (0.0, 0.0)
        self.args = (*strides, *dil, pads[0], pads[1], self.code, np.float32(a0), np.float32(a1))
        parts = exe.backend.num_threads if y.size >= DEPTHWISE_PARALLEL_MIN else 1
        hw = y.shape[2] * y.shape[3]
        small = hw <= BLOCKS_MAX_MAP or (max(strides) > 1 and hw <= BLOCKS_MAX_STRIDED_MAP)
        blocked = channel_blocks() if small and x.shape[2] * x.shape[3] <= BLOCKS_MAX_INPUT_MAP else None
        if blocked is not None:  # channels in the vector lanes: units are blocks of 16 channels
            units, kernel = x.shape[0] * -(-c // 16), blocked
        else:
            units, kernel = x.shape[0] * c, depthwise_kernels()
        self.tasks = [bind(kernel, x, self.w, self.b, y, lo, hi, *self.args) for lo, hi in split(units, parts)]

    def prepare(self, w, b):
        np.copyto(self.w, w.reshape(self.w.shape))
        if b is not None:
            np.copyto(self.b, b)

    def native_phases(self):
        """``[tasks]``: the run is the compiled kernel's calls (``program.py``)."""
        return [self.tasks]

    def run(self, exe):
        parallel(exe.backend, self.tasks)

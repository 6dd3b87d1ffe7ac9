"""CPU Conv and ConvTranspose (ONNX operators.md #Conv, #ConvTranspose), any spatial rank.

Conv ``X: (N, C, *S)``, ``W: (M, C/G, *K)``, ``B: (M,)`` -> ``Y: (N, M, *O)``::

    Y[n, m, o] = B[m] + sum_{c, k} X_pad[n, g*C/G + c, o*s + k*d] * W[m, c, k]   (g = m // (M/G))

then the fused activation (``activation``/``activation_params``) in place. Three kernels,
chosen at resize:

* pointwise (1x1, stride 1, no pads): one matmul ``W (G, M/G, C/G) @ X (N, G, C/G, HW)``;
* depthwise (2-D, ``G == C == M``): a sum over kernel taps of ``W[:, tap] * X_phase`` on
  a flat, zero-padded, stride-phase-split copy of X (contiguous rows, no im2col);
* general: im2col into a preallocated ``(N, G, C/G*prod(K) + 1, prod(O))`` buffer (each
  tap one strided copy; the padding stays zero; a row of ones carries the bias) and one
  matmul per group.

ConvTranspose ``X: (N, C, *S)``, ``W: (C, M/G, *K)`` -> ``Y: (N, M, *O)``: the adjoint
of Conv, ``cols = W^T @ X`` then every tap scattered (col2im) into a padded output.
Copies and elementwise work are split over the backend's thread pool.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.blas import MatMul
from mnnpy.backends.cpu.ops.elementwise import apply_activation
from mnnpy.backends.cpu.parallel import parallel, split, workers
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch
from mnnpy.ops import ShapeContext, get_schema
from mnnpy.ops.common import window_output
from mnnpy.ops.conv import conv_transpose_pads

DEPTHWISE_PARALLEL_MIN = 1 << 17  # elements of a depthwise grid split over the backend's threads (measured)
SHORT_MAPS = 0.8  # depthwise maps whose output rows are under this share of the padded rows: _DepthwiseRows
SMALL_GRID = 400  # depthwise grids up to this many positions per channel use a batched matmul (measured)


def shape_context(exe: Execution) -> ShapeContext:
    """The shape-function context of ``exe``'s op (shapes, dtypes, known values, attrs)."""
    infos = exe.input_infos
    return ShapeContext(
        exe.op,
        get_schema(exe.op.type),
        [i.shape if i is not None else None for i in infos],
        [i.dtype if i is not None else None for i in infos],
        [i.value if i is not None else None for i in infos],
        exe.attrs,
    )


def window(exe: Execution, in_sizes, kernel, ceil_mode: int = 0):
    """``(out_sizes, strides, dilations, pads)`` of a conv/pool window after auto_pad."""
    a, n = exe.attrs, len(kernel)
    out, pads = window_output(
        shape_context(exe), list(in_sizes), list(kernel), a["strides"], a["dilations"], a["pads"], a["auto_pad"], ceil_mode
    )
    return out, list(a["strides"]) or [1] * n, list(a["dilations"]) or [1] * n, pads


def tap_range(in_size: int, out_size: int, offset: int, stride: int) -> tuple[int, int, int]:
    """Outputs ``o`` in ``[lo, hi)`` read input ``o*stride + offset`` inside ``[0, in_size)``.

    Returns ``(lo, hi, lo*stride + offset)``; ``hi <= lo`` when the tap reads only padding.
    """
    lo = max(0, -(offset // stride))
    hi = min(out_size, (in_size - 1 - offset) // stride + 1)
    return lo, hi, lo * stride + offset


def tap_slices(in_sizes, out_sizes, tap, strides, dilations, pads_begin):
    """``(out_slices, in_slices)`` of kernel tap ``tap`` (a tuple of indices), or None if all padding."""
    outs, ins = [], []
    for i, t in enumerate(tap):
        lo, hi, start = tap_range(in_sizes[i], out_sizes[i], t * dilations[i] - pads_begin[i], strides[i])
        if hi <= lo:
            return None
        outs.append(slice(lo, hi))
        ins.append(slice(start, start + (hi - lo - 1) * strides[i] + 1, strides[i]))
    return tuple(outs), tuple(ins)


def view_as(a: np.ndarray, shape) -> np.ndarray:
    """``a.reshape(shape)`` that must be a view (a copy would silently break the kernels)."""
    v = a.reshape(shape)
    assert v.size == 0 or np.shares_memory(v, a), "reshape copied"
    return v


class _Pointwise:
    """1x1, stride 1, no pads: ``Y (N, G, M/G, HW) = W (G, M/G, C/G) @ X (N, G, C/G, HW)``."""

    fused_bias = False

    def __init__(self, exe, x, w, y, g):
        n, c, m = x.shape[0], x.shape[1], w.shape[0]
        hw = math.prod(x.shape[2:])
        if n == 1 and g == 1:
            self.w, self.x, self.y = view_as(w, (m, c)), view_as(x, (c, hw)), view_as(y, (m, hw))
        else:
            self.w = view_as(w, (g, m // g, c // g))
            self.x, self.y = view_as(x, (n, g, c // g, hw)), view_as(y, (n, g, m // g, hw))
        self.mm = MatMul(exe.backend, self.w, self.x, self.y)

    def prepare(self, w, b):
        pass  # self.w is a view of the weight tensor (constant or the same arena view every run)

    def run(self, exe):
        self.mm()


def box_complement(shape, box) -> list[tuple[slice, ...]]:
    """Disjoint boxes covering ``shape`` minus ``box`` (one ``slice`` per axis, step 1)."""
    out = []
    for d, (size, s) in enumerate(zip(shape, box)):
        inside, rest = tuple(box[:d]), (slice(None),) * (len(shape) - d - 1)
        if s.start > 0:
            out.append((*inside, slice(0, s.start), *rest))
        if s.stop < size:
            out.append((*inside, slice(s.stop, size), *rest))
    return out


class _Im2col:
    """General Conv: im2col + one matmul per group.

    The ``(N, G, C/G*prod(K) + 1, prod(O))`` column buffer lives in the backend's shared
    workspace, so each run writes all of it: each kernel tap's plane is one strided copy of
    X plus zero fills where the tap reads padding; the last row is ones (it carries the bias).
    """

    fused_bias = True

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        n, c, m, g = x.shape[0], x.shape[1], w.shape[0], exe.attrs["group"]
        cg, kernel, nd = c // g, w.shape[2:], len(w.shape) - 2
        kk, ll = math.prod(kernel), math.prod(out)
        rows = cg * kk + (bias is not None)
        self.col = exe.ws.take((n, g, rows, ll), x.dtype)
        self.ones = self.col[:, :, -1, :] if bias is not None else None
        body = view_as(self.col[:, :, : cg * kk, :], (n, g, cg, *kernel, *out))
        xg = view_as(x, (n, g, cg, *x.shape[2:]))
        head = (slice(None),) * 3
        self.taps = []  # per tap: (copy destination, source, zero-filled parts)
        for tap in itertools.product(*[range(k) for k in kernel]):
            s = tap_slices(x.shape[2:], out, tap, strides, dil, pads[:nd])
            plane = body[head + tap]
            if s is None:
                self.taps.append((None, None, [plane]))
            else:
                zeros = [plane[head + box] for box in box_complement(out, s[0])]
                self.taps.append((plane[head + s[0]], xg[head + s[1]], zeros))
        self.w = scratch((g, m // g, rows), x.dtype)
        self.cgkk = cg * kk
        if n == 1 and g == 1:
            self.mm = MatMul(exe.backend, self.w[0], self.col[0, 0], view_as(y, (m, ll)))
        else:
            self.mm = MatMul(exe.backend, self.w, self.col, view_as(y, (n, g, m // g, ll)))
        parts = workers(exe.backend, self.col.size)
        step = -(-len(self.taps) // parts)
        self.tasks = [lambda ts=self.taps[i : i + step]: self._fill(ts) for i in range(0, len(self.taps), step)]

    @staticmethod
    def _fill(taps):
        for dst, src, zeros in taps:
            for z in zeros:
                z.fill(0)
            if dst is not None:
                np.copyto(dst, src)

    def prepare(self, w, b):
        g, mg = self.w.shape[:2]
        self.w[:, :, : self.cgkk] = w.reshape(g, mg, self.cgkk)
        if b is not None:
            self.w[:, :, -1] = b.reshape(g, mg)

    def run(self, exe):
        if self.ones is not None:
            self.ones.fill(1)
        parallel(exe.backend, self.tasks)
        self.mm()


class _Kn2row:
    """Stride-1 2-D Conv with few output channels (``M <= C/2``), kn2row (Anderson et al.,
    "Low-memory GEMM-based convolution algorithms", 2017): no im2col of X.

    X is copied into a flat zero-padded ``(C, Hp*Wp)`` buffer; one GEMM
    ``Z (K*M, Hp*Wp) = W (K*M, C) @ X_pad`` gives every tap's partial result, and the
    output on the wide ``(Ho, Wp)`` grid is the sum of the K row blocks of Z, each
    shifted by its tap's offset ``i*d_h*Wp + j*d_w``; the crop to ``(Ho, Wo)`` adds the bias.
    """

    fused_bias = True

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        n, c, h, wd = x.shape
        m, kh, kw = w.shape[0], w.shape[2], w.shape[3]
        (dh, dw), (pt, pl, pb, pr) = dil, pads
        hp, wp = h + pt + pb, wd + pl + pr
        ho, wo = out
        self.n, self.m, self.kk, size = n, m, kh * kw, hp * wp
        self.offsets = [i * dh * wp + j * dw for i in range(kh) for j in range(kw)]
        self.span = (ho - 1) * wp + wo  # wide positions that hold every valid output
        self.pad = scratch((n, c, size), x.dtype)
        self.fill = (view_as(self.pad, (n, c, hp, wp))[:, :, pt : pt + h, pl : pl + wd], x)
        self.w = scratch((self.kk * m, c), x.dtype)
        self.z = exe.ws.take((n, self.kk * m, size), x.dtype)
        self.mms = [MatMul(exe.backend, self.w, self.pad[i], self.z[i]) for i in range(n)]
        self.acc = exe.ws.take((n, m, ho * wp), x.dtype)
        self.crop = view_as(self.acc, (n, m, ho, wp))[:, :, :, :wo]
        self.y = y
        self.b = scratch((m, 1, 1), x.dtype) if bias is not None else None

    def prepare(self, w, b):
        # row block t of self.w is tap t's (M, C) weight slice
        np.copyto(view_as(self.w, (self.kk, self.m, -1)), np.moveaxis(w.reshape(self.m, -1, self.kk), 2, 0))
        if b is not None:
            np.copyto(self.b, b.reshape(-1, 1, 1))

    def run(self, exe):
        np.copyto(*self.fill)
        span, m = self.span, self.m
        for i, mm in enumerate(self.mms):
            mm()
            z, acc = self.z[i], self.acc[i, :, :span]
            o0, o1 = self.offsets[0], self.offsets[1]
            np.add(z[:m, o0 : o0 + span], z[m : 2 * m, o1 : o1 + span], out=acc)
            for t in range(2, self.kk):
                o = self.offsets[t]
                np.add(acc, z[t * m : (t + 1) * m, o : o + span], out=acc)
        if self.b is not None:
            np.add(self.crop, self.b, out=self.y)
        else:
            np.copyto(self.y, self.crop)


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


def _finish(exe, y2, bias, act, scratch):
    """Bias (``(M, 1)``, may be None) and activation on ``y2: (N*M, L)``-like rows, split over threads."""
    if bias is None and not act[0]:
        return

    def part(r0, r1):
        rows = y2[:, r0:r1]
        if bias is not None:
            np.add(rows, bias[r0:r1], out=rows)
        apply_activation(*act, rows, None if scratch is None else scratch[:, r0:r1])

    parallel(exe.backend, [lambda r=r: part(*r) for r in split(y2.shape[1], workers(exe.backend, y2.size))])


@cpu_execution("Conv")
class Conv(Execution):
    """Conv with optional bias and fused activation, ``X: (N, C, *S) -> Y: (N, M, *O)``; see module doc."""

    def on_resize(self, inputs, outputs):
        self.ws = self.backend.workspace()  # temporaries shared with the other executions
        x, w, y = inputs[0], inputs[1], outputs[0]
        b = inputs[2] if len(inputs) > 2 else None
        n, c, m, g = x.shape[0], x.shape[1], w.shape[0], self.attrs["group"]
        out, strides, dil, pads = window(self, x.shape[2:], w.shape[2:])
        self.const = all(i is None or i.value is not None for i in self.input_infos[1:])
        self.empty = y.size == 0
        if self.empty:
            return
        pointwise = all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in strides) and not any(pads)
        if pointwise:
            self.kernel = _Pointwise(self, x, w, y, g)
        elif x.ndim == 4 and g == c == m and all(s == 1 for s in strides) and out[0] < SHORT_MAPS * (out[0] + w.shape[2] - 1):
            self.kernel = _DepthwiseRows(self, x, w, y, b, out, strides, dil, pads)
        elif x.ndim == 4 and g == c == m:
            self.kernel = _Depthwise(self, x, w, y, b, out, strides, dil, pads)
        elif x.ndim == 4 and g == 1 and all(s == 1 for s in strides) and 2 * m <= c and w.shape[2] * w.shape[3] > 1:
            self.kernel = _Kn2row(self, x, w, y, b, out, strides, dil, pads)
        else:
            self.kernel = _Im2col(self, x, w, y, b, out, strides, dil, pads)
        act = self.attrs["activation"]
        self.act = (act, tuple(self.attrs["activation_params"]))
        self.y2 = view_as(y, (n, m, -1))
        self.bias = None if b is None or self.kernel.fused_bias else view_as(b, (m, 1))
        self.scratch = self.ws.like(self.y2) if act == "HardSwish" else None
        self.kernel.prepare(w, b)

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        if not self.const:
            self.kernel.prepare(inputs[1], inputs[2] if len(inputs) > 2 else None)
        self.kernel.run(self)
        if not isinstance(self.kernel, _Depthwise):
            act = self.act if self.act[0] else ("", ())
            _finish(self, self.y2, self.bias, act, self.scratch)


@cpu_execution("ConvTranspose")
class ConvTranspose(Execution):
    """ConvTranspose ``X: (N, C, *S), W: (C, M/G, *K), B: (M,) -> Y: (N, M, *O)``.

    ``Y_full[n, m, i*s + k*d] += sum_c X[n, c, i] * W[c, m, k]`` (cols = W^T @ X, then
    col2im), ``Y = Y_full[pads_begin : pads_begin + O] + B``; pads from auto_pad /
    output_shape per the ONNX spec (``mnnpy.ops.conv.conv_transpose_pads``).
    """

    def on_resize(self, inputs, outputs):
        self.ws = self.backend.workspace()  # temporaries shared with the other executions
        x, w, y = inputs[0], inputs[1], outputs[0]
        b = inputs[2] if len(inputs) > 2 else None
        n, c, g = x.shape[0], x.shape[1], self.attrs["group"]
        kernel, nd = w.shape[2:], x.ndim - 2
        mg, cg, m = w.shape[1], c // g, y.shape[1]
        a = self.attrs
        strides = list(a["strides"]) or [1] * nd
        dil = list(a["dilations"]) or [1] * nd
        pads = conv_transpose_pads(shape_context(self), x.shape[2:], kernel)
        self.const = all(i is None or i.value is not None for i in self.input_infos[1:])
        self.empty = y.size == 0
        if self.empty:
            return
        ins, outs, kk, ll = x.shape[2:], y.shape[2:], math.prod(kernel), math.prod(x.shape[2:])
        self.wt = scratch((g, mg * kk, cg), x.dtype)
        self.cols = self.ws.take((n, g, mg * kk, ll), x.dtype)
        self.mm = MatMul(self.backend, self.wt, view_as(x, (n, g, cg, ll)), self.cols)
        cols = view_as(self.cols, (n, g, mg, *kernel, *ins))
        yg = view_as(y, (n, g, mg, *outs))
        # Y[o] gets cols[k, i] where o = i*s + k*d - pb; clip i to outputs inside [0, O).
        self.adds, covered = [], np.zeros(outs, bool)
        for tap in itertools.product(*[range(k) for k in kernel]):
            src, dst = [], []
            for j, t in enumerate(tap):
                lo, hi, start = tap_range(outs[j], ins[j], t * dil[j] - pads[j], strides[j])
                if hi <= lo:
                    break
                src.append(slice(lo, hi))
                dst.append(slice(start, start + (hi - lo - 1) * strides[j] + 1, strides[j]))
            else:
                head = (slice(None),) * 3
                self.adds.append((yg[head + tuple(dst)], cols[head + tap + tuple(src)]))
                covered[tuple(dst)] = True
        # Taps never overlap when each stride >= its dilated kernel extent: plain copies.
        self.disjoint = all(s >= (k - 1) * d + 1 for s, k, d in zip(strides, kernel, dil))
        self.zero = not (self.disjoint and covered.all())
        self.y2 = view_as(y, (n, m, -1))
        self.bias = None if b is None else view_as(b, (m, 1))
        act = ("", ())
        self.finish = lambda: _finish(self, self.y2, self.bias, act, None)
        self.prepare(w)

    def prepare(self, w):
        g, mk, cg = self.wt.shape
        np.copyto(self.wt, np.swapaxes(w.reshape(g, cg, mk), 1, 2))

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        if not self.const:
            self.prepare(inputs[1])
        self.mm()
        y = outputs[0]
        if self.zero:
            y.fill(0)
        for dst, src in self.adds:
            if self.disjoint:
                np.copyto(dst, src)
            else:
                np.add(dst, src, out=dst)
        self.finish()

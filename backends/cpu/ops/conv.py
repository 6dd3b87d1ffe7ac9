"""CPU Conv (ONNX operators.md #Conv), any spatial rank, with a fused activation.

``X: (N, C, *S)``, ``W: (M, C/G, *K)``, ``B: (M,)`` -> ``Y: (N, M, *O)``::

    Y[n, m, o] = B[m] + sum_{c, k} X_pad[n, g*C/G + c, o*s + k*d] * W[m, c, k]   (g = m // (M/G))

then the fused activation (``activation``/``activation_params``) in place. The kernel is
chosen at resize:

* pointwise (1x1, stride 1, no pads): ``pointwise.py``: one matmul
  ``W (G, M/G, C/G) @ X (N, G, C/G, HW)`` per thread's block, bias and activation by the
  compiled epilogue on that block;
* depthwise (2-D, ``G == C == M``): ``depthwise.py``: float32 by the compiled (numba) kernel
  with bias and activation in its pass, else a NumPy sum over kernel taps;
* Winograd (float32 2-D 3x3, stride 1, group 1, maps and channels large enough): ``winograd.py``;
* kn2row (2-D, stride 1, ``M <= C/2``): one GEMM for every tap, shifted sums of its rows;
* float32 2-D with at least 32 output channels: ``direct.py``, output channels in the vector
  lanes, no column buffer;
* general, float32 2-D: ``im2col.py``, the column buffer written by a compiled kernel, bias and
  activation as an epilogue;
* general: im2col into the shared workspace (each tap one strided copy plus zero fills
  where it reads padding; a row of ones carries the bias) and one matmul per group;
* more than ``MAX_TAP_LOOP`` kernel taps (any group count, any rank): ``_Windowed``, the same
  im2col gathered from a strided window view of the zero-padded input in one copy per chunk
  of output rows, so no Python loop runs over the taps (the loops above cost microseconds per
  tap: a 4000x4000 kernel took 99 s per run) and the column buffer stays bounded.

A float32 1-D Conv is viewed as a 2-D one with one row, so the kernels above take it (silero
VAD's 256-tap stride-128 conv: 0.12 -> 0.014 ms). ConvTranspose is in ``conv_transpose.py``;
window geometry from the shape function (``mnnpy.ops.geometry.Window``).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.blas import MatMul
from mnnpy.backends.cpu.ops.activation import bias_activation
from mnnpy.backends.cpu.ops.depthwise import SHORT_MAPS, _Depthwise, _DepthwiseNumba, _DepthwiseRows
from mnnpy.backends.cpu.ops.direct import _Direct
from mnnpy.backends.cpu.ops.im2col import _Im2colNumba
from mnnpy.backends.cpu.ops.im2col import usable as im2col_usable
from mnnpy.backends.cpu.ops.pointwise import _Pointwise
from mnnpy.backends.cpu.ops.windows import box_complement, view_as
from mnnpy.backends.cpu.ops.winograd import _Winograd
from mnnpy.backends.cpu.ops.winograd import choose as winograd_tile
from mnnpy.backends.cpu.parallel import parallel, workers
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import charge_taps, scratch
from mnnpy.ops.geometry import tap_slices

MAX_TAP_LOOP = 256  # kernel taps up to which a kernel may loop over taps in Python (16x16)
CHUNK_BYTES = 1 << 25  # bytes of _Windowed's column buffer, unless one output row needs more


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


class _Windowed:
    """Large kernels: im2col without a loop over taps. The input, zero-padded once per run
    into a buffer made at resize, is viewed as windows ``(N, G, C/G, *O, *K)`` (a strided view:
    stride ``s`` over positions, dilation ``d`` within a window, no copy); per chunk of
    ``R`` rows of the first output axis, one copy gathers them into the column buffer
    ``(N, G, C/G * prod(K), R * prod(O[1:]))`` (at most ``CHUNK_BYTES``, one row at least)
    and one matmul per group ``W (G, M/G, C/G * prod(K))`` @ columns writes those output rows.
    """

    fused_bias = False

    def __init__(self, exe, x, w, y, out, strides, dil, pads):
        n, c, m, g = x.shape[0], x.shape[1], w.shape[0], exe.attrs["group"]
        cg, kernel, nd = c // g, tuple(w.shape[2:]), len(out)
        kk, rest = math.prod(kernel), math.prod(out[1:])
        self.w = scratch((g, m // g, cg * kk), x.dtype)
        self.fill = None
        src = x
        if any(pads):
            padded = scratch((n, c, *[s + pads[i] + pads[i + nd] for i, s in enumerate(x.shape[2:])]), x.dtype)
            inner = padded[(slice(None), slice(None), *[slice(pads[i], pads[i] + s) for i, s in enumerate(x.shape[2:])])]
            self.fill, src = (inner, x), padded
        extent = tuple((k - 1) * d + 1 for k, d in zip(kernel, dil))
        win = np.lib.stride_tricks.sliding_window_view(src, extent, axis=tuple(range(2, 2 + nd)))
        win = win[(slice(None), slice(None), *[slice(None, None, st) for st in strides], *[slice(None, None, d) for d in dil])]
        win = win[(slice(None), slice(None), *[slice(0, o) for o in out])].reshape(n, g, cg, *out, *kernel)
        # -> (N, G, C/G, *K, *O): the column order (c, k) of the weights, positions last
        win = np.moveaxis(win, tuple(range(3, 3 + nd)), tuple(range(3 + nd, 3 + 2 * nd)))
        per_row = n * c * kk * rest * x.dtype.itemsize
        rows = max(1, min(out[0], CHUNK_BYTES // max(per_row, 1)))
        flat = exe.ws.take(n * g * cg * kk * rows * rest, x.dtype)
        yg = view_as(y, (n, g, m // g, *out))
        self.chunks = []  # per chunk: (columns in window layout, their window view, the product)
        for r0 in range(0, out[0], rows):
            r = min(rows, out[0] - r0)
            cols = flat[: n * g * cg * kk * r * rest].reshape(n, g, cg * kk, r * rest)
            dst = cols.reshape(n, g, cg, *kernel, r, *out[1:])
            ys = view_as(yg[:, :, :, r0 : r0 + r], (n, g, m // g, r * rest))
            self.chunks.append(
                (dst, win[(Ellipsis, slice(r0, r0 + r), *[slice(None)] * (nd - 1))], MatMul(exe.backend, self.w, cols, ys))
            )

    def prepare(self, w, b):
        np.copyto(self.w, w.reshape(self.w.shape))

    def run(self, exe):
        if self.fill is not None:
            np.copyto(*self.fill)
        for dst, src, mm in self.chunks:
            np.copyto(dst, src)
            mm()


@cpu_execution("Conv")
class Conv(Execution):
    """Conv with optional bias and fused activation, ``X: (N, C, *S) -> Y: (N, M, *O)``; see module doc."""

    def on_resize(self, inputs, outputs):
        self.ws = self.backend.workspace()  # temporaries shared with the other executions
        x, w, y = inputs[0], inputs[1], outputs[0]
        b = inputs[2] if len(inputs) > 2 else None
        n, c, m, g = x.shape[0], x.shape[1], w.shape[0], self.attrs["group"]
        out, strides, dil, pads = self.geometry["window"].unpack()
        if x.ndim == 3 and x.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous:
            # 1-D as 2-D with one row (silero's STFT conv, 256 taps): the 2-D kernels take it
            x, y = view_as(x, (n, c, 1, x.shape[2])), view_as(y, (n, m, 1, y.shape[2]))
            w = np.asarray(w).reshape(m, w.shape[1], 1, w.shape[2])
            out, strides, dil, pads = (1, *out), (1, *strides), (1, *dil), (0, pads[0], 0, pads[1])
        self.const = all(i is None or i.value is not None for i in self.input_infos[1:])
        self.empty = y.size == 0
        if self.empty:
            return
        charge_taps(math.prod(w.shape[2:]) * n, "CPU Conv")
        pointwise = all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in strides) and not any(pads)
        depthwise = x.ndim == 4 and g == c == m
        if pointwise:
            self.kernel = _Pointwise(self, x, w, y, g)
        elif depthwise and _DepthwiseNumba.usable(x, w, y):
            self.kernel = _DepthwiseNumba(self, x, w, y, b, out, strides, dil, pads)
        elif math.prod(w.shape[2:]) > MAX_TAP_LOOP:
            self.kernel = _Windowed(self, x, w, y, out, strides, dil, pads)
        elif depthwise and all(s == 1 for s in strides) and out[0] < SHORT_MAPS * (out[0] + w.shape[2] - 1):
            self.kernel = _DepthwiseRows(self, x, w, y, b, out, strides, dil, pads)
        elif depthwise:
            self.kernel = _Depthwise(self, x, w, y, b, out, strides, dil, pads)
        elif (tile := winograd_tile(x, w, y, strides, dil, g)) and not (
            tile == 2 and _Direct.usable(x, w, y, g, out, strides, dil, pads)
        ):  # F(2x2) only where the direct kernel does not take the Conv (ops/winograd.py)
            self.kernel = _Winograd(self, x, w, y, b, out, pads, tile)
        elif x.ndim == 4 and g == 1 and all(s == 1 for s in strides) and 2 * m <= c and w.shape[2] * w.shape[3] > 1:
            self.kernel = _Kn2row(self, x, w, y, b, out, strides, dil, pads)
        elif _Direct.usable(x, w, y, g, out, strides, dil, pads):
            self.kernel = _Direct(self, x, w, y, b, out, strides, dil, pads)
        elif im2col_usable(x, w, y):
            self.kernel = _Im2colNumba(self, x, w, y, b, out, strides, dil, pads)
        else:
            self.kernel = _Im2col(self, x, w, y, b, out, strides, dil, pads)
        act = self.attrs["activation"]
        self.act = (act, tuple(self.attrs["activation_params"]))
        self.y2 = view_as(y, (n, m, -1))
        self.bias = None if b is None or self.kernel.fused_bias else view_as(b, (m, 1))
        # the kernel applied bias and activation itself (else bias_activation after it)
        self.fused = getattr(self.kernel, "fused_activation", False) or isinstance(self.kernel, _Depthwise)
        self.scratch = self.ws.like(self.y2) if act == "HardSwish" and not self.fused else None
        self.kernel.prepare(w, b)

    def native_phases(self):
        """The run as native phases (``program.py``): the kernel's, where the weights are
        constants and the kernel applies bias and activation itself; else ``None``."""
        if self.empty:
            return []
        get = getattr(self.kernel, "native_phases", None)
        return get() if get is not None and self.const and self.fused else None

    def native_after(self):
        """What must run right after the native phases (the kernel's ``after``: Winograd's
        check of its input), or ``None``; a Program ends with this op (``program.py``)."""
        after = None if self.empty else getattr(self.kernel, "after", None)
        return None if after is None else functools.partial(after, self)

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        if not self.const:
            self.kernel.prepare(inputs[1], inputs[2] if len(inputs) > 2 else None)
        self.kernel.run(self)
        if not self.fused:
            act = self.act if self.act[0] else ("", ())
            bias_activation(self, self.y2, self.bias, act, self.scratch)

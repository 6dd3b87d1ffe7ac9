"""CPU ConvTranspose (ONNX operators.md #ConvTranspose): ``cols = W^T @ X`` then col2im.

float32 2-D ConvTransposes whose taps never overlap (every stride at least its dilated kernel
extent: PP-OCR det's 2x2 stride-2 up-sampling) do the col2im and the bias in one pass of the
compiled kernel (``mnnpy.backends.cpu.kernels.conv_transpose``), split by output rows over the
backend's pool; the NumPy copies remain for the rest and where numba cannot compile.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.blas import MatMul
from mnnpy.backends.cpu.kernels.conv_transpose import kernel as scatter_kernel
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.activation import bias_activation
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, parallel, split
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import charge_taps, scratch
from mnnpy.ops.geometry import tap_range


@cpu_execution("ConvTranspose")
class ConvTranspose(Execution):
    """ConvTranspose ``X: (N, C, *S), W: (C, M/G, *K), B: (M,) -> Y: (N, M, *O)``.

    ``Y_full[n, m, i*s + k*d] += sum_c X[n, c, i] * W[c, m, k]`` (cols = W^T @ X, then
    col2im), ``Y = Y_full[pads_begin : pads_begin + O] + B``; pads from auto_pad /
    output_shape per the ONNX spec (the shape function's ``window``).
    """

    def on_resize(self, inputs, outputs):
        self.ws = self.backend.workspace()  # temporaries shared with the other executions
        x, w, y = inputs[0], inputs[1], outputs[0]
        b = inputs[2] if len(inputs) > 2 else None
        n, c, g = x.shape[0], x.shape[1], self.attrs["group"]
        kernel = w.shape[2:]
        mg, cg, m = w.shape[1], c // g, y.shape[1]
        _, strides, dil, pads = self.geometry["window"].unpack()
        self.const = all(i is None or i.value is not None for i in self.input_infos[1:])
        self.empty = y.size == 0
        if self.empty:
            return
        charge_taps(math.prod(kernel), "CPU ConvTranspose")
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
        self.finish = lambda: bias_activation(self, self.y2, self.bias, act, None)
        self.scatter = self._compiled(x, y, kernel, strides, dil, pads) if self.disjoint else None
        self.prepare(w, b)

    def _compiled(self, x, y, kernel, strides, dil, pads):
        """The compiled col2im + bias tasks where they apply (2-D, float32, contiguous), else ``None``."""
        if len(kernel) != 2 or any(a.dtype != np.float32 or not a.flags.c_contiguous for a in (x, y)):
            return None
        scatter = scatter_kernel()
        if scatter is None:
            return None
        (h, w), (ho, wo), (kh, kw) = x.shape[2:], y.shape[2:], kernel
        rows = np.full(ho, -1, np.int64)
        for ky in range(kh):
            lo, hi, start = tap_range(ho, h, ky * dil[0] - pads[0], strides[0])
            for i in range(lo, hi):
                rows[start + (i - lo) * strides[0]] = ky * h + i
        taps, seen = np.zeros((kw, 3), np.int64), np.zeros(wo, bool)
        for kx in range(kw):
            lo, hi, start = tap_range(wo, w, kx * dil[1] - pads[1], strides[1])
            if hi > lo:
                taps[kx] = lo, hi, start
                seen[start : start + (hi - lo - 1) * strides[1] + 1 : strides[1]] = True
        pair = kw == 2 and strides[1] == 2 and wo == 2 * w and taps.tolist() == [[0, w, 0], [0, w, 1]]
        m = y.shape[1]
        self.b32 = scratch((m,), np.float32)
        cols = view_as(self.cols, (y.shape[0] * m, kh * kw, h * w))
        self.scatter_args = (scatter, cols, (rows, taps, w, strides[1], int(seen.all()), int(pair)))
        return self._scatter_tasks(y, 0)

    def _scatter_tasks(self, y, relu: int) -> list:
        """The compiled col2im tasks writing ``y`` (``relu``: 1 applies Relu in the same pass)."""
        scatter, cols, args = self.scatter_args
        y3 = view_as(y, (-1, *y.shape[2:]))
        parts = self.backend.num_threads if y.size >= PARALLEL_ELEMENTS else 1
        return [bind(scatter, cols, self.b32, y3, *args, relu, *r) for r in split(y3.shape[0] * y3.shape[1], parts)]

    def fuse_relu(self, y) -> bool:
        """Write ``Relu(Y)`` into ``y`` (the output of a Relu reading only this op's output),
        in the compiled pass; ``False`` (nothing changed) where that pass is not used."""
        if self.scatter is None or y.dtype != np.float32 or not y.flags.c_contiguous:
            return False
        self.scatter = self._scatter_tasks(y, 1)
        return True

    def prepare(self, w, b=None):
        g, mk, cg = self.wt.shape
        np.copyto(self.wt, np.swapaxes(w.reshape(g, cg, mk), 1, 2))
        if self.scatter is not None:
            self.b32.fill(0)
            if b is not None:
                np.copyto(self.b32, b)

    def on_execute(self, inputs, outputs):
        if self.empty:
            return
        if not self.const:
            self.prepare(inputs[1], inputs[2] if len(inputs) > 2 else None)
        self.mm()
        if self.scatter is not None:
            parallel(self.backend, self.scatter)
            return
        y = outputs[0]
        if self.zero:
            y.fill(0)
        for dst, src in self.adds:
            if self.disjoint:
                np.copyto(dst, src)
            else:
                np.add(dst, src, out=dst)
        self.finish()

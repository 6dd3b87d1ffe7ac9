"""CPU ConvTranspose (ONNX operators.md #ConvTranspose): ``cols = W^T @ X`` then col2im."""

from __future__ import annotations

import itertools
import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.blas import MatMul
from mnnpy.backends.cpu.ops.activation import bias_activation
from mnnpy.backends.cpu.ops.windows import view_as
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

"""CPU BatchNormalization (inference), Softmax, MatMul and Gemm (ONNX operators.md).

Everything that depends only on shapes or constant weights (per-channel scale and
shift, pre-transposed Gemm weights, 2-D views for batched MatMul, scratch for
Softmax) is made in ``on_resize``; ``on_execute`` only calls numpy with ``out=``.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.blas import MatMul as BlasMatMul
from mnnpy.backends.cpu.ops.norm import AlongAxis
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch


@cpu_execution("BatchNormalization")
class BatchNormalization(Execution):
    """``Y = X * s + t`` with ``s = scale / sqrt(var + eps)``, ``t = B - mean * s`` per channel.

    X: (N, C, D1, ..., Dn); scale, B, mean, var: (C,). ``s``/``t`` are computed once
    at resize when the four parameters are constants, else per run into scratch.
    """

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        c = x.shape[1] if len(x.shape) > 1 else 1
        bshape = (c,) + (1,) * max(0, len(x.shape) - 2)
        self.const = all(info is not None and info.value is not None for info in self.input_infos[1:5])
        self.const = self.const and not self.attrs["training_mode"]
        self.s = scratch(c, x.dtype)
        self.t = scratch(c, x.dtype)
        self.s_b, self.t_b = self.s.reshape(bshape), self.t.reshape(bshape)
        if self.const:
            self._params(inputs)

    def _params(self, inputs):
        scale, b, mean, var = (np.asarray(v, np.float64) for v in inputs[1:5])
        s = scale / np.sqrt(var + self.attrs["epsilon"])
        self.s[...] = s
        self.t[...] = b - mean * s

    def on_execute(self, inputs, outputs):
        if self.attrs["training_mode"]:
            self._batch_statistics(inputs, outputs)
        elif not self.const:
            self._params(inputs)
        np.multiply(inputs[0], self.s_b, out=outputs[0])
        np.add(outputs[0], self.t_b, out=outputs[0])

    def _batch_statistics(self, inputs, outputs):
        """Training mode: normalise with the batch's mean/variance; write the running ones."""
        x = inputs[0]
        axes = (0,) + tuple(range(2, x.ndim))
        mean, var = x.mean(axis=axes, dtype=np.float64), x.var(axis=axes, dtype=np.float64)
        scale, b = (np.asarray(v, np.float64) for v in inputs[1:3])
        s = scale / np.sqrt(var + self.attrs["epsilon"])
        self.s[...], self.t[...] = s, b - mean * s
        m = self.attrs["momentum"]
        for out, given, batch in zip(outputs[1:3], inputs[3:5], (mean, var)):
            if out is not None:
                out[...] = given * m + batch * (1 - m)


@cpu_execution("Softmax")
class Softmax(AlongAxis):
    """``y = exp(x - max(x)) / sum(exp(x - max(x)))`` along ``axis`` (opset-13 semantics).

    x: any shape, float; scratch of the reduced shape (axis kept as 1) holds max and sum.
    """

    def on_resize(self, inputs, outputs):
        (self.scratch,) = self.reduced_scratch(None)

    def on_execute(self, inputs, outputs):
        x, y, m = inputs[0], outputs[0], self.scratch
        if y.size == 0:
            return
        self.exp_shifted(x, y, m)
        np.sum(y, axis=self.axis, keepdims=True, out=m)
        np.divide(y, m, out=y)


@cpu_execution("MatMul")
class MatMul(Execution):
    """``Y = A @ B`` with numpy.matmul semantics (1-D promotion, broadcast batch dims).

    A: (..., M, K), B: (..., K, N) -> Y: (..., M, N). When B is 2-D and A is
    C-contiguous, A and Y are viewed as (batch*M, K) and (batch*M, N): one GEMM call.
    """

    def on_resize(self, inputs, outputs):
        a, b, y = inputs[0], inputs[1], outputs[0]
        if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and y.flags.c_contiguous:
            rows = math.prod(a.shape[:-1])  # explicit: -1 is ambiguous for empty tensors
            a, y = a.reshape(rows, a.shape[-1]), y.reshape(rows, y.shape[-1])
        self.mm = BlasMatMul(self.backend, a, b, y)

    def on_execute(self, inputs, outputs):
        self.mm()


@cpu_execution("Gemm")
class Gemm(Execution):
    """``Y = alpha * A' @ B' + beta * C``; A' = A.T if transA, B' = B.T if transB.

    A: (M, K) or (K, M); B: (K, N) or (N, K); C broadcast to (M, N) ((), (N,), (1, N),
    (M, 1), (M, N)). A constant B is stored once, transposed and scaled by alpha; a
    constant C is stored scaled by beta.
    """

    def on_resize(self, inputs, outputs):
        alpha, beta = self.attrs["alpha"], self.attrs["beta"]
        dt = self.output_infos[0].dtype
        a, b = inputs[0], inputs[1]
        self.a = a.T if self.attrs["transA"] else a
        self.alpha = None
        if self.input_infos[1].value is not None:
            bt = b.T if self.attrs["transB"] else b
            self.b = np.ascontiguousarray(bt * dt.type(alpha) if alpha != 1 else bt, dtype=dt)
        else:
            self.b = b.T if self.attrs["transB"] else b
            self.alpha = dt.type(alpha) if alpha != 1 else None
        self.c = self.c_raw = None
        self.beta = dt.type(beta)
        has_c = len(inputs) > 2 and inputs[2] is not None and beta != 0
        if has_c and self.input_infos[2].value is not None:
            self.c = np.asarray(inputs[2] * self.beta if beta != 1 else inputs[2], dtype=dt)
        elif has_c:
            self.c_raw = inputs[2]
            self.scratch = scratch(inputs[2].shape, dt) if beta != 1 else None
        self.mm = BlasMatMul(self.backend, self.a, self.b, outputs[0])

    def on_execute(self, inputs, outputs):
        y = outputs[0]
        self.mm()
        if self.alpha is not None:
            np.multiply(y, self.alpha, out=y)
        if self.c is not None:
            np.add(y, self.c, out=y)
        elif self.c_raw is not None:
            c = self.c_raw
            if self.scratch is not None:
                np.multiply(c, self.beta, out=self.scratch)
                c = self.scratch
            np.add(y, c, out=y)

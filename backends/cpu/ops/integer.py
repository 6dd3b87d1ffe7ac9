"""CPU kernels of the integer/quantised ops: MatMulInteger, ConvInteger, QLinearMatMul,
QLinearConv.

Products of 8-bit values are accumulated in float64 (exact for any realistic reduction
length: ``K * 255 * 255 < 2**53``), which lets numpy use BLAS; the result is then exact
int32. Requantisation: ``rint`` (half to even) after scaling, then the zero point, then
saturation to the output dtype (onnxruntime's order).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mnnpy import limits
from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import charge_taps, scratch

F64 = np.dtype(np.float64)


def _row_param(p, a_shape):
    """A per-row vector of A (length M) as ``(M, 1)``; scalars and other shapes as they are."""
    if p is None:
        return 0
    p = np.asarray(p)
    if p.ndim == 1 and p.size > 1 and len(a_shape) >= 2 and p.size == a_shape[-2]:
        return p.reshape(-1, 1)
    return p


def _channel_param(p, rank):
    """A per-output-channel vector ``(M,)`` as ``(M, 1, ...)`` (rank ``rank``)."""
    if p is None:
        return 0
    p = np.asarray(p)
    if p.ndim == 1 and p.size > 1:
        return p.reshape((-1,) + (1,) * (rank - 1))
    return p


def _requantise(y: np.ndarray, acc: np.ndarray, multiplier, zero_point) -> None:
    acc *= multiplier
    np.rint(acc, out=acc)
    acc += np.asarray(zero_point, F64)
    info = np.iinfo(y.dtype)
    np.clip(acc, info.min, info.max, out=acc)
    np.copyto(y, acc, casting="unsafe")


class _ConvF64:
    """``conv(x, w)`` in float64 over explicit zero padding: one tensordot per kernel tap and
    group. Its taps, the padded float64 input each run makes and the accumulator are charged
    to the plan at resize."""

    def __init__(self, exe, x_shape, w_shape, y_shape):
        out, strides, dil, pads = exe.geometry["window"].unpack()
        n = len(out)
        self.g = exe.attrs["group"]
        self.pad = [(0, 0), (0, 0)] + [(pads[i], pads[n + i]) for i in range(n)]
        padded = (*x_shape[:2], *(d + b + e for d, (b, e) in zip(x_shape[2:], self.pad[2:])))
        limits.charge(math.prod(padded) * F64.itemsize, f"{exe.op.type}: the padded float64 input {padded}")
        charge_taps(math.prod(w_shape[2:]), f"CPU {exe.op.type}")
        self.taps = []
        for tap in itertools.product(*(range(k) for k in w_shape[2:])):
            sl = tuple(slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in zip(tap, dil, strides, out))
            self.taps.append((tap, sl))
        self.acc = scratch(y_shape, F64)

    def __call__(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        xp = np.pad(x, self.pad)
        acc = self.acc
        acc.fill(0)
        g = self.g
        cg, mg = x.shape[1] // g, w.shape[0] // g
        for tap, sl in self.taps:
            xs = xp[(slice(None), slice(None), *sl)]
            for k in range(g):
                wk = w[(slice(k * mg, (k + 1) * mg), slice(None), *tap)]  # (Mg, Cg)
                part = np.tensordot(xs[:, k * cg : (k + 1) * cg], wk, axes=([1], [1]))  # (N, *out, Mg)
                acc[:, k * mg : (k + 1) * mg] += np.moveaxis(part, -1, 1)
        return acc


@cpu_execution("MatMulInteger")
class MatMulInteger(Execution):
    """``Y = int32((A - a_zp) @ (B - b_zp))``."""

    def on_execute(self, inputs, outputs):
        a, b = inputs[0], inputs[1]
        azp = inputs[2] if len(inputs) > 2 else None
        bzp = inputs[3] if len(inputs) > 3 else None
        af = a.astype(F64) - _row_param(azp, a.shape)
        bf = b.astype(F64) - (0 if bzp is None else bzp)
        np.copyto(outputs[0], np.matmul(af, bf), casting="unsafe")


@cpu_execution("QLinearMatMul")
class QLinearMatMul(Execution):
    """``y = saturate(rint((a - a_zp) @ (b - b_zp) * (a_scale * b_scale / y_scale)) + y_zp)``."""

    def on_execute(self, inputs, outputs):
        a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = inputs
        af = a.astype(F64) - _row_param(a_zp, a.shape)
        bf = b.astype(F64) - b_zp
        acc = np.matmul(af, bf)
        mult = (_row_param(a_s, a.shape) * b_s / y_s).astype(F64)
        _requantise(outputs[0], acc, mult, y_zp)


@cpu_execution("ConvInteger")
class ConvInteger(Execution):
    """``Y = int32(conv(x - x_zp, w - w_zp))``."""

    def on_resize(self, inputs, outputs):
        self.conv = _ConvF64(self, self.input_infos[0].shape, self.input_infos[1].shape, outputs[0].shape)

    def on_execute(self, inputs, outputs):
        x, w = inputs[0], inputs[1]
        xzp = inputs[2] if len(inputs) > 2 and inputs[2] is not None else 0
        wzp = _channel_param(inputs[3] if len(inputs) > 3 else None, w.ndim)
        acc = self.conv(x.astype(F64) - xzp, w.astype(F64) - wzp)
        np.copyto(outputs[0], acc, casting="unsafe")


@cpu_execution("QLinearConv")
class QLinearConv(Execution):
    """``y = saturate(rint((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp)``."""

    def on_resize(self, inputs, outputs):
        self.conv = _ConvF64(self, self.input_infos[0].shape, self.input_infos[3].shape, outputs[0].shape)

    def on_execute(self, inputs, outputs):
        x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = inputs[:8]
        bias = inputs[8] if len(inputs) > 8 else None
        rank = x.ndim
        acc = self.conv(x.astype(F64) - x_zp, w.astype(F64) - _channel_param(w_zp, w.ndim))
        if bias is not None:
            acc += bias.astype(F64).reshape((-1,) + (1,) * (rank - 2))
        ws = np.asarray(w_s)
        if ws.ndim == 1 and ws.size > 1:
            ws = ws.reshape((-1,) + (1,) * (rank - 2))
        mult = (x_s * ws / y_s).astype(F64)
        _requantise(outputs[0], acc, mult, y_zp)

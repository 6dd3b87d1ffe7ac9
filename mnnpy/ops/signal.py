"""Signal-processing ops (ONNX operators.md, opset 17+): HannWindow, HammingWindow,
BlackmanWindow, DFT (canonical: the opset-20 form with ``axis`` as an input), STFT,
MelWeightMatrix.

Complex tensors are real tensors with a trailing dimension of 2 (real, imaginary); a
real signal has a trailing dimension of 1. Windows and MelWeightMatrix depend only on
their (scalar) inputs, which are value inputs: their shape functions publish outputs of up
to ``SMALL`` elements (computed at resize, folded by the converter); larger ones are
computed by the kernel, after the SizeComputer checked their size against the memory limit.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy import dtypes
from mnnpy.errors import ModelFormatError
from mnnpy.ops.flops import numel, per_element
from mnnpy.ops.movement import SMALL
from mnnpy.ops.registry import Attr, In, op_schema


def _scalar(ctx, i: int, what: str):
    v = np.asarray(ctx.value(i))
    if v.size != 1:
        ctx.fail(f"{what} must hold one element, got shape {v.shape}")
    return v.reshape(())


def _out_dtype(ctx) -> np.dtype:
    try:
        dt = dtypes.from_onnx(ctx.attrs["output_datatype"], "output_datatype")
    except ModelFormatError as e:
        ctx.fail(str(e))
    if dt.kind not in "fiu":
        ctx.fail(f"output_datatype must be numeric, got {dt}")
    return dt


def window(op_type: str, size: int, periodic: int, dtype: np.dtype) -> np.ndarray:
    """A Hann/Hamming/Blackman window of ``size`` points (``periodic``: denominator ``size``
    instead of ``size - 1``), computed as the ONNX reference does."""
    n1 = size if periodic else size - 1
    with np.errstate(all="ignore"):  # size 1, symmetric: 0/0 (NaN, as the reference gives)
        if op_type == "BlackmanWindow":
            ni = np.arange(size)
            res = np.cos((ni * (np.pi * 2)) / n1) * -0.5
            res += np.cos((ni * (np.pi * 4)) / n1) * 0.08
            res += 0.42
        else:
            ni = np.arange(size, dtype=dtype if dtype.kind == "f" else np.float64)
            if op_type == "HannWindow":
                res = np.sin(ni * np.pi / n1) ** 2
            else:
                alpha = 25.0 / 46.0
                res = alpha - np.cos(ni * np.pi * 2 / n1) * (1 - alpha)
    return res.astype(dtype)


def _window(ctx):
    """Hann/Hamming/BlackmanWindow: ``size`` points of the window, dtype ``output_datatype``."""
    size = int(_scalar(ctx, 0, "size"))
    if size < 0:
        ctx.fail(f"size {size} must be non-negative")
    dt = _out_dtype(ctx)
    if size <= SMALL:  # larger windows are computed by the kernel, once their size is checked
        ctx.set_value(0, window(ctx.op.type, size, ctx.attrs["periodic"], dt))
    return [((size,), dt)]


for _name in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    op_schema(
        _name,
        [In("size", value=True)],
        ["output"],
        attrs={"output_datatype": Attr("int", 1), "periodic": Attr("int", 1, (0, 1))},
        flops=per_element(4),
    )(_window)


def dft_params(ctx) -> tuple[int, int]:
    """``(axis, dft_length)`` of a DFT node, normalised."""
    x = ctx.shapes[0]
    r = len(x)
    if r < 2 or x[-1] not in (1, 2):
        ctx.fail("input must be (..., signal, 1 or 2)")
    axis = int(_scalar(ctx, 2, "axis")) if ctx.has(2) else -2
    if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        ctx.fail(f"axis {axis} out of range for rank {r} (the last dim holds real/imaginary parts)")
    axis %= r
    inverse, onesided = ctx.attrs["inverse"], ctx.attrs["onesided"]
    if ctx.has(1):
        n = int(_scalar(ctx, 1, "dft_length"))
    elif inverse and onesided:
        n = 2 * (x[axis] - 1)
    else:
        n = x[axis]
    if n < 1:
        ctx.fail(f"dft_length {n} must be positive")
    return axis, n


def fft_flops(n: int, transforms: int) -> float:
    """``5 n log2 n`` per complex transform of length ``n`` (radix-2 FFT count)."""
    return 5.0 * n * math.log2(max(n, 2)) * transforms


def dft_flops(ctx, outs) -> float:
    """``5 n log2 n`` per transform of length ``n = dft_length`` (an FFT's count)"""
    axis, n = dft_params(ctx)
    return fft_flops(n, numel(outs[0]) // max(outs[0][axis] * outs[0][-1], 1))


@op_schema(
    "DFT",
    ["input", In("dft_length", optional=True, value=True), In("axis", optional=True, value=True)],
    ["output"],
    attrs={"inverse": Attr("int", 0, (0, 1)), "onesided": Attr("int", 0, (0, 1))},
    same_rank=(0,),
    flops=dft_flops,
)
def dft(ctx):
    """DFT: the discrete Fourier transform along ``axis`` (zero-padded or truncated to
    ``dft_length``); ``onesided`` forward keeps ``n//2+1`` bins; ``onesided`` inverse is a
    real inverse (irfft, trailing dim 1); inverses are scaled by ``1/n``."""
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"input must be a float tensor, got {ctx.dtypes[0]}")
    axis, n = dft_params(ctx)
    ctx.derive(dft=(axis, n))
    out = list(ctx.shapes[0])
    inverse, onesided = ctx.attrs["inverse"], ctx.attrs["onesided"]
    out[axis] = n // 2 + 1 if onesided and not inverse else n
    out[-1] = 1 if inverse and onesided else 2
    return [(tuple(out), ctx.dtypes[0])]


def stft_params(ctx) -> tuple[int, int, int]:
    """``(frame_step, frame_length, frames)`` of an STFT node."""
    x = ctx.shapes[0]
    if len(x) != 3 or x[-1] not in (1, 2):
        ctx.fail("signal must be (batch, length, 1 or 2)")
    step = int(_scalar(ctx, 1, "frame_step"))
    if ctx.has(3):
        fl = int(_scalar(ctx, 3, "frame_length"))
    elif ctx.has(2):
        fl = ctx.shapes[2][0]
    else:
        fl = x[1]
    if ctx.has(2) and tuple(ctx.shapes[2]) != (fl,):
        ctx.fail(f"window must have shape ({fl},)")
    if step < 1 or fl < 1 or fl > x[1]:
        ctx.fail(f"frame_step {step} must be positive and frame_length {fl} in [1, {x[1]}]")
    return step, fl, 1 + (x[1] - fl) // step


def stft_flops(ctx, outs) -> float:
    """per frame: the window product (``frame_length``) and ``5 n log2 n`` with ``n = frame_length``"""
    _, fl, frames = stft_params(ctx)
    transforms = ctx.shapes[0][0] * frames
    return fft_flops(fl, transforms) + fl * transforms


@op_schema(
    "STFT",
    ["signal", In("frame_step", value=True), In("window", optional=True), In("frame_length", optional=True, value=True)],
    ["output"],
    attrs={"onesided": Attr("int", 1, (0, 1))},
    same_rank=(0,),
    flops=stft_flops,
)
def stft(ctx):
    """STFT: the DFT of each windowed frame, ``(batch, frames, bins, 2)``; ``onesided``:
    ``frame_length//2+1`` bins."""
    if ctx.dtypes[0].kind != "f":
        ctx.fail(f"signal must be a float tensor, got {ctx.dtypes[0]}")
    step, fl, frames = stft_params(ctx)
    ctx.derive(stft=(step, fl, frames))
    bins = fl // 2 + 1 if ctx.attrs["onesided"] else fl
    return [((ctx.shapes[0][0], frames, bins, 2), ctx.dtypes[0])]


def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, dtype) -> np.ndarray:
    """The ``(dft_length//2+1, num_mel_bins)`` triangular mel filter bank (ONNX reference arithmetic)."""
    spec_bins = int(dft_length) // 2 + 1
    num_mel_bins = int(num_mel_bins)
    frequency_bins = np.arange(0, num_mel_bins + 2)
    low_mel = 2595 * np.log1p(lower_edge_hertz / 700) / np.log(10)
    high_mel = 2595 * np.log1p(upper_edge_hertz / 700) / np.log(10)
    mel_step = (high_mel - low_mel) / frequency_bins.shape[0]
    frequency_bins = frequency_bins * mel_step + low_mel
    frequency_bins = 700 * np.expm1(frequency_bins / 2595 * np.log(10))
    frequency_bins = ((dft_length + 1) * frequency_bins) // sample_rate
    fb = frequency_bins.astype(int)
    lo, c, hi = fb[:-2][None, :], fb[1:-1][None, :], fb[2:][None, :]
    j = np.arange(spec_bins)[:, None]
    with np.errstate(all="ignore"):
        up = np.where(c > lo, (j - lo) / np.maximum(c - lo, 1), 1.0)
        down = (hi - j) / np.maximum(hi - c, 1)
    out = np.where((j >= c) & (j < hi), down, np.where((j >= lo) & (j <= c) & ((c > lo) | (j == c)), up, 0.0))
    return out.astype(dtype)


@op_schema(
    "MelWeightMatrix",
    [
        In("num_mel_bins", value=True),
        In("dft_length", value=True),
        In("sample_rate", value=True),
        In("lower_edge_hertz", value=True),
        In("upper_edge_hertz", value=True),
    ],
    ["output"],
    attrs={"output_datatype": Attr("int", 1)},
    flops=per_element(4),
)
def mel_weight_matrix_shape(ctx):
    """MelWeightMatrix: ``(dft_length//2+1, num_mel_bins)`` triangular filters between the edges."""
    vals = [_scalar(ctx, i, s.name) for i, s in enumerate(ctx.schema.inputs)]
    nmel, dft_len, rate = int(vals[0]), int(vals[1]), vals[2]
    if nmel < 1 or dft_len < 1 or rate <= 0:
        ctx.fail("num_mel_bins, dft_length and sample_rate must be positive")
    dt = _out_dtype(ctx)
    shape = (dft_len // 2 + 1, nmel)
    if math.prod(shape) <= SMALL:  # larger matrices are computed by the kernel, once their size is checked
        ctx.set_value(0, mel_weight_matrix(*vals, dt))
    return [(shape, dt)]

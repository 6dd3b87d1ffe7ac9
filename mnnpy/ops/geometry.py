"""Geometry that shape functions derive once and every backend reads (``OpInfo.geometry``).

Pure coordinate and window math, no kernels:
- ``Window``: a conv/pool window along the spatial dims after ``auto_pad`` (ONNX
  operators.md #Conv, #MaxPool, #ConvTranspose), with the tap ranges a direct kernel reads;
- ``ResizeGeometry``: Resize's per-axis scales, output sizes, roi and source coordinates
  (operators.md #Resize), with the nearest-index and interpolation-tap rules that map
  coordinates to input indices, in the order onnxruntime evaluates them (float32).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Window:
    """A window over ``n`` spatial dims: ``in_sizes``/``out_sizes`` (e.g. ``(H, W)`` and
    ``(H_out, W_out)``), ``kernel``, ``strides``, ``dilations`` and explicit ``pads``
    ``(begin..., end...)`` after ``auto_pad``; every tuple has ``n`` entries (``pads`` 2n)."""

    in_sizes: tuple[int, ...]
    out_sizes: tuple[int, ...]
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]

    @property
    def begin(self) -> tuple[int, ...]:
        """Pads before each spatial dim."""
        return self.pads[: len(self.kernel)]

    @property
    def end(self) -> tuple[int, ...]:
        """Pads after each spatial dim."""
        return self.pads[len(self.kernel) :]

    @property
    def extents(self) -> tuple[int, ...]:
        """Dilated kernel extents ``(k - 1) * d + 1``."""
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))

    def unpack(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """``(out_sizes, strides, dilations, pads)``, the order direct kernels take them."""
        return self.out_sizes, self.strides, self.dilations, self.pads


def tap_slices(in_sizes, out_sizes, tap, strides, dilations, pads_begin):
    """``(out_slices, in_slices)`` that kernel tap ``tap`` (one index per spatial dim)
    connects, or ``None`` when it reads only padding."""
    outs, ins = [], []
    for i, t in enumerate(tap):
        lo, hi, start = tap_range(in_sizes[i], out_sizes[i], t * dilations[i] - pads_begin[i], strides[i])
        if hi <= lo:
            return None
        outs.append(slice(lo, hi))
        ins.append(slice(start, start + (hi - lo - 1) * strides[i] + 1, strides[i]))
    return tuple(outs), tuple(ins)


def tap_range(in_size: int, out_size: int, offset: int, stride: int) -> tuple[int, int, int]:
    """Outputs ``o`` in ``[lo, hi)`` read input ``o*stride + offset`` inside ``[0, in_size)``.

    Returns ``(lo, hi, lo*stride + offset)``; ``hi <= lo`` when the tap reads only padding.
    """
    lo = max(0, -(offset // stride))
    hi = min(out_size, (in_size - 1 - offset) // stride + 1)
    return lo, hi, lo * stride + offset


@dataclass(frozen=True)
class ResizeGeometry:
    """Resize on ``X: (d0, ..., d{r-1})``: per axis ``scales`` (float), output ``sizes``,
    ``roi`` ``(start, end)`` (tf_crop_and_resize; else ``(0, 1)``), and ``coords``: for each
    axis that moves, the source coordinate ``x_orig`` (float32, ``(sizes[axis],)``) of every
    output index by ``coordinate_transformation_mode``."""

    scales: tuple[float, ...]
    sizes: tuple[int, ...]
    roi: tuple[tuple[float, float], ...]
    coords: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def moved(self) -> list[int]:
        """The axes whose coordinates are not the identity."""
        return sorted(self.coords)


def source_coords(mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """``x_orig`` (float32) of each output index along one axis by
    ``coordinate_transformation_mode`` ``mode`` (operators.md #Resize), computed in the
    precision and order onnxruntime uses (ties of nearest modes depend on it)."""
    i = np.arange(out_len, dtype=np.float32)
    f, s = np.float32, np.float32(scale)
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and out_len > 1):
        return (i + f(0.5)) / s - f(0.5)
    if mode == "pytorch_half_pixel":
        return np.zeros(out_len, np.float32)
    if mode == "half_pixel_symmetric":
        adjustment = f(out_len) / (s * f(in_len))
        offset = f(in_len) / f(2) * (f(1) - adjustment)
        # rounded once, as onnxruntime's compiled expression evaluates it (matters for floor/ceil ties)
        return ((i + f(0.5)).astype(np.float64) / np.float64(s) + np.float64(offset - f(0.5))).astype(np.float32)
    if mode == "align_corners":
        return i * f(in_len - 1) / f(out_len - 1) if out_len > 1 else np.zeros(out_len, np.float32)
    if mode == "asymmetric":  # in float64: x = i * in/out must hit exact ties (8 * 7/16 = 3.5)
        return (np.arange(out_len, dtype=np.float64) / np.float64(scale)).astype(np.float32)
    start, end = f(roi[0]), f(roi[1])
    if out_len > 1:
        return start * f(in_len - 1) + i * (end - start) * f(in_len - 1) / f(out_len - 1)
    return np.full(out_len, f(0.5) * (start + end) * f(in_len - 1), np.float32)


def nearest_index(x: np.ndarray, mode: str, in_len: int) -> np.ndarray:
    """Input index (int64, clamped to ``[0, in_len)``) for coordinates ``x`` by ``nearest_mode``."""
    x = x.astype(np.float64)
    if mode == "floor":
        idx = np.floor(x)
    elif mode == "ceil":
        idx = np.ceil(x)
    else:  # round half away from zero, except exact halves under round_prefer_floor
        idx = np.where(x >= 0, np.floor(x + 0.5), np.ceil(x - 0.5))
        if mode == "round_prefer_floor":
            idx = np.where(x == np.floor(x) + 0.5, np.floor(x), idx)
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def cubic_coeffs(t: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic weights ``(4, n)`` of taps at offsets -1, 0, 1, 2 for fractions ``t``."""

    def k(d):
        d = np.abs(d)
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return np.where(d <= 1, near, np.where(d < 2, far, 0.0))

    return np.stack([k(t + 1), k(t), k(1 - t), k(2 - t)])


def interp_taps(x: np.ndarray, mode: str, in_len: int, a: float, exclude_outside: int):
    """``(indices (T, n) int64, weights (T, n) float64)`` of linear (T=2) or cubic (T=4,
    Keys coefficient ``a``) taps for coordinates ``x``; ``exclude_outside`` renormalises the
    taps that fall inside ``[0, in_len)``."""
    if mode == "linear":
        xc = np.clip(x.astype(np.float64), 0, in_len - 1)
        lo = np.floor(xc)
        t = xc - lo
        return np.stack([lo, np.minimum(lo + 1, in_len - 1)]).astype(np.int64), np.stack([1 - t, t])
    x64 = x.astype(np.float64)
    lo = np.floor(x64)
    idx = lo[None, :] + np.arange(-1, 3)[:, None]
    w = cubic_coeffs(x64 - lo, a)
    if exclude_outside:
        w = np.where((idx < 0) | (idx > in_len - 1), 0.0, w)
        w = w / w.sum(axis=0, keepdims=True)
    return np.clip(idx, 0, in_len - 1).astype(np.int64), w

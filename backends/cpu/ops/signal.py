"""CPU kernels of the signal ops: Hann/Hamming/BlackmanWindow, DFT, STFT, MelWeightMatrix
(numpy.fft; complex tensors as a trailing (real, imaginary) dimension).

Windows and MelWeightMatrix are computed from their scalar inputs (at resize when the
inputs are known there). DFT/STFT compute in the FFT's precision (complex128 for float64
input, complex64 otherwise) and round once into the output.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch
from mnnpy.ops.signal import mel_weight_matrix, window


def _complex(x: np.ndarray) -> np.ndarray:
    """``(..., 1 or 2)`` real tensor -> complex tensor ``(...)``."""
    if x.shape[-1] == 1:
        return x[..., 0]
    return x[..., 0] + 1j * x[..., 1].astype(np.result_type(x.dtype, np.float32))


def _store(y: np.ndarray, c: np.ndarray) -> None:
    """Write complex ``c`` into ``y`` (``(..., 2)``: real, imaginary; ``(..., 1)``: real)."""
    np.copyto(y[..., 0], c.real, casting="unsafe")
    if y.shape[-1] == 2:
        np.copyto(y[..., 1], c.imag if np.iscomplexobj(c) else 0, casting="unsafe")


@cpu_execution("HannWindow", "HammingWindow", "BlackmanWindow")
class Window(Execution):
    """``Y = window(size)`` (ONNX reference formulas)."""

    def on_resize(self, inputs, outputs):
        self.y = scratch(outputs[0].shape, outputs[0].dtype)  # charged to the plan
        np.copyto(self.y, window(self.op.type, outputs[0].shape[0], self.attrs["periodic"], outputs[0].dtype))

    def on_execute(self, inputs, outputs):
        np.copyto(outputs[0], self.y)


@cpu_execution("MelWeightMatrix")
class MelWeightMatrix(Execution):
    """``Y = mel_weight_matrix(...)`` from the five scalar inputs."""

    def on_execute(self, inputs, outputs):
        vals = [np.asarray(v).reshape(()) for v in inputs]
        np.copyto(outputs[0], mel_weight_matrix(*vals, outputs[0].dtype))


@cpu_execution("DFT")
class DFT(Execution):
    """``Y = fft/ifft/rfft/irfft(X, n, axis)`` (numpy.fft)."""

    def on_resize(self, inputs, outputs):
        self.axis, self.n = self.geometry["dft"]

    def on_execute(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        inverse, onesided = self.attrs["inverse"], self.attrs["onesided"]
        c = _complex(x)
        if inverse and onesided:
            r = np.fft.irfft(c, n=self.n, axis=self.axis)
        elif inverse:
            r = np.fft.ifft(c, n=self.n, axis=self.axis)
        else:
            r = np.fft.fft(c, n=self.n, axis=self.axis)
            if onesided:
                r = np.take(r, np.arange(self.n // 2 + 1), axis=self.axis)
        _store(y, r)


@cpu_execution("STFT")
class STFT(Execution):
    """Frames as a strided view of the signal, times the window, FFT along the frame."""

    def on_resize(self, inputs, outputs):
        self.step, self.fl, self.frames = self.geometry["stft"]

    def on_execute(self, inputs, outputs):
        x = _complex(inputs[0])  # (batch, length)
        frames = np.lib.stride_tricks.sliding_window_view(x, self.fl, axis=1)[:, :: self.step][:, : self.frames]
        if len(inputs) > 2 and inputs[2] is not None:
            frames = frames * inputs[2]
        r = np.fft.fft(frames, n=self.fl, axis=-1)
        _store(outputs[0], r[..., : outputs[0].shape[2]])

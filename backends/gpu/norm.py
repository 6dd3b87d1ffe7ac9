"""Normalisation op family shared by the GPU backends: LayerNormalization and BatchNormalization.

ONNX operators.md #LayerNormalization (output ``Y`` only) and #BatchNormalization
(inference): checks, constant folding and the Executions' common part. Used by
``backends/opencl/norm.py`` and ``backends/vulkan/norm.py``.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backends.gpu.execution import GPUExecution, checked_by


def layernorm_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)``: only ``Y`` requested; a Scale/B computed at run time must already
    have ``prod(X.shape[axis:])`` elements (constants are expanded at resize)."""
    if any(t is not None for t in info.outputs[1:]):
        return False, f"LayerNormalization Mean/InvStdDev outputs requested ({backend} computes Y only)"
    x = info.inputs[0].shape
    cols = math.prod(x[info.attrs["axis"] % len(x) :])
    for name, t in zip(("Scale", "B"), info.inputs[1:]):
        if t is not None and t.value is None and int(np.prod(t.shape, dtype=np.int64)) != cols:
            return False, f"LayerNormalization {name} {list(t.shape)} broadcast at run time ({backend} takes it full size)"
    return True, ""


def batchnorm_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)``: inference mode, scale/B/mean/var constants."""
    inputs = info.inputs
    if info.attrs["training_mode"]:
        return False, f"BatchNormalization training_mode=1 ({backend} runs inference only)"
    if len(inputs) < 5 or any(t is None or t.value is None for t in inputs[1:5]):
        return False, f"BatchNormalization scale/B/mean/var computed at run time ({backend} folds constants)"
    return True, ""


def batchnorm_fold(infos, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """``(s, t)`` float64 ``(C,)``: ``s = scale / sqrt(var + epsilon)``, ``t = B - mean * s``
    from the constant values of ``infos`` = (scale, B, input_mean, input_var)."""
    scale, b, mean, var = (np.asarray(i.value, np.float64).reshape(-1) for i in infos)
    s = scale / np.sqrt(var + epsilon)
    return s, b - mean * s


class LayerNormBase(GPUExecution):
    """``Y = (X - mean) / sqrt(var + epsilon) * Scale + B`` with statistics over dims ``axis..``
    of ``X`` (float32, any rank); ``Scale``/``B`` broadcast to ``X.shape[axis:]`` (constants
    are expanded at resize, fp32 in every precision; one computed at run time must already
    have that many elements). The ``Mean``/``InvStdDev`` outputs are not produced here (CPU
    fallback). The backend's class implements ``layernorm(x, scale, bias, y, rows, cols,
    has_bias)`` (``bias`` is ``scale`` when there is no B)."""

    check = checked_by(layernorm_check)

    def _param(self, k: int, handle, shape):
        """Scale (k=1) or B (k=2) on the device: a constant expanded to ``shape`` at resize."""
        info = self.input_infos[k]
        if info.value is None:
            return handle
        t = self.backend.weights(np.broadcast_to(np.asarray(info.value, np.float32), shape))
        self.params.append(t)  # kept alive: the kernel reads it
        return t

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        axis = self.attrs["axis"] % len(x.shape)
        rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
        if rows * cols == 0:
            return
        self.params: list = []
        scale = self._param(1, inputs[1], x.shape[axis:])
        has_bias = len(inputs) > 2 and inputs[2] is not None
        bias = self._param(2, inputs[2], x.shape[axis:]) if has_bias else scale
        self.layernorm(x, scale, bias, y, rows, cols, has_bias)


class BatchNormBase(GPUExecution):
    """``Y = X * s[c] + t[c]`` per channel (axis 1) of ``X: (N, C, D1, ...)`` float32, with
    ``s = scale / sqrt(var + epsilon)``, ``t = B - mean * s`` folded at resize (float64) from
    constant ``scale, B, input_mean, input_var: (C,)``; inference only. The backend's class
    implements ``affine(x, y, s, t, channels, inner)`` (``s``, ``t``: float32 ``(C,)``)."""

    check = checked_by(batchnorm_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        s, t = batchnorm_fold(self.input_infos[1:5], self.attrs["epsilon"])
        channels = x.shape[1] if len(x.shape) > 1 else 1
        s, t = (np.broadcast_to(v, (channels,)).astype(np.float32) for v in (s, t))
        self.affine(x, y, s, t, channels, math.prod(x.shape[2:]))

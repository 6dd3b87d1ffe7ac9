"""LayerNormalization / BatchNormalization checks and folding shared by the GPU backends.

ONNX operators.md #LayerNormalization (output ``Y`` only) and #BatchNormalization
(inference). Used by ``backends/opencl/norm.py``, ``batchnorm.py`` and
``backends/vulkan/norm.py``.
"""

from __future__ import annotations

import math

import numpy as np


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

"""Fused activations for OpenCL kernels: the ``-D ACT_*`` build option and its two scalars.

The macros live in ``shaders/opencl/common.h`` (prepended to every source); a kernel that
fuses an activation takes two float arguments ``a0, a1`` and applies ``ACT(x)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# ONNX op name (Conv's ``activation`` attribute, or a standalone op) -> macro suffix
ACTIVATIONS = {
    "": "NONE",
    "Relu": "RELU",
    "Clip": "CLIP",
    "LeakyRelu": "LEAKYRELU",
    "Sigmoid": "SIGMOID",
    "HardSigmoid": "HARDSIGMOID",
    "HardSwish": "HARDSWISH",
    "Tanh": "TANH",
    "Swish": "SWISH",
}


def activation(kind: str | None, params: Sequence[float] = ()) -> tuple[str, np.float32, np.float32]:
    """``(build option, a0, a1)`` for ``kind`` with its parameters (Clip: min, max;
    LeakyRelu: alpha; HardSigmoid: alpha, beta). Raises ``KeyError`` for an unknown kind."""
    params = [float(p) for p in params] + [0.0, 0.0]
    return f"-D ACT_{ACTIVATIONS[kind or '']}", np.float32(params[0]), np.float32(params[1])

"""Pooling op family shared by the GPU backends (ONNX operators.md): MaxPool (output ``Y``),
AveragePool, GlobalAveragePool, GlobalMaxPool.

Global pools are row reductions (``reduce(kind, ...)`` of the backend's class, as
``backends/gpu/reduce.py``): ``Y[n, c] = mean/max(X[n, c, ...])``. Windowed pools' checks
here; their windows in each backend.
"""

from __future__ import annotations

import math

from mnnpy.backends.gpu.execution import GPUExecution, checked_by
from mnnpy.backends.gpu.reduce_axes import global_pool_check

WINDOWED = ("MaxPool", "AveragePool")
GLOBAL = ("GlobalAveragePool", "GlobalMaxPool")


class GlobalPoolBase(GPUExecution):
    """``Y[n, c, 1, ...] = mean (or max) of X[n, c, ...]``, ``X: (N, C, *S)`` float32: a
    work-group reduction per (n, c) row."""

    check = checked_by(lambda info, backend: global_pool_check(info))

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        kind = "mean" if self.op.type == "GlobalAveragePool" else "max"
        self.reduce(kind, x, y, x.shape[0] * x.shape[1], math.prod(x.shape[2:]), 1)

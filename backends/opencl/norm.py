"""OpenCL LayerNormalization (output ``Y``) and BatchNormalization (inference), ONNX operators.md.

LayerNormalization: kernel ``layernorm`` of ``shaders/opencl/reduce.cl`` (``-D LAYERNORM``),
one row of ``X.shape[axis:]`` per group slice, mean then variance by local-memory reductions.
BatchNormalization: the folded per-channel scale and shift run by the ``affine`` kernel of
``shaders/opencl/elementwise.cl`` (one pass over X). Shared part: ``backends/gpu/norm.py``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.gpu.norm import BatchNormBase, LayerNormBase
from mnnpy.backends.opencl.activation import activation
from mnnpy.backends.opencl.execution import OpenCLExecution
from mnnpy.backends.opencl.reduce import rows_launch
from mnnpy.backends.opencl.registry import opencl_execution


@opencl_execution("LayerNormalization")
class LayerNormalization(LayerNormBase, OpenCLExecution):
    """LayerNormalization's ``Y`` (``LayerNormBase``) by one ``rows_launch``."""

    def layernorm(self, x, scale, bias, y, rows: int, cols: int, has_bias: bool) -> None:
        """Kernel ``layernorm`` over ``rows`` rows of ``cols`` elements (Scale/B fp32 where constant)."""
        args = (x.buffer, np.int32(x.elem_offset), scale.buffer, np.int32(scale.elem_offset))
        args += (bias.buffer, np.int32(bias.elem_offset), y.buffer, np.int32(y.elem_offset))
        args += (np.int32(rows), np.int32(cols), np.float32(self.attrs["epsilon"]))
        options = ["-D LAYERNORM"] + (["-D HAS_BIAS"] if has_bias else [])
        if self.backend.half:
            options += [f"-D {slot}_F32" for slot, t in (("B", scale), ("C", bias)) if t.dtype == np.float32]
        self.add(rows_launch(self.backend, "layernorm", options, args, rows, cols, 1, cache=True))


@opencl_execution("BatchNormalization")
class BatchNormalization(BatchNormBase, OpenCLExecution):
    """``Y = X * s[c] + t[c]`` (``BatchNormBase``) by the ``affine`` kernel, 4 elements per item."""

    def affine(self, x, y, s, t, channels: int, inner: int) -> None:
        """Kernel ``affine``: ``Y = X * s[c] + t[c]``, ``s``/``t`` as fp32 buffers, work (inner/4, N*C)."""
        self.scale, self.shift = self.backend.weights(s), self.backend.weights(t)
        option, a0, a1 = activation("")
        args = (x.buffer, np.int32(x.elem_offset), self.scale.buffer, self.shift.buffer, y.buffer, np.int32(y.elem_offset))
        args += (np.int32(y.size), np.int32(inner), np.int32(channels), a0, a1)
        rows = y.size // inner if inner else 0
        self.enqueue("elementwise.cl", "affine", [option], args, (-(-inner // 4), rows))

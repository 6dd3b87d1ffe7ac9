"""Reduction geometry and Reduce/pool support checks shared by the GPU backends.

Every reduction is viewed as ``(outer, red, inner)`` of contiguous NCHW data (ONNX
operators.md #ReduceSum.. opset-18 form, ``axes`` an input; #MaxPool, #AveragePool). Used by
``backends/opencl/reduce.py``, ``pool.py`` and ``backends/vulkan/reduce.py``, ``pool.py``.
"""

from __future__ import annotations

import math


def collapse_axes(shape, axes) -> tuple[int, int, int] | None:
    """``(outer, red, inner)`` of reducing ``axes`` of contiguous ``shape``, or None when the
    reduced axes (size-1 dims ignored) are not one contiguous block."""
    runs: list[list] = []  # [size, reduced?] of merged neighbouring dims
    for i, d in enumerate(shape):
        if d == 1:
            continue
        r = i in axes
        if runs and runs[-1][1] == r:
            runs[-1][0] *= d
        else:
            runs.append([d, r])
    flags = [r for _, r in runs]
    if flags.count(True) > 1:
        return None
    if True not in flags:
        return math.prod(shape), 1, 1  # nothing of size > 1 is reduced
    k = flags.index(True)
    return math.prod(s for s, _ in runs[:k]), runs[k][0], math.prod(s for s, _ in runs[k + 1 :])


def reduce_check(info, backend: str) -> tuple[bool, str]:
    """``(ok, reason)`` of a ReduceXxx on backend ``backend`` ("OpenCL", "Vulkan"): the reduced
    axes (the shape function's ``axes``) form one contiguous block of the data's shape."""
    op, shape, axes = info.op, info.inputs[0].shape, info.geometry["axes"]
    if collapse_axes(shape, axes) is None:
        return False, f"{op.type} axes {list(axes)} of shape {list(shape)} are not one contiguous block"
    return True, ""


def pool_check(info, backend: str, max_spatial: int) -> tuple[bool, str]:
    """``(ok, reason)`` of MaxPool/AveragePool on ``backend``: 1 to ``max_spatial`` window
    dims; MaxPool's Indices output not requested."""
    op, nd = info.op, len(info.attrs["kernel_shape"])
    if not 1 <= nd <= max_spatial:
        dims = "1-D and 2-D" if max_spatial == 2 else f"1-D to {max_spatial}-D"
        return False, f"{op.type} with {nd} spatial dims ({backend} pools {dims})"
    if op.type == "MaxPool" and any(t is not None for t in info.outputs[1:]):
        return False, f"MaxPool Indices output requested ({backend} computes Y only)"
    return True, ""


def global_pool_check(info) -> tuple[bool, str]:
    """``(ok, reason)`` of GlobalAveragePool/GlobalMaxPool: spatial dims of ``X: (N, C, *S)``
    not empty."""
    spatial = info.inputs[0].shape[2:]
    if math.prod(spatial) == 0:
        return False, f"{info.type} over empty spatial dims {list(spatial)}"
    return True, ""

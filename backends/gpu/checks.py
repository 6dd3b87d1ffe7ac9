"""Op support checks and op scalars shared by the GPU backends (``opencl``, ``vulkan``).

Each check returns ``(ok, reason)`` like an Execution's ``check``; ``backend`` is the
backend's display name ("OpenCL", "Vulkan") used in the reasons. Rules: ONNX operators.md
(#Clip, #HardSigmoid, #LeakyRelu, #Add.., #Slice, #Gather).
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from mnnpy.backends.gpu.dtypes import F32, names
from mnnpy.backends.gpu.layout import broadcast_strides, slice_ranges
from mnnpy.ops.activation import ACTIVATIONS, GPU, gpu_scalars

INT32_MAX = 2**31 - 1  # kernel arguments and push constants are 32-bit signed integers


def _too_wide(value) -> int | None:
    """The first integer in ``value`` (nested tuples, lists, dicts, dataclasses such as
    ``Window``) outside the signed 32-bit range, else None. Arrays, floats and slices
    (clamped by the kernels' own geometry) are not looked into."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            stack.extend(getattr(v, f.name) for f in dataclasses.fields(v))
        elif isinstance(v, numbers.Integral) and not isinstance(v, bool) and not -INT32_MAX - 1 <= int(v) <= INT32_MAX:
            return int(v)
    return None


def int32_check(info, backend: str) -> tuple[bool, str]:
    """Every dim of the op's tensors and every integer of its derived geometry (pads,
    strides, dilations, kernel and output sizes...) fits a 32-bit kernel argument (OpenCL
    ``int``, a Vulkan push constant); otherwise the op falls back to the CPU."""
    tensors = [t for t in (*info.inputs, *info.outputs) if t is not None]
    big = _too_wide([t.shape for t in tensors])
    if big is not None:
        return False, f"dim {big} does not fit a 32-bit index ({backend} kernels take 32-bit sizes)"
    big = _too_wide(info.geometry)
    if big is not None:
        return False, f"{info.type} geometry value {big} does not fit a 32-bit kernel argument ({backend})"
    return True, ""


def unary_check(info, backend: str) -> tuple[bool, str]:
    """An op whose scalars are its inputs (Clip's bounds, ``Activation.bounds``) needs them
    known at resize (constants), one element each."""
    if ACTIVATIONS[info.type].bounds:
        for t in info.inputs[1:]:
            if t is None:
                continue
            if t.value is None:
                return False, f"{info.type} min/max computed at run time ({backend} takes constant bounds)"
            if t.value.size != 1:
                return False, f"{info.type} min/max must be one element"
    return True, ""


def unary_params(op_type: str, attrs, input_infos) -> tuple[float, float]:
    """``(a0, a1)``: the op's scalars (``Activation.scalars``: HardSigmoid ``(alpha, beta)``,
    LeakyRelu ``(alpha, 0)``, Clip ``(min, max)`` from its constant inputs, absent = -FLT_MAX /
    +FLT_MAX), zeros where it has fewer."""
    return gpu_scalars(op_type, attrs, [None if t is None else t.value for t in input_infos])


def binary_check(info, backend: str, max_rank: int) -> tuple[bool, str]:
    """Two inputs whose broadcast index space merges to at most ``max_rank`` dims."""
    op, inputs = info.op, info.inputs
    if len(inputs) != 2:
        return False, f"{op.type} with {len(inputs)} inputs ({backend} takes two)"
    out = np.broadcast_shapes(inputs[0].shape, inputs[1].shape)
    dims = broadcast_strides(out, inputs[0].shape, inputs[1].shape)[0]
    if len(dims) > max_rank:
        return False, f"broadcast of rank {len(dims)} after merging dims ({backend} takes up to {max_rank})"
    return True, ""


def slice_check(info, backend: str) -> tuple[bool, str]:
    """Slice's starts/ends/axes/steps must be known at resize, and the clamped ranges
    (``slice_ranges``) fit 32-bit kernel arguments."""
    if any(t.value is None for t in info.present()[1:]):
        return False, f"Slice starts/ends/axes/steps computed at run time ({backend} takes values known at resize)"
    values = [t.value if t is not None else None for t in (*info.inputs[1:], None, None)][:4]
    big = _too_wide(slice_ranges(values, info.inputs[0].shape))
    if big is not None:
        return False, f"Slice start or step {big} does not fit a 32-bit kernel argument ({backend})"
    return True, ""


def gather_check(info, backend: str) -> tuple[bool, str]:
    """Gather's indices must be known at resize and in range along ``axis``."""
    inputs, attrs = info.inputs, info.attrs
    idx = inputs[1].value
    if idx is None:
        return False, f"Gather indices computed at run time ({backend} takes indices known at resize)"
    n = inputs[0].shape[attrs["axis"] % len(inputs[0].shape)]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        return False, f"Gather index out of range [-{n}, {n})"
    return True, ""


def conv_operands_check(info, backend: str) -> tuple[bool, str]:
    """Conv (operators.md #Conv): 2-D NCHW ``X`` (rank 4), constant weights, constant bias
    when present."""
    inputs = info.inputs
    x, w = inputs[0], inputs[1]
    if len(x.shape) != 4:
        return False, f"Conv with {len(x.shape) - 2} spatial dims ({backend} runs 2-D)"
    if w.value is None:
        return False, f"Conv weights computed at run time ({backend} takes constant weights)"
    if len(inputs) > 2 and inputs[2] is not None and inputs[2].value is None:
        return False, f"Conv bias computed at run time ({backend} takes a constant bias)"
    return True, ""


def data_check(info, backend: str, dtypes: tuple = (F32,)) -> tuple[bool, str]:
    """The data input ``X`` of one of ``dtypes`` (default float32), also where its value is
    known at resize (the backend's dtype check lets such inputs through)."""
    x = info.inputs[0]
    if x.dtype not in dtypes:
        return False, f"{info.type} of {x.dtype} data ({backend} runs {names(dtypes)} only)"
    return True, ""


def float_check(info, backend: str) -> tuple[bool, str]:
    """Every present input float32, constants too (weights the kernels read as float)."""
    bad = sorted({str(t.dtype) for t in info.present() if t.dtype != np.float32})
    if bad:
        return False, f"{info.type} with dtype {', '.join(bad)} ({backend} runs float32 only)"
    return True, ""


def activation_check(info, backend: str, activations: tuple[str, ...] = ("", *GPU)) -> tuple[bool, str]:
    """The converter's fused ``activation`` attribute (absent: "") is one of ``activations``
    (default: none, or one of the activation table's ops with a GPU expression)."""
    act = info.attrs.get("activation", "")
    if act not in activations:
        return False, f"fused activation {act!r} is not on {backend}"
    return True, ""


def conv_transpose_check(info, backend: str) -> tuple[bool, str]:
    """ConvTranspose (operators.md #ConvTranspose): 2-D NCHW ``X`` (rank 4), constant weights
    and bias."""
    x = info.inputs[0]
    if len(x.shape) != 4:
        return False, f"ConvTranspose on rank {len(x.shape)} ({backend} runs 2-D, NCHW)"
    if any(t.value is None for t in info.present()[1:]):
        return False, f"ConvTranspose weights/bias computed at run time ({backend} takes constants)"
    return True, ""

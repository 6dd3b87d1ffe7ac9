"""2-D Conv geometry shared by the GPU backends (ONNX operators.md #Conv, NCHW).

``X: (N, C, H, W)``, constant ``W: (M, C/G, KH, KW)``; strides, dilations and pads (after
``auto_pad``) from the shape function's ``window`` (``OpInfo.geometry``). Used by
``backends/opencl/conv.py`` and ``backends/vulkan/conv.py``.
"""

from __future__ import annotations

import numpy as np


def conv_geometry(exe, x_shape, vw: int):
    """``(wv, strides, dil, pads, row)`` of Execution ``exe``'s Conv on ``x_shape``: ``wv`` the
    weights as float32 ``(M, C/G, KH, KW)``; ``row`` the input columns one kernel row of
    ``vw`` neighbouring output pixels spans."""
    wv = np.asarray(exe.input_infos[1].value, np.float32)
    kh, kw = wv.shape[2:]
    _, strides, dil, pads = exe.geometry["window"].unpack()
    row = (vw - 1) * strides[1] + (kw - 1) * dil[1] + 1
    return wv, strides, dil, pads, row


def conv_bias(exe, m: int) -> np.ndarray:
    """Execution ``exe``'s Conv bias ``(M,)`` float32: its constant input, or zeros when the op
    has none."""
    info = exe.input_infos[2] if len(exe.input_infos) > 2 else None
    return np.zeros(m, np.float32) if info is None else np.asarray(info.value, np.float32).reshape(m)


def is_pointwise(kh: int, kw: int, g: int, strides, pads) -> bool:
    """1x1 kernel, stride 1, no pads, one group: the Conv is a GEMM per image."""
    return g == 1 and kh == kw == 1 and list(strides) == [1, 1] and not any(pads)

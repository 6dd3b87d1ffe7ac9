"""The dtypes the GPU backends store and compute, and their short codes.

Float32 tensors are stored as float32, or as float16 with ``precision="low"``; int32, int64
and bool tensors are stored as themselves (bool: one byte per element, 0 or 1, as numpy's
``bool_``) and cross partition borders unconverted. The codes name kernel variants: OpenCL
build options ``-D IN_<CODE>`` / ``-D OUT_<CODE>`` (``shaders/opencl/common.h``), Vulkan
variant suffixes ``_<code>`` and macros ``IN=<CODE>`` / ``OUT=<CODE>``
(``shaders/vulkan/storage.glsl``); float32 has no option and no suffix (the float storage).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

F32, I32, I64, BOOL = (np.dtype(t) for t in (np.float32, np.int32, np.int64, np.bool_))
INTEGERS = (I32, I64)
NUMBERS = (F32, *INTEGERS)
ALL = (*NUMBERS, BOOL)  # every dtype a GPU backend holds besides fp16 storage
CODES = {F32: "f32", I32: "i32", I64: "i64", BOOL: "bool"}


def code(dtype) -> str:
    """The short code of one of ``ALL`` ("f32", "i32", "i64", "bool"); KeyError for others."""
    return CODES[np.dtype(dtype)]


def typed(dtype) -> bool:
    """Whether tensors of ``dtype`` are held as themselves (integers, bool): not float storage."""
    return np.dtype(dtype).kind != "f"


def names(dtypes: Iterable) -> str:
    """``"float32, int32"``: dtype names for reasons."""
    return ", ".join(str(np.dtype(d)) for d in dtypes)

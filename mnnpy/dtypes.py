"""Data types: the model format's ``DataType`` enum, NumPy dtypes and ONNX element types.

The format stores ``mnnpy.fb.DataType`` codes; the engine works with ``numpy.dtype``.
ONNX ``TensorProto`` codes are listed for the converter (onnx.proto3, ``DataType``).
"""

from __future__ import annotations

import numpy as np

from mnnpy.errors import ModelFormatError

# format code -> numpy dtype (codes fixed by mnnpy/schema/model.fbs)
_CODE_TO_NP = {
    1: np.dtype(np.float32),
    2: np.dtype(np.float16),
    3: np.dtype(np.float64),
    4: np.dtype(np.int8),
    5: np.dtype(np.uint8),
    6: np.dtype(np.int16),
    7: np.dtype(np.uint16),
    8: np.dtype(np.int32),
    9: np.dtype(np.uint32),
    10: np.dtype(np.int64),
    11: np.dtype(np.uint64),
    12: np.dtype(np.bool_),
}
_NP_TO_CODE = {v: k for k, v in _CODE_TO_NP.items()}
STORED = tuple(_CODE_TO_NP.values())  # the dtypes a model file can hold

# ONNX TensorProto.DataType code -> numpy dtype (the ones the engine supports)
_ONNX_TO_NP = {
    1: np.dtype(np.float32),
    2: np.dtype(np.uint8),
    3: np.dtype(np.int8),
    4: np.dtype(np.uint16),
    5: np.dtype(np.int16),
    6: np.dtype(np.int32),
    7: np.dtype(np.int64),
    9: np.dtype(np.bool_),
    10: np.dtype(np.float16),
    11: np.dtype(np.float64),
    12: np.dtype(np.uint32),
    13: np.dtype(np.uint64),
}
_NP_TO_ONNX = {v: k for k, v in _ONNX_TO_NP.items()}


def _look_up(table: dict, key, problem: str):
    """``table[key]``, or ``ModelFormatError(problem)`` when it has no such key."""
    try:
        return table[key]
    except KeyError:
        raise ModelFormatError(problem) from None


def from_code(code: int, where: str = "tensor") -> np.dtype:
    """Format ``DataType`` code -> numpy dtype; raises ``ModelFormatError`` for an unknown code."""
    return _look_up(_CODE_TO_NP, code, f"{where}: unknown dtype code {code}")


def to_code(dtype: np.dtype) -> int:
    """numpy dtype -> format ``DataType`` code; raises ``ModelFormatError`` when unsupported."""
    return _look_up(_NP_TO_CODE, np.dtype(dtype), f"dtype {dtype} cannot be stored in an mnnpy model")


def from_onnx(code: int, where: str = "tensor") -> np.dtype:
    """ONNX ``TensorProto`` element type -> numpy dtype; ``ModelFormatError`` when unsupported."""
    return _look_up(_ONNX_TO_NP, code, f"{where}: ONNX element type {code} is not supported")


def to_onnx(dtype: np.dtype) -> int:
    """numpy dtype -> ONNX ``TensorProto`` element type."""
    return _NP_TO_ONNX[np.dtype(dtype)]

"""Elementwise op family shared by the GPU backends: which ops, their dtypes, checks and scalars.

``UNARY_OPS``: ``Y = F(X)``, X and Y float32 of one shape, the activation table's ops with a
GPU expression (``mnnpy.ops.activation``); scalars (``UnaryBase.params``,
``Activation.scalars``): HardSigmoid ``alpha, beta``, LeakyRelu and Swish ``alpha``, Clip
``min, max`` (constant inputs, absent = -FLT_MAX / +FLT_MAX).

``BINARY_DTYPES``: ``C = A op B`` with numpy broadcasting, up to ``MAX_RANK`` dims after
merging (Max/Min: exactly two inputs), A and B of one dtype: the arithmetic ops keep it
(float32, int32, int64; Pow float32; Mod integers), the comparisons (``COMPARISONS``) and
the logic ops (``LOGIC``, bool) give bool. Integers wrap around on overflow (two's
complement); integer Div truncates toward zero (onnxruntime's C division) and needs a
divisor known at resize without zeros (the CPU backend raises ``InputError`` for a zero
divisor, which a kernel cannot); Mod follows ``fmod`` (0: the sign of the divisor, 1: of
the dividend) and gives 0 for a zero divisor, as the CPU backend.

``CONVERT_OPS``: ``Y = convert(X)`` of one shape: Cast between float32, int32, int64 and bool
(float -> int truncates toward zero, out-of-range results undefined as in ONNX; int64 ->
int32 wraps; anything -> bool is ``X != 0``, NaN included), Not on bool. ONNX operators.md.
"""

from __future__ import annotations

from functools import partial

from mnnpy.backends.gpu.checks import binary_check, unary_check, unary_params
from mnnpy.backends.gpu.dtypes import ALL, BOOL, F32, INTEGERS, NUMBERS, names
from mnnpy.backends.gpu.execution import GPUExecution, checked_by
from mnnpy.ops.activation import GPU

UNARY_OPS = GPU  # the activation table's ops with a GPU expression
ARITHMETIC = {"Add": NUMBERS, "Sub": NUMBERS, "Mul": NUMBERS, "Div": NUMBERS, "Pow": (F32,), "Max": NUMBERS, "Min": NUMBERS}
ARITHMETIC["Mod"] = INTEGERS
COMPARISONS = {"Equal": ALL, "Less": NUMBERS, "Greater": NUMBERS, "LessOrEqual": NUMBERS, "GreaterOrEqual": NUMBERS}
LOGIC = {"And": (BOOL,), "Or": (BOOL,), "Xor": (BOOL,)}
BINARY_DTYPES = {**ARITHMETIC, **COMPARISONS, **LOGIC}  # op -> the dtypes of A and B
BINARY_OPS = tuple(BINARY_DTYPES)
CONVERT_DTYPES = {"Cast": ALL, "Not": (BOOL,)}
CONVERT_OPS = tuple(CONVERT_DTYPES)
MAX_RANK = 8  # the kernels' index arrays; ONNX models here need at most 6


class UnaryBase(GPUExecution):
    """``Y = F(X)`` of ``UNARY_OPS``: Clip's bounds known at resize."""

    check = checked_by(unary_check)

    def params(self) -> tuple[float, float]:
        """The op's two scalars (``unary_params``)."""
        return unary_params(self.op.type, self.attrs, self.input_infos)


def divisor_check(info, backend: str) -> tuple[bool, str]:
    """Integer Div: the divisor known at resize, without zeros."""
    a, b = info.inputs[0], info.inputs[1]
    if info.type != "Div" or a.dtype == F32:
        return True, ""
    if b.value is None:
        return False, f"{a.dtype} Div by a divisor computed at run time ({backend} divides integers by constants)"
    if not b.value.all():
        return False, f"{a.dtype} Div by zero"
    return True, ""


def operand_dtype_check(info, backend: str) -> tuple[bool, str]:
    """A and B of one dtype, a constant operand too: the kernels read B in A's dtype (the
    backend's dtype gate lets constants of any dtype through). ONNX gives the two one type
    everywhere but Pow, whose exponent may be of another (operators.md #Pow, T1)."""
    a, b = info.inputs[0], info.inputs[1]
    if a.dtype != b.dtype:
        return False, f"{info.type} of {a.dtype} and {b.dtype} ({backend} takes operands of one dtype)"
    return True, ""


class BinaryBase(GPUExecution):
    """``C = A op B`` of ``BINARY_OPS`` in the dtypes of ``BINARY_DTYPES``, A and B of one dtype,
    broadcasting within ``MAX_RANK`` merged dims."""

    check = checked_by(partial(binary_check, max_rank=MAX_RANK), operand_dtype_check, divisor_check)

    @classmethod
    def input_dtypes(cls, op_type: str) -> tuple:
        """``BINARY_DTYPES[op_type]``."""
        return BINARY_DTYPES[op_type]


def cast_check(info, backend: str) -> tuple[bool, str]:
    """Cast to one of ``dtypes.ALL``."""
    to = info.outputs[0].dtype if info.outputs and info.outputs[0] is not None else None
    if to is not None and to not in ALL:
        return False, f"Cast to {to} ({backend} casts between {names(ALL)})"
    return True, ""


class ConvertBase(GPUExecution):
    """``Y = convert(X)`` of ``CONVERT_OPS`` (Cast, Not), X and Y of one shape."""

    check = checked_by(cast_check)

    @classmethod
    def input_dtypes(cls, op_type: str) -> tuple:
        """``CONVERT_DTYPES[op_type]``."""
        return CONVERT_DTYPES[op_type]

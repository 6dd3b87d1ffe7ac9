"""Elementwise op family shared by the GPU backends: which ops, their checks and scalars.

``UNARY_OPS``: ``Y = F(X)``, X and Y float32 of one shape, the activation table's ops with a
GPU expression (``mnnpy.ops.activation``); scalars (``UnaryBase.params``,
``Activation.scalars``): HardSigmoid ``alpha, beta``, LeakyRelu and Swish ``alpha``, Clip
``min, max`` (constant inputs, absent = -FLT_MAX / +FLT_MAX). ``BINARY_OPS``: ``C = A op B`` with numpy broadcasting, up to
``MAX_RANK`` dims after merging (Max/Min: exactly two inputs). ONNX operators.md.
"""

from __future__ import annotations

from functools import partial

from mnnpy.backends.gpu.checks import binary_check, unary_check, unary_params
from mnnpy.backends.gpu.execution import GPUExecution, checked_by
from mnnpy.ops.activation import GPU

UNARY_OPS = GPU  # the activation table's ops with a GPU expression
BINARY_OPS = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min")
MAX_RANK = 8  # the kernels' index arrays; ONNX models here need at most 6


class UnaryBase(GPUExecution):
    """``Y = F(X)`` of ``UNARY_OPS``: Clip's bounds known at resize."""

    check = checked_by(unary_check)

    def params(self) -> tuple[float, float]:
        """The op's two scalars (``unary_params``)."""
        return unary_params(self.op.type, self.attrs, self.input_infos)


class BinaryBase(GPUExecution):
    """``C = A op B`` of ``BINARY_OPS``, broadcasting within ``MAX_RANK`` merged dims."""

    check = checked_by(partial(binary_check, max_rank=MAX_RANK))

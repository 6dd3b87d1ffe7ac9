"""OpenCL elementwise Executions: unary activations/math, broadcasting binary ops
(arithmetic, comparisons, logic) and conversions (Cast, Not).

Kernels: ``shaders/opencl/elementwise.cl``, the operation chosen by a ``-D ACT_<NAME>``
(unary: the activation table's ops with a GPU expression) or ``-D OP_<NAME>`` (binary)
build option, the dtypes by ``-D SRC_<CODE>`` / ``-D DST_<CODE>`` (``dtype_options``).
``prepare`` builds/fetches the program, sets every kernel argument and the global size;
``on_execute`` enqueues one kernel. Ops, dtypes, checks and scalars:
``backends/gpu/elementwise.py``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.gpu import elementwise as family
from mnnpy.backends.gpu.layout import broadcast_strides
from mnnpy.backends.opencl.activation import activation
from mnnpy.backends.opencl.execution import OpenCLExecution, dtype_options
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "elementwise.cl"


@opencl_execution(*family.UNARY_OPS)
class Unary(family.UnaryBase, OpenCLExecution):
    """``Y = F(X)``, X and Y float32 of one shape, 4 elements per work item."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        option, p0, p1 = activation(self.op.type, self.params())
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset), np.int32(y.size))
        self.enqueue(SOURCE, "unary", [option], (*args, np.float32(p0), np.float32(p1)), (-(-y.size // 4),))


@opencl_execution(*family.BINARY_OPS)
class Binary(family.BinaryBase, OpenCLExecution):
    """``C = A op B`` with numpy broadcasting, in the dtypes of ``BINARY_DTYPES``; a constant
    float operand stays fp32 under fp16 storage."""

    def prepare(self, inputs, outputs):
        a, b = self.operands = [self.backend.fp32_operand(h, i) for h, i in zip(inputs, self.input_infos)]
        c = outputs[0]
        options = [f"-D OP_{self.op.type.upper()}", *dtype_options(inputs[0].dtype, c.dtype)]
        if self.op.type == "Mod":
            options.append(f"-D FMOD={self.attrs['fmod']}")
        if self.backend.half:  # a constant operand kept fp32 while activations are stored fp16
            options += [f"-D {slot}_F32" for slot, t in (("A", a), ("B", b)) if t.dtype == np.float32]
        dims, (astr, bstr) = broadcast_strides(c.shape, a.shape, b.shape)
        same = len(dims) <= 1 and astr in ([], [1]) and bstr in ([], [1])
        if not same:
            options.append("-D BROADCAST")  # else both inputs are read like the output, 4 elements per item
        pad = family.MAX_RANK - len(dims)  # the int8 arguments: leading dims 1, strides 0
        vec = [np.array([1] * pad + dims, np.int32), np.array([0] * pad + astr, np.int32), np.array([0] * pad + bstr, np.int32)]
        args = (a.buffer, np.int32(a.elem_offset), b.buffer, np.int32(b.elem_offset), c.buffer, np.int32(c.elem_offset))
        work = -(-c.size // 4) if same else c.size
        self.enqueue(SOURCE, "binary", options, (*args, np.int32(c.size), *vec), (work,))


@opencl_execution(*family.CONVERT_OPS)
class Convert(family.ConvertBase, OpenCLExecution):
    """``Y = convert(X)``: Cast between float32 (either storage), int32, int64 and bool; Not."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        options = dtype_options(x.dtype, y.dtype) + (["-D NOT"] if self.op.type == "Not" else [])
        args = (x.buffer, np.int32(x.elem_offset), y.buffer, np.int32(y.elem_offset), np.int32(y.size))
        self.enqueue(SOURCE, "convert", options, args, (y.size,))

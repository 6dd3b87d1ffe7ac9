"""OpenCL elementwise Executions: unary activations/math and broadcasting binary ops.

Kernels: ``shaders/opencl/elementwise.cl``, the operation chosen by a ``-D OP_<NAME>``
(or ``-D ACT_<NAME>``) build option. ``on_resize`` builds/fetches the program, sets every
kernel argument and the global size; ``on_execute`` enqueues one kernel.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.opencl.activation import ACTIVATIONS, activation
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "elementwise.cl"
MAX_RANK = 8  # kernel's index decomposition; ONNX models here need at most 6


@opencl_execution(
    "Relu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "LeakyRelu", "Clip", "Swish", "Sqrt", "Abs", "Neg", "Exp"
)
class Unary(Execution):
    """``Y = F(X)``, X and Y float32 of one shape. Scalars: HardSigmoid ``alpha, beta``;
    LeakyRelu ``alpha``; Clip ``min, max`` (constant inputs, absent = unbounded)."""

    @staticmethod
    def check(op, inputs, attrs) -> tuple[bool, str]:
        """Clip's bounds must be known at resize (constants), one element each."""
        if op.type == "Clip":
            for t in inputs[1:]:
                if t.value is None:
                    return False, "Clip min/max computed at run time (OpenCL takes constant bounds)"
                if t.value.size != 1:
                    return False, "Clip min/max must be one element"
        return True, ""

    def _params(self) -> tuple[float, float]:
        t = self.op.type
        if t == "HardSigmoid":
            return self.attrs["alpha"], self.attrs["beta"]
        if t == "LeakyRelu":
            return self.attrs["alpha"], 0.0
        if t == "Clip":
            bounds = [-np.inf, np.inf]
            for k in (1, 2):
                info = self.input_infos[k] if len(self.input_infos) > k else None
                if info is not None:
                    bounds[k - 1] = float(np.asarray(info.value).reshape(()))
            return bounds[0], bounds[1]
        return 0.0, 0.0

    def on_resize(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        t = self.op.type
        option = activation(t)[0] if t in ACTIVATIONS else f"-D OP_{t.upper()}"
        p0, p1 = self._params()
        args = (
            x.buffer,
            np.int32(x.elem_offset),
            y.buffer,
            np.int32(y.elem_offset),
            np.int32(y.size),
            np.float32(p0),
            np.float32(p1),
        )
        self.launch = self.backend.launch(SOURCE, "unary", [option], args, (-(-y.size // 4),))

    def on_execute(self, inputs, outputs):
        self.launch()


def collapse(out: tuple[int, ...], a: tuple[int, ...], b: tuple[int, ...]):
    """Broadcast ``a`` and ``b`` to ``out`` as element strides, merging dims that can be merged.

    Returns ``(dims, astr, bstr)`` (outermost first, size-1 dims dropped; a stride is 0
    where that input is broadcast). Two neighbouring dims merge when each input is either
    contiguous across them or broadcast along both.
    """

    def strides(shape):
        shape = (1,) * (len(out) - len(shape)) + tuple(shape)
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc if d != 1 else 0)
            acc *= d
        return st[::-1]

    sa, sb = strides(a), strides(b)
    dims, astr, bstr = [], [], []
    for d, x, y in zip(out, sa, sb):
        if d == 1:
            continue
        if dims and astr[-1] == x * d and bstr[-1] == y * d:
            dims[-1] *= d  # previous dim is contiguous with this one in both inputs (0 == 0*d too)
            astr[-1], bstr[-1] = x, y
        else:
            dims.append(d)
            astr.append(x)
            bstr.append(y)
    return dims, astr, bstr


@opencl_execution("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min")
class Binary(Execution):
    """``C = A op B`` (float32) with numpy broadcasting. Max/Min: exactly two inputs here."""

    @staticmethod
    def check(op, inputs, attrs) -> tuple[bool, str]:
        if len(inputs) != 2:
            return False, f"{op.type} with {len(inputs)} inputs (OpenCL takes two)"
        out = np.broadcast_shapes(inputs[0].shape, inputs[1].shape)
        dims = collapse(out, inputs[0].shape, inputs[1].shape)[0]
        if len(dims) > MAX_RANK:
            return False, f"broadcast of rank {len(dims)} after merging dims (OpenCL takes up to {MAX_RANK})"
        return True, ""

    def on_resize(self, inputs, outputs):
        a, b = self.operands = [self.backend.fp32_operand(h, i) for h, i in zip(inputs, self.input_infos)]
        c = outputs[0]
        options = [f"-D OP_{self.op.type.upper()}"]
        if self.backend.half:  # a constant operand kept fp32 while activations are stored fp16
            options += [f"-D {slot}_F32" for slot, t in (("A", a), ("B", b)) if t.dtype == np.float32]
        dims, astr, bstr = collapse(c.shape, a.shape, b.shape)
        same = len(dims) <= 1 and astr in ([], [1]) and bstr in ([], [1])
        if not same:
            options.append("-D BROADCAST")  # else both inputs are read like the output, 4 elements per item
        pad = MAX_RANK - len(dims)  # the int8 arguments: leading dims 1, strides 0
        vec = [np.array([1] * pad + dims, np.int32), np.array([0] * pad + astr, np.int32), np.array([0] * pad + bstr, np.int32)]
        args = (a.buffer, np.int32(a.elem_offset), b.buffer, np.int32(b.elem_offset), c.buffer, np.int32(c.elem_offset))
        work = -(-c.size // 4) if same else c.size
        self.launch = self.backend.launch(SOURCE, "binary", options, (*args, np.int32(c.size), *vec), (work,))

    def on_execute(self, inputs, outputs):
        self.launch()

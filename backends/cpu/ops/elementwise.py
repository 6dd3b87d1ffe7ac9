"""CPU elementwise ops: Identity and the broadcasting arithmetic binary ops (the unary
ones are in ``activation.py``).

Every kernel writes into its planned output with numpy's ``out=`` (no temporaries
beyond a scratch buffer sized at resize). Formulas: ONNX operators.md.
"""

from __future__ import annotations

import functools

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.kernels.elementwise import add_kernel
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.windows import same_elements
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, blocks, parallel, split
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.errors import InputError


@cpu_execution("Identity")
class Identity(Execution):
    """``Y = X``; a no-op when the planner made Y share X's buffer."""

    uses_blas = False  # CPUBackend.execute_partition leaves BLAS alone

    def on_resize(self, inputs, outputs):
        self.shared = np.shares_memory(inputs[0], outputs[0]) if inputs[0].size else True

    def on_execute(self, inputs, outputs):
        if not self.shared:
            np.copyto(outputs[0], inputs[0])


_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}


@cpu_execution("Add", "Sub", "Mul", "Div", "Pow")
class Binary(Execution):
    """``C = A op B`` with numpy broadcasting; integer Div truncates toward zero (C semantics)."""

    uses_blas = False  # CPUBackend.execute_partition leaves BLAS alone

    def on_resize(self, inputs, outputs):
        a, b = self.input_infos
        t = self.op.type
        if t == "Div":
            self.fn = np.divide if a.dtype.kind == "f" else _int_div
        elif t == "Pow":
            self.fn = _pow
        else:
            self.fn = _BINARY[t]
        fn = self.fn
        self.tasks = _native_add(self.backend, t, *inputs[:2], outputs[0])
        if self.tasks is not None:
            self.run = functools.partial(parallel, self.backend, self.tasks)
        else:
            self.run = blocks(self.backend, lambda c, a, b: fn(a, b, out=c), outputs[0], inputs[:2])

    def native_phases(self):
        """``[tasks]`` for an ``Add`` of two maps of one shape (``program.py``), else ``None``."""
        return None if self.tasks is None else [self.tasks]

    def on_execute(self, inputs, outputs):
        self.run()


def _native_add(backend, op_type: str, a, b, y) -> list | None:
    """The compiled ``y = a + b`` (``kernels/elementwise.add_kernel``) for an ``Add`` of two maps
    of one shape (``map_pair_tasks``), else ``None`` (NumPy's ``add``)."""
    return map_pair_tasks(backend, add_kernel, a, b, y) if op_type == "Add" else None


def map_pair_tasks(backend, kernels, a, b, y) -> list | None:
    """Tasks of ``kernels()`` (``(two(a, b, y, lo, hi), in_place(y, b, lo, hi))``, an elementwise
    ``y = f(a, b)`` symmetric in ``a`` and ``b``) over flat views, cut over the threads from
    ``PARALLEL_ELEMENTS``: for ``a``, ``b``, ``y`` float32 C-contiguous of one shape, ``y``
    distinct from both or exactly one of them; ``None`` otherwise or where numba cannot compile."""
    if any(v is None or v.dtype != np.float32 or not v.flags.c_contiguous or v.shape != y.shape for v in (a, b, y)):
        return None
    if y.size == 0:
        return None
    if same_elements(y, b):  # in place of b: b's role is a's
        a, b = b, a
    if any(np.shares_memory(y, v) and not same_elements(y, v) for v in (a, b)):
        return None
    pair = kernels()
    if pair is None:
        return None
    two, one = pair
    af, bf, yf = a.reshape(-1), b.reshape(-1), y.reshape(-1)
    parts = backend.num_threads if y.size >= PARALLEL_ELEMENTS else 1
    if same_elements(y, a):
        return [bind(one, yf, bf, lo, hi) for lo, hi in split(y.size, parts)]
    return [bind(two, af, bf, yf, lo, hi) for lo, hi in split(y.size, parts)]


def _int_div(a, b, out):
    """Integer division truncating toward zero, as onnxruntime computes it (C division): floor
    division, plus one where it was inexact and the signs differ; exact for every int64 (a
    float quotient is not beyond 2**53); MIN / -1 wraps to MIN.

    Raises ``InputError`` on a zero divisor (undefined in ONNX; onnxruntime refuses it).
    """
    if not np.all(b):
        raise InputError("integer Div by zero")
    with np.errstate(over="ignore"):
        np.floor_divide(a, b, out=out)
    out += (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))


def _pow(a, b, out):
    """``a ** b`` in ``a``'s dtype (the exponent is cast, opset 12+)."""
    if a.dtype.kind == "f":
        np.power(a, b.astype(a.dtype, copy=False), out=out)
    else:
        np.copyto(out, np.power(a.astype(np.float64), b.astype(np.float64)).astype(out.dtype))

"""Fusing adjacent Executions of a CPU partition at resize (``CPUBackend.on_resize_partition``).

A tensor of ``PartitionStep.private`` is made and read inside the partition only, by one
op each; when its producer and its reader run one after the other, the producer may compute
the reader's output directly and the reader do nothing: the tensor is then never written.
The fused Execution keeps its own name in profiles; its reader shows no time.

Fused today:

- ``Mul`` by a float32 scalar constant, then ``Add``/``Sub`` of one
  (``y = x * a + b``, PP-OCRv4's "learnable affine blocks" after a Conv with a fused
  activation): one pass of ``kernels.elementwise`` instead of two numpy passes, rounded as
  the two ops round (bit-identical); on PP-OCR det's 14 pairs, mostly in place, measured
  7.9 ms for the 28 ops against 5.0 fused.
- ``ConvTranspose -> Relu`` where the ConvTranspose takes its compiled col2im pass: the Relu
  in the same pass (PP-OCR det's up-sampling head).

A pair is left alone where the arrays are not float32 and C-contiguous, where the output
overlaps the input other than exactly (in place is fine elementwise), or where numba cannot
compile.
"""

from __future__ import annotations

import functools

import numpy as np

from mnnpy.backends.cpu.kernels.elementwise import kernel as scale_shift_kernel
from mnnpy.backends.cpu.ops.activation import Activation
from mnnpy.backends.cpu.ops.elementwise import Binary
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, parallel, split


def fuse(step) -> int:
    """Fuse what can be fused in ``step`` (a ``mnnpy.planner.PartitionStep``); returns how many pairs."""
    runs, k, n = step.runs, 0, 0
    while k + 1 < len(runs):
        if any(pair(step, runs[k], runs[k + 1]) for pair in (_scale_shift, _conv_transpose_relu)):
            n, k = n + 1, k + 2
        else:
            k += 1
    return n


def _constant_scalar(exe, slot: int) -> float | None:
    """The float32 one-element constant at input ``slot`` of ``exe``, else ``None``."""
    info = exe.input_infos[slot]
    if info is None or info.value is None or info.dtype != np.float32 or int(np.prod(info.shape)) != 1:
        return None
    return float(np.asarray(info.value).reshape(()))


def _scale_shift(step, first, second) -> bool:
    """``Mul(x, a) -> Add/Sub(., b)`` with scalar constants as one ``y = x * a' + b'``."""
    (mul, mul_in, _), (add, _, add_out) = first, second
    if not (isinstance(mul, Binary) and isinstance(add, Binary)) or mul.op.type != "Mul" or add.op.type not in ("Add", "Sub"):
        return False
    t = mul.op.outputs[0]
    if t not in step.private or list(add.op.inputs).count(t) != 1:
        return False
    slot = next((k for k in (0, 1) if _constant_scalar(mul, 1 - k) is not None), None)
    shift_slot = 1 - add.op.inputs.index(t)
    if slot is None or _constant_scalar(add, shift_slot) is None:
        return False
    x, y = mul_in[slot], add_out[0]
    if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in (x, y)) or x.shape != y.shape:
        return False
    if np.shares_memory(x, y) and x.__array_interface__["data"][0] != y.__array_interface__["data"][0]:
        return False
    kernels = scale_shift_kernel()
    if kernels is None:
        return False
    a, b = _constant_scalar(mul, 1 - slot), _constant_scalar(add, shift_slot)
    if add.op.type == "Sub":  # t - b = t + (-b); b - t = x * (-a) + b: the same roundings
        a, b = (a, -b) if shift_slot == 1 else (-a, b)
    xf, yf, a32, b32 = x.reshape(-1), y.reshape(-1), np.float32(a), np.float32(b)
    parts = mul.backend.num_threads if y.size >= PARALLEL_ELEMENTS else 1
    two, one = kernels
    same = np.shares_memory(x, y)  # then exactly in place (checked above)
    tasks = [
        functools.partial(one, yf, a32, b32, lo, hi) if same else functools.partial(two, xf, yf, a32, b32, lo, hi)
        for lo, hi in split(y.size, parts)
    ]
    mul.run = functools.partial(parallel, mul.backend, tasks)
    add.run = _nothing
    mul.fused_with = add.op.name
    return True


def _conv_transpose_relu(step, first, second) -> bool:
    """``ConvTranspose -> Relu``: Relu in the compiled col2im pass (``ConvTranspose.fuse_relu``)."""
    (ct, _, _), (relu, _, relu_out) = first, second
    if ct.op.type != "ConvTranspose" or relu.op.type != "Relu" or not isinstance(relu, Activation):
        return False
    t = ct.op.outputs[0]
    if t not in step.private or relu.op.inputs[0] != t or not ct.fuse_relu(relu_out[0]):
        return False
    relu.run = _nothing
    ct.fused_with = relu.op.name
    return True


def _nothing() -> None:
    """The reader of a fused pair: its output was written by the producer."""

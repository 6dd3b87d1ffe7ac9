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
- ``Mul(x, s)`` with a per-channel ``s: (N, C, 1, ...)`` then ``Add(x, .)`` (``y = x + x*s``,
  PP-OCRv4 det's residual squeeze-and-excitation), bit-identical.
- ``Resize`` (nearest, compiled) then ``Add`` of a map (PP-OCRv4 det's feature pyramid):
  the addend read in the resize pass.
- ``Add`` of two maps of one shape, then ``Relu`` (ResNet's residual joins): one pass of
  ``kernels.elementwise.add_relu_kernel``, bit-identical.
- ``ConvTranspose -> Relu`` where the ConvTranspose takes its compiled col2im pass: the Relu
  in the same pass (PP-OCR det's up-sampling head).

A pair is left alone where the arrays are not float32 and C-contiguous, where the output
overlaps the input other than exactly (in place is fine elementwise), or where numba cannot
compile. A fused pair's ops join a ``program.py`` Program only where the pair gives their
``native_phases`` (``Add`` then ``Relu``); the others run on their own.
"""

from __future__ import annotations

import functools

import numpy as np

from mnnpy.backends.cpu.kernels.elementwise import add_relu_kernel, residual_scale_kernel
from mnnpy.backends.cpu.kernels.elementwise import kernel as scale_shift_kernel
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.activation import Activation
from mnnpy.backends.cpu.ops.elementwise import Binary, map_pair_tasks
from mnnpy.backends.cpu.ops.windows import same_elements
from mnnpy.backends.cpu.parallel import PARALLEL_ELEMENTS, parallel, split
from mnnpy.backends.cpu.scratch import scratch


def fuse(step) -> int:
    """Fuse what can be fused in ``step`` (a ``mnnpy.planner.PartitionStep``); returns how many pairs."""
    runs, k, n = step.runs, 0, 0
    while k + 1 < len(runs):
        if any(pair(step, runs[k], runs[k + 1]) for pair in PAIRS):
            for exe in (runs[k][0], runs[k + 1][0]):  # their runs changed: native phases only where the pair said
                if "native_phases" not in vars(exe):
                    exe.native_phases = _not_native
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
    if np.shares_memory(x, y) and not same_elements(x, y):
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
    tasks = [bind(one, yf, a32, b32, lo, hi) if same else bind(two, xf, yf, a32, b32, lo, hi) for lo, hi in split(y.size, parts)]
    mul.run = functools.partial(parallel, mul.backend, tasks)
    add.run = _nothing
    mul.fused_with = add.op.name
    return True


def _residual_scale(step, first, second) -> bool:
    """``t = Mul(x, s)`` with ``s: (N, C, 1, ...)``, then ``Add(x, t)``: ``y = x + x * s`` in one pass."""
    (mul, mul_in, _), (add, _, add_out) = first, second
    if not (isinstance(mul, Binary) and isinstance(add, Binary)) or mul.op.type != "Mul" or add.op.type != "Add":
        return False
    t = mul.op.outputs[0]
    if t not in step.private or list(add.op.inputs).count(t) != 1:
        return False
    xi = add.op.inputs[1 - add.op.inputs.index(t)]
    if xi not in mul.op.inputs or xi < 0 or list(mul.op.inputs).count(xi) != 1:
        return False
    x = mul_in[mul.op.inputs.index(xi)]
    s = mul_in[1 - mul.op.inputs.index(xi)]
    y = add_out[0]
    arrays = (x, s, y)
    if any(a is None or a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays) or x.ndim < 2:
        return False
    if x.shape != y.shape or s.shape != x.shape[:2] + (1,) * (x.ndim - 2):
        return False
    if np.shares_memory(y, x):
        return False
    kernel = residual_scale_kernel()
    if kernel is None:
        return False
    planes, plane = s.size, x.size // max(s.size, 1)
    xf, sf, yf = x.reshape(-1), s.reshape(-1), y.reshape(-1)
    parts = mul.backend.num_threads if y.size >= PARALLEL_ELEMENTS else 1
    copy = None
    if np.shares_memory(y, s):  # the planner gave s's bytes to y (s is read last here): read a copy
        copy = (scratch(sf.shape, np.float32), sf)
        sf = copy[0]
    tasks = [bind(kernel, xf, sf, yf, plane, lo, hi) for lo, hi in split(planes, parts)]
    mul.run = functools.partial(_run_after_copy, mul.backend, tasks, copy)
    add.run = _nothing
    mul.fused_with = add.op.name
    return True


def _run_after_copy(backend, tasks, copy) -> None:
    if copy is not None:
        np.copyto(*copy)
    parallel(backend, tasks)


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


def _resize_add(step, first, second) -> bool:
    """``Add(z, Resize(x))``: ``z`` added in the compiled nearest pass (``Resize.fuse_add``)."""
    (resize, resize_in, _), (add, add_in, add_out) = first, second
    if resize.op.type != "Resize" or not isinstance(add, Binary) or add.op.type != "Add":
        return False
    t = resize.op.outputs[0]
    if t not in step.private or list(add.op.inputs).count(t) != 1:
        return False
    z, y, x = add_in[1 - add.op.inputs.index(t)], add_out[0], resize_in[0]
    if z is None or np.shares_memory(y, x) or (np.shares_memory(y, z) and not same_elements(y, z)):
        return False
    if not resize.fuse_add(z, y):
        return False
    add.run = _nothing
    resize.fused_with = add.op.name
    return True


def _add_relu(step, first, second) -> bool:
    """``Relu(Add(a, b))`` with ``a``, ``b`` and the output of one shape: one pass, ``max(a + b, 0)``."""
    (add, add_in, _), (relu, _, relu_out) = first, second
    if not isinstance(add, Binary) or add.op.type != "Add" or relu.op.type != "Relu" or not isinstance(relu, Activation):
        return False
    t = add.op.outputs[0]
    if t not in step.private or relu.op.inputs[0] != t or len(add_in) != 2:
        return False
    tasks = map_pair_tasks(add.backend, add_relu_kernel, add_in[0], add_in[1], relu_out[0])
    if tasks is None:
        return False
    add.run = functools.partial(parallel, add.backend, tasks)
    relu.run = _nothing
    add.native_phases, relu.native_phases = functools.partial(list, [tasks]), list  # program.py
    add.fused_with = relu.op.name
    return True


def _not_native() -> None:
    """``native_phases`` of a fused op whose pair gave none (``program.py``: not in a Program)."""
    return None


def _nothing() -> None:
    """The reader of a fused pair: its output was written by the producer."""


PAIRS = (_scale_shift, _residual_scale, _add_relu, _conv_transpose_relu, _resize_add)

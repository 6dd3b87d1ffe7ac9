"""OpenCL MatMul and Gemm (ONNX operators.md #MatMul, #Gemm) on one tiled GEMM kernel.

Kernels: ``shaders/opencl/gemm.cl`` (``gemm``; ``gemv`` for classifier heads), variants by
build options (``TRANS_A``, ``TRANS_B``, ``HAS_C``, ``BATCH_TABLE``, tile sizes ``LX LY RM
RN``, ``DIRECT`` on CPU devices, a fused ``ACT_*``). ``gemm_launch`` is shared with the 1x1
Conv (``conv.py``). Everything (tile choice, batch offsets, kernel arguments) is fixed at
resize; ``on_execute`` enqueues one launch. The problems: ``backends/gpu/gemm.py``.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backends.gpu.checks import float_check
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.gpu.gemm import GemmBase, MatMulBase
from mnnpy.backends.gpu.gemm_geometry import GemmProblem, gemv_shape
from mnnpy.backends.opencl.execution import OpenCLExecution
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "gemm.cl"
NO_ACT = ("-D ACT_NONE", np.float32(0), np.float32(0))
# (LX, LY, RM, RN): work group LX x LY items, each RM x RN outputs; smaller ones when the device needs it
FALLBACK_TILES = [(8, 8, 4, 4), (4, 4, 4, 4), (1, 1, 4, 4)]
# Local-memory tiles: True/False forces them on/off; None: off on CPU devices (PoCL), where
# barriers make work groups slow and caches tile anyway (-D DIRECT), on everywhere else.
LOCAL_TILES: bool | None = None
GEMV_LOCAL = 64  # work items per output in gemm.cl's gemv (its GV)


def use_local_tiles(backend) -> bool:
    """Whether the GEMM kernel stages tiles in local memory on ``backend``'s device."""
    if LOCAL_TILES is not None:
        return LOCAL_TILES
    return not backend.runtime.device.type & backend.cl.device_type.CPU


def tile_config(m: int, n: int) -> tuple[int, int, int, int]:
    """``(LX, LY, RM, RN)`` for an ``m x n`` output: 64x64 tiles, thinner ones for small m or n."""
    if m <= 4:
        return 64, 1, max(1, m), 4  # GEMV-like (classifier heads): one row strip per group
    if m <= 16:
        return 32, 4, 4, 4
    if n <= 32:
        return 8, 16, 4, 4
    return 16, 16, 4, 4


def gemm_launch(backend, a, b, y, p: GemmProblem, c=None, table=None, act=NO_ACT):
    """A ``Launch`` of ``Y[b] = ACT(alpha * A[b] @ B[b] + beta * C)`` for problem ``p``.

    ``a``, ``b``, ``y``, ``c``: ``CLTensor`` (``c`` None: no C term); ``table``: a device int32
    array ``(batch, 2)`` of A/B element offsets instead of their strides; ``act``: a fused
    activation (``activation.activation``). Returns ``(launch, keep)``: ``keep`` holds device
    buffers the launch reads (keep a reference)."""
    opts = [act[0]] + ([] if use_local_tiles(backend) else ["-D DIRECT"])
    opts += ["-D TRANS_A"] * p.trans_a + ["-D TRANS_B"] * p.trans_b + ["-D HAS_C"] * (c is not None)
    if backend.half:  # operands kept fp32 (weights) while activations are stored fp16
        opts += [f"-D {name}_F32" for name, t in (("A", a), ("B", b), ("C", c)) if t is not None and t.dtype == np.float32]
    if table is None:
        table = backend.constant(np.zeros(2, np.int32))
    else:
        opts.append("-D BATCH_TABLE")
    i32 = np.int32
    c_arg = (y.buffer, i32(0)) if c is None else (c.buffer, i32(c.elem_offset))  # unused without C
    args = (a.buffer, i32(a.elem_offset), b.buffer, i32(b.elem_offset), *c_arg, y.buffer, i32(y.elem_offset))
    args += (*(i32(v) for v in p.ints),)
    args += (np.float32(p.alpha), np.float32(p.beta), table.buffer, act[1], act[2])
    if use_gemv(backend, p, "-D BATCH_TABLE" in opts):
        la = backend.launch(SOURCE, "gemv", opts, args, (p.n * GEMV_LOCAL, p.m, 1), (GEMV_LOCAL, 1, 1))
        if la.local == (GEMV_LOCAL, 1, 1):  # the kernel requires exactly this work-group size
            return la, table
    for lx, ly, rm, rn in [tile_config(p.m, p.n), *FALLBACK_TILES]:
        tiles = [f"-D LX={lx}", f"-D LY={ly}", f"-D RM={rm}", f"-D RN={rn}"]
        work = (math.ceil(p.n / (lx * rn)) * lx, math.ceil(p.m / (ly * rm)) * ly, p.batch)
        la = backend.launch(SOURCE, "gemm", [*opts, *tiles], args, work, (lx, ly, 1))
        if la.local == (lx, ly, 1):  # the kernel requires exactly this work-group size
            return la, table
    raise RuntimeError("no work-group size fits the OpenCL gemm kernel")  # (1, 1, 1) always fits


def use_gemv(backend, p: GemmProblem, batched: bool) -> bool:
    """Whether a GEMM runs on the ``gemv`` kernel: ``gemv_shape`` (few rows, B stored (N, K),
    one batch, K of a work group or more), no batch-offset table, on a device with
    local-memory tiles (not PoCL: barriers are costly there)."""
    return gemv_shape(p.m, p.k, p.batch, p.trans_a, p.trans_b, GEMV_LOCAL) and not batched and use_local_tiles(backend)


class _Gemm(OpenCLExecution):
    """The OpenCL side of MatMul/Gemm: float32 operands only; one ``gemm_launch``."""

    table_dtype = np.int32

    check = checked_by(float_check)

    def gemm(self, a, b, y, p: GemmProblem, c=None, table=None) -> None:
        """One ``gemm_launch`` of problem ``p`` (the buffers it reads kept in ``keep``)."""
        launch, self.keep = gemm_launch(self.backend, a, b, y, p, c=c, table=table)
        self.add(launch)


@opencl_execution("MatMul")
class MatMul(MatMulBase, _Gemm):
    """numpy.matmul on the tiled GEMM kernel (``MatMulBase``)."""


@opencl_execution("Gemm")
class Gemm(GemmBase, _Gemm):
    """ONNX Gemm on the tiled GEMM kernel (``GemmBase``)."""

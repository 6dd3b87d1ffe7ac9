"""OpenCL MatMul and Gemm (ONNX operators.md #MatMul, #Gemm) on one tiled GEMM kernel.

Kernels: ``shaders/opencl/gemm.cl`` (``gemm``; ``gemv`` for classifier heads), variants by build options (``TRANS_A``,
``TRANS_B``, ``HAS_C``, ``BATCH_TABLE``, tile sizes ``LX LY RM RN``, ``DIRECT`` on CPU
devices, a fused ``ACT_*``).
``gemm_launch`` is shared with the 1x1 Conv (``conv.py``). Everything (tile choice, batch
offsets, kernel arguments) is fixed at resize; ``on_execute`` enqueues one launch.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.gpu.gemm_geometry import gemm_problem, gemv_shape, matmul_batch, matmul_geometry
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "gemm.cl"
NO_ACT = ("-D ACT_NONE", np.float32(0), np.float32(0))
# (LX, LY, RM, RN): work group LX x LY items, each RM x RN outputs; smaller ones when the device needs it
FALLBACK_TILES = [(8, 8, 4, 4), (4, 4, 4, 4), (1, 1, 4, 4)]
# Local-memory tiles: True/False forces them on/off; None: off on CPU devices (PoCL), where
# barriers make work groups slow and caches tile anyway (-D DIRECT), on everywhere else.
LOCAL_TILES: bool | None = None


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


def gemm_launch(
    backend,
    a,
    b,
    y,
    m: int,
    n: int,
    k: int,
    *,
    lda: int,
    ldb: int,
    ldy: int,
    offsets=(0, 0, 0),
    batch: int = 1,
    strides=(0, 0, 0),
    table=None,
    trans_a: bool = False,
    trans_b: bool = False,
    c=None,
    c_strides=(0, 0),
    alpha: float = 1.0,
    beta: float = 1.0,
    act=NO_ACT,
):
    """A ``Launch`` of ``Y[b] = ACT(alpha * A[b] @ B[b] + beta * C)`` over ``batch`` matrices.

    ``a``, ``b``, ``y``, ``c``: ``CLTensor`` (``c`` None: no C term). ``offsets``: extra element
    offsets of A, B, Y; ``strides``: per-batch element strides of A, B, Y; ``table``: a device
    int32 array ``(batch, 2)`` of A/B offsets instead of their strides. ``c_strides``: C's
    element strides along rows and columns (0 where broadcast). Returns ``(launch, keep)``:
    ``keep`` holds device buffers the launch reads (keep a reference)."""
    opts = [act[0]] + ([] if use_local_tiles(backend) else ["-D DIRECT"])
    opts += ["-D TRANS_A"] * trans_a + ["-D TRANS_B"] * trans_b + ["-D HAS_C"] * (c is not None)
    if backend.half:  # operands kept fp32 (weights) while activations are stored fp16
        opts += [f"-D {name}_F32" for name, t in (("A", a), ("B", b), ("C", c)) if t is not None and t.dtype == np.float32]
    if table is None:
        table = backend.constant(np.zeros(2, np.int32))
    else:
        opts.append("-D BATCH_TABLE")
    cbuf, coff = (c.buffer, c.elem_offset) if c is not None else (y.buffer, 0)
    i32 = np.int32
    args = (
        a.buffer,
        i32(a.elem_offset + offsets[0]),
        b.buffer,
        i32(b.elem_offset + offsets[1]),
        cbuf,
        i32(coff),
        y.buffer,
        i32(y.elem_offset + offsets[2]),
        *(i32(v) for v in (m, n, k, lda, ldb, ldy, *strides, *c_strides)),
        np.float32(alpha),
        np.float32(beta),
        table.buffer,
        act[1],
        act[2],
    )
    if use_gemv(backend, m, n, k, batch, trans_a, trans_b, "-D BATCH_TABLE" in opts):
        la = backend.launch(SOURCE, "gemv", opts, args, (n * GEMV_LOCAL, m, 1), (GEMV_LOCAL, 1, 1))
        if la.local == (GEMV_LOCAL, 1, 1):  # the kernel requires exactly this work-group size
            return la, table
    for lx, ly, rm, rn in [tile_config(m, n), *FALLBACK_TILES]:
        tiles = [f"-D LX={lx}", f"-D LY={ly}", f"-D RM={rm}", f"-D RN={rn}"]
        work = (math.ceil(n / (lx * rn)) * lx, math.ceil(m / (ly * rm)) * ly, batch)
        la = backend.launch(SOURCE, "gemm", [*opts, *tiles], args, work, (lx, ly, 1))
        if la.local == (lx, ly, 1):  # the kernel requires exactly this work-group size
            return la, table
    raise RuntimeError("no work-group size fits the OpenCL gemm kernel")  # (1, 1, 1) always fits


GEMV_LOCAL = 64  # work items per output in gemm.cl's gemv (its GV)


def use_gemv(backend, m: int, n: int, k: int, batch: int, trans_a: bool, trans_b: bool, batched: bool) -> bool:
    """Whether a GEMM runs on the ``gemv`` kernel: ``gemv_shape`` (few rows, B stored (N, K),
    one batch, K of a work group or more), no batch-offset table, on a device with
    local-memory tiles (not PoCL: barriers are costly there)."""
    return gemv_shape(m, k, batch, trans_a, trans_b, GEMV_LOCAL) and not batched and use_local_tiles(backend)


def _float_only(info) -> tuple[bool, str]:
    bad = [str(t.dtype) for t in info.present() if t.dtype != np.float32]
    if bad:
        return False, f"{info.type} with dtype {', '.join(bad)} (OpenCL runs float32 only)"
    return True, ""


class _GemmExecution(Execution):
    """MatMul/Gemm: float32 operands only; constant operands kept fp32 under fp16 storage."""

    @staticmethod
    def check(info) -> tuple[bool, str]:
        return _float_only(info)

    def _operands(self, inputs) -> list:
        """A and B handles (fp32 copies of constants when activations are fp16), kept alive on self."""
        self.operands = [self.backend.fp32_operand(h, i) for h, i in zip(inputs[:2], self.input_infos[:2])]
        return self.operands

    def on_execute(self, inputs, outputs):
        self.launch()


@opencl_execution("MatMul")
class MatMul(_GemmExecution):
    """``Y = A @ B`` (numpy.matmul: 1-D operands promoted, batch dims broadcast), float32.

    A: (..., M, K), B: (..., K, N) -> Y: (..., M, N). When B has no batch (2-D or leading
    ones) A's batch folds into M: one (batch*M, K) x (K, N) GEMM. Otherwise each output batch
    reads A and B at a stride per batch, or through a table of offsets for general broadcasts.
    """

    def on_resize(self, inputs, outputs):
        a, b = self._operands(inputs)
        y = outputs[0]
        m, n, k, nb, aoff, boff = matmul_geometry(a.shape, b.shape)
        strides, offsets = matmul_batch(m, n, k, nb, aoff, boff)
        table = None if offsets is None else self.backend.constant(offsets.astype(np.int32))
        self.launch, self.keep = gemm_launch(
            self.backend, a, b, y, m, n, k, lda=k, ldb=n, ldy=n, batch=nb, strides=strides, table=table
        )


@opencl_execution("Gemm")
class Gemm(_GemmExecution):
    """``Y = alpha * A' @ B' + beta * C`` (A' = A.T if transA, B' = B.T if transB), float32.

    A: (M, K) or (K, M); B: (K, N) or (N, K); C unidirectionally broadcast to (M, N): (),
    (N,), (1, N), (M, 1), (M, N). The transposes are read in place by the kernel; C is read
    with row/column strides (0 where broadcast).
    """

    def on_resize(self, inputs, outputs):
        a, b = self._operands(inputs)
        y = outputs[0]
        beta = float(self.attrs["beta"])
        c = inputs[2] if len(inputs) > 2 and inputs[2] is not None and beta != 0.0 else None
        c = c if c is None else self.backend.fp32_operand(c, self.input_infos[2])
        self.operands.append(c)  # kept alive: the launch reads these buffers
        mnk, kw = gemm_problem(self.attrs, a.shape, b.shape, y.shape, None if c is None else c.shape)
        self.launch, self.keep = gemm_launch(self.backend, a, b, y, *mnk, c=c, **kw)

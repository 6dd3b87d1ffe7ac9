"""The numba code of ``gemm.py``'s kernel: an intrinsic calling ``cblas_sgemm`` at an address
given at run time, and the product-plus-epilogue kernel, at module level so that numba's
cache recognises the kernel in every process. Imported only when the kernel is built
(``gemm._build``): importing it imports numba and llvmlite."""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.extending import intrinsic

ROW_MAJOR, NO_TRANS = 101, 111  # CBLAS_ORDER.CblasRowMajor, CBLAS_TRANSPOSE.CblasNoTrans (cblas.h)


def _sgemm_call(builder, args, width: int) -> None:
    fn, m, n, k, a, lda, b, ldb, c, ldc = args
    i32, iw, f32 = ir.IntType(32), ir.IntType(width), ir.FloatType()
    fp = f32.as_pointer()
    fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, iw, iw, iw, f32, fp, iw, fp, iw, f32, fp, iw])
    callee = builder.inttoptr(fn, fnty.as_pointer())

    def n_(v):
        return builder.trunc(v, iw) if width < 64 else v

    one, zero = ir.Constant(f32, 1.0), ir.Constant(f32, 0.0)
    consts = [ir.Constant(i32, ROW_MAJOR), ir.Constant(i32, NO_TRANS), ir.Constant(i32, NO_TRANS)]
    ptr = [builder.inttoptr(v, fp) for v in (a, b, c)]
    builder.call(callee, [*consts, n_(m), n_(n), n_(k), one, ptr[0], n_(lda), ptr[1], n_(ldb), zero, ptr[2], n_(ldc)])


def _intrinsic(width: int):
    @intrinsic
    def sgemm(typingctx, fn, m, n, k, a, lda, b, ldb, c, ldc):
        """``C = A @ B`` by the ``cblas_sgemm`` at address ``fn`` (row-major, no transposes,
        alpha 1, beta 0), integers of ``width`` bits (64: an ILP64 BLAS); all arguments int64."""

        def codegen(context, builder, sig, args):
            _sgemm_call(builder, args, width)
            return context.get_dummy_value()

        return numba.void(fn, m, n, k, a, lda, b, ldb, c, ldc), codegen

    return sgemm


sgemm64, sgemm32 = _intrinsic(64), _intrinsic(32)


def product(sgemm, ilp64, w, x, y, b, r0, r1, xc0, yc0, cols, act, a0, a1):  # pragma: no cover - compiled
    """``gemm.py``'s kernel (its module doc)."""
    batch, k, lx = x.shape[0], x.shape[1], x.shape[2]
    mw, ly = y.shape[1], y.shape[2]
    yf = y.reshape(-1)
    m = b.shape[0]
    for j in range(batch):
        wj = j if w.shape[0] > 1 else 0
        wa = w.ctypes.data + ((wj * w.shape[1] + r0) * k) * 4
        xa = x.ctypes.data + (j * k * lx + xc0) * 4
        ya = y.ctypes.data + ((j * mw + r0) * ly + yc0) * 4
        if ilp64:
            sgemm64(sgemm, r1 - r0, cols, k, wa, k, xa, lx, ya, ly)
        else:
            sgemm32(sgemm, r1 - r0, cols, k, wa, k, xa, lx, ya, ly)
        if m > 0:
            for r in range(r0, r1):
                _span_jit(yf, (j * mw + r) * ly + yc0, cols, b[r % m], act, a0, a1)  # noqa: F821


def build(numba_module, span):
    """``product`` compiled for ``(int64, bool, float32 3-d x 3, float32 1-d, int64 x 6,
    float32 x 2)``, releasing the GIL, cached; ``span``: the epilogue's numba dispatcher."""
    globals()["_span_jit"] = span
    f3, i8, f = numba_module.float32[:, :, ::1], numba_module.int64, numba_module.float32
    sig = numba_module.void(i8, numba_module.boolean, f3, f3, f3, numba_module.float32[::1], i8, i8, i8, i8, i8, i8, f, f)
    return numba_module.njit(sig, nogil=True, cache=True)(product)

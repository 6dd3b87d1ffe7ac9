"""Vectors of 16 float32 lanes in numba code: a numba type whose LLVM type is ``<16 x float>``
and the intrinsics that make and use it, for kernels whose loops numba's own code generation
leaves scalar (``packed_gemm_jit.py``). Imported only when such a kernel is built: importing
it imports numba and llvmlite.

LLVM lowers each operation to the machine's vectors: one 512-bit register with AVX-512, two
256-bit ones with AVX2, four 128-bit ones with SSE or NEON; the results are the same on every
machine (each lane is one IEEE float32 operation; ``vfma`` is one fused multiply-add).

- ``vload(arr, i, count)``: ``arr[i : i + 16]`` as a vector, lanes ``>= count`` zero (a masked
  load, LLVM ``llvm.masked.load``; no lane past ``count`` is read); ``vstore(arr, i, v, count)``
  the masked store; ``arr`` is a 1-D contiguous float32 array, ``i`` and ``count`` int64.
  ``vload_all(arr, i)``, ``vstore_all(arr, i, v)``: all 16 lanes, plain (unmasked) accesses.
- ``vbcast(arr, i)``: ``arr[i]`` in every lane; ``vsplat(s)``: float32 ``s`` in every lane;
  ``vzero()``.
- ``vfma(a, b, c)``: ``a * b + c`` rounded once (``llvm.fma``); ``vadd``, ``vmul``.
- ``vless_sel(a, b, c, d)``: lane by lane ``a < b ? c : d``, an ordered compare, so a NaN in
  ``a`` or ``b`` gives ``d`` (as ``c if a < b else d`` in Python).
- ``activate(v, act, a0, a1)``: the fused activation ``act`` (``kernels/epilogue.py``'s codes,
  formulas and NaN behaviour) lane by lane.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

LANES = 16
_F = ir.FloatType()
_VT = ir.VectorType(_F, LANES)
_I32 = ir.IntType(32)
_IV = ir.VectorType(_I32, LANES)
_MASK = ir.VectorType(ir.IntType(1), LANES)


class F32x16(types.Type):
    """numba's type of a ``<16 x float>`` value (held in registers; no array, no memory)."""

    def __init__(self):
        super().__init__(name="f32x16")


f32x16 = F32x16()


@register_model(F32x16)
class _Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, _VT)


def _address(context, builder, aryty, ary, idx):
    a = context.make_array(aryty)(context, builder, ary)
    item = cgutils.get_item_pointer(context, builder, aryty, a, [idx], wraparound=False)
    return builder.bitcast(item, _VT.as_pointer())


def _splat(builder, value, vt=_VT):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(_IV, [0] * LANES))


def _mask(builder, count):
    c = builder.trunc(count, _I32) if count.type.width > 32 else count
    return builder.icmp_signed("<", ir.Constant(_IV, list(range(LANES))), _splat(builder, c, _IV))


def _function(builder, name, ret, args):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


@intrinsic
def vload(typingctx, arr, idx, count):
    def codegen(context, builder, sig, args):
        fn = _function(builder, "llvm.masked.load.v16f32.p0", _VT, [_VT.as_pointer(), _I32, _MASK, _VT])
        ptr = _address(context, builder, sig.args[0], args[0], args[1])
        return builder.call(fn, [ptr, ir.Constant(_I32, 4), _mask(builder, args[2]), ir.Constant(_VT, [0.0] * LANES)])

    return f32x16(arr, idx, count), codegen


@intrinsic
def vstore(typingctx, arr, idx, v, count):
    def codegen(context, builder, sig, args):
        fn = _function(builder, "llvm.masked.store.v16f32.p0", ir.VoidType(), [_VT, _VT.as_pointer(), _I32, _MASK])
        ptr = _address(context, builder, sig.args[0], args[0], args[1])
        builder.call(fn, [args[2], ptr, ir.Constant(_I32, 4), _mask(builder, args[3])])
        return context.get_dummy_value()

    return types.void(arr, idx, v, count), codegen


@intrinsic
def vload_all(typingctx, arr, idx):
    def codegen(context, builder, sig, args):
        return builder.load(_address(context, builder, sig.args[0], args[0], args[1]), align=4)

    return f32x16(arr, idx), codegen


@intrinsic
def vstore_all(typingctx, arr, idx, v):
    def codegen(context, builder, sig, args):
        builder.store(args[2], _address(context, builder, sig.args[0], args[0], args[1]), align=4)
        return context.get_dummy_value()

    return types.void(arr, idx, v), codegen


@intrinsic
def prefetch(typingctx, arr, idx):
    """Ask for the cache line of ``arr[idx]`` (``llvm.prefetch``: read, keep in all levels); an
    index past the array is harmless (a prefetch never faults)."""

    def codegen(context, builder, sig, args):
        i8p = ir.IntType(8).as_pointer()
        fn = _function(builder, "llvm.prefetch.p0", ir.VoidType(), [i8p, _I32, _I32, _I32])
        ptr = builder.bitcast(_address(context, builder, sig.args[0], args[0], args[1]), i8p)
        builder.call(fn, [ptr, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return types.void(arr, idx), codegen


@intrinsic
def vbcast(typingctx, arr, idx):
    def codegen(context, builder, sig, args):
        a = context.make_array(sig.args[0])(context, builder, args[0])
        item = cgutils.get_item_pointer(context, builder, sig.args[0], a, [args[1]], wraparound=False)
        return _splat(builder, builder.load(item))

    return f32x16(arr, idx), codegen


@intrinsic
def vsplat(typingctx, s):
    def codegen(context, builder, sig, args):
        return _splat(builder, args[0])

    return f32x16(types.float32), codegen


@intrinsic
def vzero(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(_VT, [0.0] * LANES)

    return f32x16(), codegen


@intrinsic
def vfma(typingctx, a, b, c):
    def codegen(context, builder, sig, args):
        return builder.call(_function(builder, "llvm.fma.v16f32", _VT, [_VT, _VT, _VT]), list(args))

    return f32x16(a, b, c), codegen


@intrinsic
def vadd(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.fadd(args[0], args[1])

    return f32x16(a, b), codegen


@intrinsic
def vmul(typingctx, a, b):
    def codegen(context, builder, sig, args):
        return builder.fmul(args[0], args[1])

    return f32x16(a, b), codegen


@intrinsic
def vless_sel(typingctx, a, b, c, d):
    def codegen(context, builder, sig, args):
        return builder.select(builder.fcmp_ordered("<", args[0], args[1]), args[2], args[3])

    return f32x16(a, b, c, d), codegen


@numba.njit(inline="always", cache=True)
def activate(v, act, a0, a1):  # pragma: no cover - compiled
    """``act(v)`` lane by lane (module doc): the operations of ``epilogue._span`` in its order."""
    if act == 0:
        return v
    zero = vsplat(np.float32(0.0))
    if act == 1:
        return vless_sel(v, zero, zero, v)
    if act == 2:
        lo, hi = vsplat(a0), vsplat(a1)
        return vless_sel(v, lo, lo, vless_sel(hi, v, hi, v))
    if act == 3:
        return vless_sel(v, zero, vmul(v, vsplat(a0)), v)
    one = vsplat(np.float32(1.0))
    if act == 4:
        t = vadd(vmul(v, vsplat(a0)), vsplat(a1))
        return vless_sel(t, zero, zero, vless_sel(one, t, one, t))
    t = vadd(vmul(v, vsplat(np.float32(1.0 / 6.0))), vsplat(np.float32(0.5)))
    return vadd(vmul(vmul(v, vless_sel(t, zero, zero, vless_sel(one, t, one, t))), vsplat(a0)), vsplat(a1))


def _select_mask(builder, cond, mask):
    return builder.select(cond, mask, ir.Constant(_MASK, [0] * LANES))


@intrinsic
def transpose16(typingctx, src, so, ss, nrows, nlanes, dst, do, ds):
    """Transpose an ``nrows x nlanes`` block (``<= 16`` each): row ``i`` of ``src`` starts at
    ``so + i*ss``; row ``j < nlanes`` of the result, ``nrows`` lanes (``dst[do + j*ds + i] =
    src[so + i*ss + j]``), is stored at ``do + j*ds``. Nothing outside the block is read or
    written (masked loads and stores). Four stages of two-source shuffles, each swapping the
    off-diagonal sub-blocks of one size (8, 4, 2, 1)."""

    def codegen(context, builder, sig, args):
        sa, so_, ss_, nr, nl, da, do_, ds_ = args
        i64 = ir.IntType(64)
        load = _function(builder, "llvm.masked.load.v16f32.p0", _VT, [_VT.as_pointer(), _I32, _MASK, _VT])
        store = _function(builder, "llvm.masked.store.v16f32.p0", ir.VoidType(), [_VT, _VT.as_pointer(), _I32, _MASK])
        sarr = context.make_array(sig.args[0])(context, builder, sa)
        darr = context.make_array(sig.args[5])(context, builder, da)
        lanes_in, lanes_out = _mask(builder, nl), _mask(builder, nr)
        zero = ir.Constant(_VT, [0.0] * LANES)
        rows = []
        for i in range(LANES):
            idx = builder.add(so_, builder.mul(ss_, ir.Constant(i64, i)))
            ptr = builder.bitcast(
                cgutils.get_item_pointer(context, builder, sig.args[0], sarr, [idx], wraparound=False), _VT.as_pointer()
            )
            m = _select_mask(builder, builder.icmp_signed("<", ir.Constant(i64, i), nr), lanes_in)
            rows.append(builder.call(load, [ptr, ir.Constant(_I32, 4), m, zero]))
        for b in (8, 4, 2, 1):
            lo = [j if not (j & b) else LANES + j - b for j in range(LANES)]
            hi = [j + b if not (j & b) else LANES + j for j in range(LANES)]
            for i in range(LANES):
                if i & b:
                    continue
                r0, r1 = rows[i], rows[i + b]
                rows[i] = builder.shuffle_vector(r0, r1, ir.Constant(_IV, lo))
                rows[i + b] = builder.shuffle_vector(r0, r1, ir.Constant(_IV, hi))
        for j in range(LANES):
            idx = builder.add(do_, builder.mul(ds_, ir.Constant(i64, j)))
            ptr = builder.bitcast(
                cgutils.get_item_pointer(context, builder, sig.args[5], darr, [idx], wraparound=False), _VT.as_pointer()
            )
            m = _select_mask(builder, builder.icmp_signed("<", ir.Constant(i64, j), nl), lanes_out)
            builder.call(store, [rows[j], ptr, ir.Constant(_I32, 4), m])
        return context.get_dummy_value()

    return types.void(src, so, ss, nrows, nlanes, dst, do, ds), codegen

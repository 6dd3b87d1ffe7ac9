"""The numba code of ``spin.py``'s kernel: the intrinsics (an acquire load, the CPU's
spin-wait hint, ``sched_yield``) and the polling loop, at module level so that numba's
cache recognises the kernel in every process. Imported only when the kernel is built
(``spin._build``): importing it imports numba and llvmlite."""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import cgutils
from numba.extending import intrinsic

from mnnpy.backends.cpu.kernels.spin import _HINT, YIELD_EVERY


@intrinsic
def load_acquire(typingctx, arr, idx):
    """``arr[idx]`` (int64) as an LLVM ``load atomic ... acquire``."""

    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        return builder.load_atomic(ptr, "acquire", 8)

    return numba.int64(arr, idx), codegen


@intrinsic
def relax(typingctx):
    """The machine's spin-wait hint (``_HINT``; nothing where it has none)."""

    def codegen(context, builder, sig, args):
        if _HINT is not None:
            name, consts = _HINT
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i32] * len(consts)), name)
            builder.call(fn, [ir.Constant(i32, c) for c in consts])
        return context.get_dummy_value()

    return numba.void(), codegen


@intrinsic
def yield_cpu(typingctx):
    """``sched_yield()`` (POSIX)."""

    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(fn, [])
        return context.get_dummy_value()

    return numba.void(), codegen


@intrinsic
def store_release(typingctx, arr, idx, value):
    """``arr[idx] = value`` (int64) as an LLVM ``store atomic ... release``."""

    def codegen(context, builder, sig, args):
        aryty = sig.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        builder.store_atomic(args[2], ptr, "release", 8)
        return context.get_dummy_value()

    return numba.void(arr, idx, value), codegen


@intrinsic
def call_entry(typingctx, table, j):
    """Call entry ``j`` of the table at address ``table`` (int64 triples: a ``void f(int64 *,
    double *)`` function's address and its two argument blocks' addresses, ``native.py``)."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        base = builder.inttoptr(args[0], i64.as_pointer())
        first = builder.mul(args[1], ir.Constant(i64, 3))
        fn, ip, fp = (builder.load(builder.gep(base, [builder.add(first, ir.Constant(i64, k))])) for k in range(3))
        fnty = ir.FunctionType(ir.VoidType(), [i64.as_pointer(), ir.DoubleType().as_pointer()])
        callee = builder.inttoptr(fn, fnty.as_pointer())
        builder.call(callee, [builder.inttoptr(ip, i64.as_pointer()), builder.inttoptr(fp, ir.DoubleType().as_pointer())])
        return context.get_dummy_value()

    return numba.void(table, j), codegen


@intrinsic
def entry_word(typingctx, table, i):
    """Word ``i`` (int64) of the table at address ``table``."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        return builder.load(builder.gep(builder.inttoptr(args[0], i64.as_pointer()), [args[1]]))

    return numba.int64(table, i), codegen


@numba.njit(inline="always")
def run_calls(flags, address, n, base, mine, first, stride, count):  # pragma: no cover - compiled
    """Make the ``n`` calls of the table at ``address`` in order; an entry whose function
    address is 0 is a barrier (``spin.py``'s module doc): ``flags[mine] = base + its index``,
    then wait until ``flags[first + i*stride] >= base + its index`` for every ``i < count``."""
    for j in range(n):
        if entry_word(address, 3 * j) != 0:
            call_entry(address, j)
            continue
        target = base + entry_word(address, 3 * j + 1)
        store_release(flags, mine, target)
        k = 0
        i = 0
        while i < count:
            if load_acquire(flags, first + i * stride) >= target:
                i += 1
                continue
            relax()
            if k % YIELD_EVERY == YIELD_EVERY - 1:
                yield_cpu()
            k += 1


def run_table(flags, table, n, base_slot, mine, first, stride, count):  # pragma: no cover - compiled
    """``spin.py``'s ``run_table`` (its module doc): the calling thread's share of a program."""
    run_calls(flags, table, n, flags[base_slot], mine, first, stride, count)


def build_table(numba_module=numba):
    """``run_table`` compiled for ``(int64[::1], int64 x 7)``, releasing the GIL, cached."""
    i8 = numba_module.int64
    return numba_module.njit(numba_module.void(i8[::1], *(i8,) * 7), nogil=True, cache=True)(run_table)


def serve(flags, posted, done, park, calls, table, limit, settle, grace, base_slot, mine, first, stride, count):  # noqa: E501
    """``spin.py``'s ``serve`` (its module doc)."""
    k = 0
    parked = 0
    while k < limit:
        now = load_acquire(flags, posted)
        if now != flags[done]:
            n = flags[calls]
            if n == 0:
                for _ in range(settle):
                    relax()
                return True
            run_calls(flags, flags[table], n, flags[base_slot], mine, first, stride, count)
            store_release(flags, done, now)
            k = 0
            parked = 0
            continue
        if load_acquire(flags, park) != 0:
            parked += 1
            if parked > grace:
                return False
        else:
            parked = 0
        relax()
        if k % YIELD_EVERY == YIELD_EVERY - 1:
            yield_cpu()
        k += 1
    return False


def build_serve(numba_module=numba):
    """``serve`` compiled for ``(int64[::1], int64 x 13) -> bool``, releasing the GIL, cached."""
    i8 = numba_module.int64
    return numba_module.njit(numba_module.boolean(i8[::1], *(i8,) * 13), nogil=True, cache=True)(serve)


def spin(flags, slot, value_slot, park, limit, settle):  # pragma: no cover - compiled
    """``spin.py``'s kernel (its module doc)."""
    value = flags[value_slot]
    for k in range(limit):
        if load_acquire(flags, slot) != value:
            for _ in range(settle):
                relax()
            return True
        if load_acquire(flags, park) != 0:
            return False
        relax()
        if k % YIELD_EVERY == YIELD_EVERY - 1:
            yield_cpu()
    return False


def build(numba_module=numba):
    """``spin`` compiled for ``(int64[::1], int64 x 5) -> bool``, releasing the GIL, cached."""
    i8 = numba_module.int64
    return numba_module.njit(numba_module.boolean(i8[::1], i8, i8, i8, i8, i8), nogil=True, cache=True)(spin)

"""Spin-waiting on a flag without the GIL (numba): how the CPU backend's worker threads
(``worker_pool.py``) see a task or a finished task within microseconds.

``flags: (K,) int64`` (C-contiguous), shared by the threads; ``spin(flags, slot, value,
park, limit, settle)`` returns ``True`` once ``flags[slot] != value`` (after ``settle``
more polls), ``False`` when ``flags[park] != 0`` or after ``limit`` polls. Each poll is
an acquire load (LLVM ``load atomic ... acquire``: the compiler reads memory every time and
later reads see what the writer wrote before) followed by the CPU's spin-wait hint (x86
``pause``, Arm ``yield``), which lets a sibling hardware thread run; every ``YIELD_EVERY``
polls the thread calls ``sched_yield`` (POSIX), so a thread the scheduler queued on this
CPU runs instead of waiting for the end of the time slice. The kernel releases the GIL.
"""

from __future__ import annotations

import platform

from mnnpy.backends.cpu.kernels import compiled

# the spin-wait hint as an LLVM intrinsic (name, constant arguments) per machine
_HINT = {
    "x86_64": ("llvm.x86.sse2.pause", ()),
    "amd64": ("llvm.x86.sse2.pause", ()),
    "aarch64": ("llvm.aarch64.hint", (1,)),  # HINT #1 = YIELD
    "arm64": ("llvm.aarch64.hint", (1,)),
}.get(platform.machine().lower())


YIELD_EVERY = 256  # polls between two sched_yield calls (about 7 µs on the reference VM)


def _build(numba):
    from llvmlite import ir
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def load_acquire(typingctx, arr, idx):
        def codegen(context, builder, sig, args):
            aryty = sig.args[0]
            ary = context.make_array(aryty)(context, builder, args[0])
            ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
            return builder.load_atomic(ptr, "acquire", 8)

        return numba.int64(arr, idx), codegen

    @intrinsic
    def relax(typingctx):
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
        def codegen(context, builder, sig, args):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
            builder.call(fn, [])
            return context.get_dummy_value()

        return numba.void(), codegen

    def spin(flags, slot, value, park, limit, settle):  # pragma: no cover - compiled
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

    i8 = numba.int64
    return numba.njit(numba.boolean(i8[::1], i8, i8, i8, i8, i8), nogil=True, cache=True)(spin)


def kernel():
    """The compiled ``spin(flags, slot, value, park, limit, settle) -> bool`` (see the module doc);
    ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("spin", _build)

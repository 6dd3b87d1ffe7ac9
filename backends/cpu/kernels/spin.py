"""Spin-waiting on a flag without the GIL (numba): how the CPU backend's worker threads
(``worker_pool.py``) see a task or a finished task within microseconds.

``flags: (K,) int64`` (C-contiguous), shared by the threads; ``spin(flags, slot,
value_slot, park, limit, settle)`` returns ``True`` once ``flags[slot] != flags[value_slot]``
(the value read once, at the start; after ``settle`` more polls), ``False`` when
``flags[park] != 0`` or after ``limit`` polls. Every argument but the flags' contents stays
the same from call to call, so callers bind it once (``native.bind``). Each poll is
an acquire load (LLVM ``load atomic ... acquire``: the compiler reads memory every time and
later reads see what the writer wrote before) followed by the CPU's spin-wait hint (x86
``pause``, Arm ``yield``), which lets a sibling hardware thread run; every ``YIELD_EVERY``
polls the thread calls ``sched_yield`` (POSIX), so a thread the scheduler queued on this
CPU runs instead of waiting for the end of the time slice. The kernel releases the GIL.

``serve(flags, posted, done, park, calls, table, limit, settle, grace, base, mine, first, stride,
count)`` is a worker thread's wait for tasks (``worker_pool.py``): it polls as ``spin`` does
until ``flags[posted] != flags[done]``; a task with ``flags[calls] == 0`` is a Python callable,
and ``serve`` returns ``True`` (after ``settle`` polls) for the caller to run it; otherwise the
task is ``flags[calls]`` native calls, whose table (int64 triples: the address of a ``void
f(int64 *, double *)`` and of its two argument blocks, ``native.NativeKernel.bind``) is at
address ``flags[table]``: ``serve`` makes the calls in order, stores ``flags[done] =
flags[posted]`` (a release store: the caller that reads it sees what the calls wrote) and
polls again, without returning to Python, so the thread never waits for the GIL. ``False``:
parked for ``grace`` polls in a row, or ``limit`` polls without a task.

A table may hold barriers: an entry whose function address is 0 and whose second word is the
barrier's index ``j`` (1, 2, ... within the table). The thread stores ``flags[mine] =
flags[base] + j`` (its progress: a release store) and polls until every participant's progress
``flags[first + i*stride]`` (``i < count``: the workers' and the caller's slots) is at least
that. This is how a program (``worker_pool.Program``: the native calls of several ops, each op
a phase all threads finish before any starts the next) runs without returning to Python
between its ops. ``flags[base]`` grows by the program's barrier count each time one is
posted, so progress values only grow. ``run_table(flags, table, n, base, mine, first, stride,
count)`` runs the calling thread's own table the same way.
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
    """The compiled ``spin``: its code and intrinsics live at module level in ``spin_jit``
    (imported now: it imports numba), so that numba's cache finds it again in the next
    process (defined inside a function, the intrinsics were new objects in every process,
    and the kernel was compiled anew each time: about 0.1-0.4 s of every first session)."""
    from mnnpy.backends.cpu.kernels import spin_jit

    return spin_jit.build(numba)


def _build_serve(numba):
    from mnnpy.backends.cpu.kernels import spin_jit

    return spin_jit.build_serve(numba)


def _build_table(numba):
    from mnnpy.backends.cpu.kernels import spin_jit

    return spin_jit.build_table(numba)


def table_kernel():
    """The compiled ``run_table(flags, table, n, base, mine, first, stride, count)`` (module
    doc); ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("run_table", _build_table)


def serve_kernel():
    """The compiled ``serve(flags, posted, done, park, calls, table, limit, settle, grace, base, mine,
    first, stride, count) -> bool``
    (see the module doc); ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("serve", _build_serve)


def kernel():
    """The compiled ``spin(flags, slot, value_slot, park, limit, settle) -> bool`` (see the module doc);
    ``None`` where numba cannot compile here (a warning was given)."""
    return compiled("spin", _build)

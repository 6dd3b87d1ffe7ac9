"""A CPU partition's consecutive native ops as one ``worker_pool.Program`` each (at resize).

Per op, a run of the partition costs about 4-5 µs outside the kernels: Python calls the op's
``on_execute``, which hands its tasks to the pool, runs its own share and waits for the
worker's (a round trip of two tiny native tasks over the pool: 4.6 µs on the 2-core VM);
MobileNetV2 makes 51 such hand-overs a run. An op whose run is nothing but native calls in
phases (``native_phases()``: lists of tasks, each bound by ``native.NativeKernel.bind``, run
one list after the other as ``parallel.run_phases`` runs them) joins its neighbours of the same
kind into a Program: every thread gets its share of every phase in one table and the threads
meet at a barrier after each phase (``kernels/spin.py``), so a run of the Program is one
hand-over and no Python between its ops (the same split of each phase as ``WorkerPool.run``,
so the outputs are bit-identical).

An Execution opts in with a ``native_phases()`` method returning its phases (``[]``: nothing
to do, as for a ``Relu`` fused into the op before it), or ``None`` where this resize's run does
more than that (weights given at run time, an activation applied afterwards in NumPy);
``segments`` leaves such ops, and runs of fewer than ``MIN_OPS``, to their ``on_execute``. One
whose run has a Python step after its phases gives it as ``native_after()`` (Winograd: the
check that its input was finite, with the exact sums where it was not): its Program ends with
it and the step runs right after the Program. Where a run needs each op on its own (a deadline checked before each
op, or an ``on_execute`` replaced on the instance, as ``tools/profile.py`` times them),
``execute_partition`` calls every ``on_execute`` instead.
"""

from __future__ import annotations

MIN_OPS = 2  # ops from which a run of native ops becomes a Program (one op: its own hand-over is the same)


def phases_of(exe) -> list | None:
    """``exe``'s non-empty phases where every task in them is a native call, else ``None``."""
    get = getattr(exe, "native_phases", None)
    phases = get() if get is not None else None
    if phases is None:
        return None
    phases = [list(p) for p in phases if len(p)]
    if any(getattr(t, "native", None) is None for p in phases for t in p):
        return None
    return phases


def segments(runs, pool) -> list[tuple]:
    """``runs`` (``PartitionStep.runs``: (Execution, inputs, outputs)) as ``(Program, [runs],
    after)`` for each stretch of at least ``MIN_OPS`` consecutive native ops (``pool.program``;
    ``after``: the last op's ``native_after()`` step or ``None``), else ``(None, run, None)``, in
    order."""
    out: list[tuple] = []
    group: list = []
    phases: list = []

    def flush(after=None):
        program = pool.program(list(phases)) if len(group) >= MIN_OPS and phases else None
        if program is not None:
            out.append((program, list(group), after))
        else:
            out.extend((None, r, None) for r in group)
        group.clear()
        phases.clear()

    for run in runs:
        ph = phases_of(run[0])
        if ph is None:
            flush()
            out.append((None, run, None))
            continue
        group.append(run)
        phases.extend(ph)
        get = getattr(run[0], "native_after", None)
        after = get() if get is not None else None
        if after is not None:
            flush(after)
    flush()
    return out


def replaced(segs) -> bool:
    """Whether an op of a Program has its ``on_execute`` replaced on the instance (a profiler's
    timer): the run then calls each op's ``on_execute``."""
    return any("on_execute" in vars(exe) for program, runs, _ in segs if program is not None for exe, _, _ in runs)

"""Splitting elementwise work over the CPU backend's pool.

Large elementwise ops are memory-bound and numpy runs each on one core; cut into one
block per thread (numpy releases the GIL inside a ufunc) they use both cores of the
reference machine. Blocks are views fixed at resize: ``on_execute`` only submits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

PARALLEL_ELEMENTS = 1 << 18  # outputs from which an elementwise op is split over the pool
PARALLEL_MIN = 1 << 22  # elements of copy-like work (im2col, pooling taps) split over the pool (measured)


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` ranges cutting ``range(n)`` into at most ``parts`` near-equal pieces."""
    parts = max(1, min(parts, n))
    edges = [n * i // parts for i in range(parts + 1)]
    return [(edges[i], edges[i + 1]) for i in range(parts)]


def parallel(backend, tasks) -> None:
    """Run callables on the backend's pool (``worker_pool.WorkerPool``), the last share on
    this thread; wait for all."""
    if len(tasks) == 1:
        tasks[0]()
        return
    backend.pool.run(tasks)


def run_all(steps) -> None:
    """Call each of ``steps`` in order (one task of several steps, on one thread)."""
    for s in steps:
        s()


def sequence(steps):
    """One task calling ``steps`` in order (``run_all``); where every step is a native call
    (``native``: int64 triples, ``native.NativeKernel.bind``) the task has their triples
    concatenated as its own ``native``, so a worker runs it without Python (``worker_pool.py``)."""
    task = functools.partial(run_all, steps)
    natives = [getattr(s, "native", None) for s in steps]
    if steps and all(n is not None for n in natives):
        task.native = np.concatenate(natives)
    return task


def run_phases(backend, phases) -> None:
    """``parallel`` over each list of tasks in ``phases``, one list after the other."""
    for tasks in phases:
        parallel(backend, tasks)


def workers(backend, size: int) -> int:
    """How many threads to split ``size`` elements of memory-bound work over."""
    return getattr(backend, "num_threads", 1) if size >= PARALLEL_MIN else 1


def split_broadcast(out: np.ndarray, inputs: Sequence[np.ndarray | None], parts: int) -> list[tuple]:
    """``[(out_i, [in_i...]), ...]``: ``out`` cut into ``parts`` blocks along its first axis of
    at least ``parts`` elements, each input cut the same way where it is not broadcast there.

    Returns one block (everything) when ``parts`` is 1, ``out`` is small, or no axis fits.
    """
    if parts <= 1 or out.size < PARALLEL_ELEMENTS:
        return [(out, list(inputs))]
    axis = next((a for a, d in enumerate(out.shape) if d >= parts), None)
    if axis is None:
        return [(out, list(inputs))]
    n = out.shape[axis]
    cuts = [n * i // parts for i in range(parts + 1)]
    blocks = []
    for lo, hi in zip(cuts, cuts[1:]):
        sl = (slice(None),) * axis + (slice(lo, hi),)
        ins = []
        for x in inputs:
            if x is None or np.ndim(x) == 0:
                ins.append(x)
                continue
            k = axis - (out.ndim - x.ndim)  # the input's own axis under numpy's right alignment
            if k < 0 or x.shape[k] == 1:
                ins.append(x)
            else:
                ins.append(x[(slice(None),) * k + (slice(lo, hi),)])
        blocks.append((out[sl], ins))
    return blocks


def blocks(backend, fn: Callable, out: np.ndarray, inputs: Sequence[np.ndarray | None]) -> Callable[[], None]:
    """A block-wise call ``fn(out_i, *ins_i)`` over the pool (last block on the calling
    thread), cut at resize (``split_broadcast``); one block is called directly."""
    tasks = [functools.partial(fn, o, *ins) for o, ins in split_broadcast(out, inputs, backend.num_threads)]
    return tasks[0] if len(tasks) == 1 else functools.partial(parallel, backend, tasks)

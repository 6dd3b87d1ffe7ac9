"""A kernel launch fixed at resize: kernel with its arguments set, global and local size.

``on_resize`` creates a ``Launch`` through ``OpenCLBackend.launch``; ``on_execute``
calls it, which only enqueues. Kernels take their logical sizes as arguments and
return early outside them: the global size is the logical size rounded up to a
multiple of the local size (OpenCL 1.2 rule, so no device needs non-uniform groups).
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_GROUP = 64  # work items per group when the kernel gives no preference


def round_up(n: int, m: int) -> int:
    """The smallest multiple of ``m`` that is >= ``n`` (and >= ``m``)."""
    return max(1, -(-int(n) // m)) * m


def default_local(work: Sequence[int], limit: int, group: int = DEFAULT_GROUP) -> tuple[int, ...]:
    """A local size for a logical global size ``work``: powers of two, filled from dim 0
    (the fastest-varying), product at most ``min(group, limit)``."""
    budget = max(1, min(group, limit))
    local = []
    for n in work:
        size = 1
        while size * 2 <= budget and size < n:
            size *= 2
        local.append(size)
        budget //= size
    return tuple(local)


class Launch:
    """One enqueue of ``kernel`` over ``work`` (logical global size) in groups of ``local``."""

    __slots__ = ("owner", "kernel", "work", "local", "glob", "enqueue", "key", "event")

    def __init__(self, cl, owner, kernel, work: Sequence[int], local: Sequence[int], key: str = ""):
        self.owner = owner  # enqueues on ``owner.queue``: the backend's queue of the run (timed or not)
        self.kernel = kernel
        self.work = tuple(int(w) for w in work)
        self.key = key
        self.set_local(local)
        self.enqueue = cl.enqueue_nd_range_kernel
        self.event = None  # the ``cl.Event`` of the last enqueue (device_time.py)

    def set_local(self, local: Sequence[int]) -> None:
        self.local = tuple(int(v) for v in local)
        self.glob = tuple(round_up(w, v) for w, v in zip(self.work, self.local))

    def __call__(self) -> None:
        if all(self.work):
            self.event = self.enqueue(self.owner.queue, self.kernel, self.glob, self.local)

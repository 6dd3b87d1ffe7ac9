"""Device time per op and op type of OpenCL runs, from profiling events (a diagnostic, off by default).

``MNNPY_OPENCL_PROFILE=1`` when a session is created (and the device has profiling queues,
``OpenCLRuntime.timed_queue``): its backend enqueues every run on the profiling queue, and
after each partition waits for its kernels (``clFinish``) and adds, for each Execution, the
sum over its kernels (``launch.Launch.event``: the event of its last enqueue) of
``CL_PROFILING_COMMAND_END - CL_PROFILING_COMMAND_START`` (ns of the device's clock), in
ms, to its op type (``OpenCLBackend.profile``) and to its op (``OpenCLBackend.profile_ops``,
keyed by op name and type). The queue is in order, so kernels do not overlap: an op's time
is its kernels' execution, without the gaps between them (launch latency). Uploads,
downloads and fp16 border casts belong to no op and are not counted. Off, nothing changes:
runs use the plain queue and no event is read.

Source: OpenCL 3.0 API specification, "Profiling Operations on Memory Objects and Kernels"
(``clGetEventProfilingInfo``, ``CL_PROFILING_COMMAND_START`` / ``END`` in ns) and
"Command-Queues" (in-order execution); ``device_time.py`` reads the same events for a
partition's device time.
"""

from __future__ import annotations

import os

__all__ = ["PROFILE_ENV", "add_partition", "kernels_ns", "requested"]

PROFILE_ENV = "MNNPY_OPENCL_PROFILE"


def requested() -> bool:
    """Whether ``$MNNPY_OPENCL_PROFILE`` asks for profiling events per kernel."""
    return os.environ.get(PROFILE_ENV, "") not in ("", "0")


def kernels_ns(launches) -> int:
    """Sum of ``end - start`` (ns) of the last events of ``launches`` (``Launch``; those never
    enqueued, of an empty work size, count 0). Their kernels must have completed."""
    total = 0
    for la in launches:
        ev = la.event
        if ev is not None and all(la.work):
            total += max(ev.profile.end - ev.profile.start, 0)
    return total


def add_partition(backend, partition) -> None:
    """Wait for ``partition``'s kernels on ``backend``'s queue, then add each Execution's
    kernel time (ms) to ``backend.profile`` (by op type) and ``backend.profile_ops`` (by op
    name and type)."""
    backend.queue.finish()
    for exe, _, _ in partition.runs:
        ms = kernels_ns(getattr(exe, "launches", ())) / 1e6
        kind, key = exe.op.type, (exe.op.name, exe.op.type)
        backend.profile[kind] = backend.profile.get(kind, 0.0) + ms
        backend.profile_ops[key] = backend.profile_ops.get(key, 0.0) + ms

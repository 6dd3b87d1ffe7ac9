"""Device time of a partition from OpenCL profiling events (``KernelSpan``).

The Runtime has a second queue created with ``CL_QUEUE_PROFILING_ENABLE`` where the device
has it (every OpenCL 1.x device must): a timed run (``OpenCLBackend.timing``, from
``measure_timing``) enqueues there, other runs on the plain queue (on NVIDIA's driver the
profiling queue cost a one-op model 29%: 134 -> 172 µs a run on an H200). Every ``Launch``
keeps the event of its last enqueue.
A partition's device time is the end (``CL_PROFILING_COMMAND_END``) of its last kernel's
event minus the start (``CL_PROFILING_COMMAND_START``) of its first kernel's, in ns of the
device's clock, read with ``clGetEventProfilingInfo`` only when someone asks
(``OpenCLBackend.device_time_us``). The queue is in order, so every other kernel of the
partition ran between the two. Uploads, downloads and the fp16 border casts (enqueued by
``upload`` and ``download_into``, outside ``execute_partition``) are not part of it.

With ``OpenCLBackend.timing`` ``execute_partition`` waits for its kernels (``clFinish``),
so the interval lies inside the host wall time of that call (without it the call only
flushes and nothing is reported). Waiting there rather than at the next blocking read
costs one more wake-up of the host (``bench/bench_device_time.py``). The device's profiling timer has a
resolution (``CL_DEVICE_PROFILING_TIMER_RESOLUTION``, ns) and runs on its own clock, so
the value is clamped to that wall time (NNAPI: on-device time never above in-driver time).

Source: OpenCL 3.0 API specification, "Profiling Operations on Memory Objects and Kernels"
(``clGetEventProfilingInfo``: ``CL_PROFILING_COMMAND_START`` / ``END`` in ns, available once
the command has completed, ``CL_PROFILING_INFO_NOT_AVAILABLE`` otherwise or without
``CL_QUEUE_PROFILING_ENABLE``) and "Command-Queues" (in-order execution).
"""

from __future__ import annotations


class KernelSpan:
    """The first and last kernel launch (``launch.Launch``) of one partition, and the host
    wall time (ns) of its last ``execute_partition`` (0 while none has finished)."""

    __slots__ = ("first", "last", "wall_ns")

    def __init__(self, launches: list):
        self.first = launches[0] if launches else None
        self.last = launches[-1] if launches else None
        self.wall_ns = 0

    def device_time_us(self, cl) -> float | None:
        """End of the last kernel minus start of the first, µs, at most the wall time of the
        call that enqueued them; ``None`` without kernels, before a run finished, or where
        the events have no profiling information (a queue without profiling)."""
        if self.first is None or not self.wall_ns or self.first.event is None or self.last.event is None:
            return None
        try:
            start = self.first.event.get_profiling_info(cl.profiling_info.START)
            end = self.last.event.get_profiling_info(cl.profiling_info.END)
        except cl.Error:  # CL_PROFILING_INFO_NOT_AVAILABLE
            return None
        return min(max(end - start, 0), self.wall_ns) / 1e3

"""Timestamp queries: a query pool (``Timestamps``) and the device time of a partition (``PartitionClock``).

Where the compute queue family has timestamps (``timestampValidBits > 0``), every
partition gets two at resize, always, each in a small command buffer of its own
(``PartitionClock``): ``begin`` resets the pool and writes the first at ``TOP_OF_PIPE``,
``end`` writes the second at ``BOTTOM_OF_PIPE``. A timed run (``VulkanBackend.timing``, on
by default) submits ``[begin, partition, end]`` in one batch (``timed_submit``), an untimed
one the partition's command buffer alone: both submit infos are built at resize. Query
commands follow submission order across the command buffers of a batch, so the interval is
the partition's device time: its staging copies, fp16 border casts and dispatches. Reading
them (``vkGetQueryPoolResults``) happens only when someone asks
(``VulkanBackend.device_time_us``), after the fence wait.

Cost: Mesa's lavapipe (a CPU device) spends about 25 µs on each timestamp write, at the top
of the pipe or the bottom alike, so a timed run costs about 50 µs more per partition there;
an untimed one submits exactly what it did without timestamps (``bench/bench_device_time.py``).
Not measured on a GPU here.

Ticks are masked to ``timestampValidBits`` (the bits above are undefined) and the
difference taken modulo ``2**timestampValidBits`` (a counter that wrapped once in between
still gives the right interval); one tick is ``timestampPeriod`` ns.

The interval lies inside the host wall time of the ``execute_partition`` that submitted
it (the submission follows the host clock's first reading, the fence is waited on before
its second), so it can only come out larger where ``timestampPeriod`` is a rounded value
of the device's real tick length; ``PartitionClock.device_time_us`` clamps it to that
wall time (NNAPI: on-device time never above in-driver time).

Source: Vulkan 1.3 specification, "Queries" ("Timestamp Queries": ``vkCmdWriteTimestamp``,
``timestampValidBits``, ``timestampPeriod``; ``vkCmdResetQueryPool``; query commands on one
query execute in submission order; ``vkGetQueryPoolResults`` with
``VK_QUERY_RESULT_WITH_AVAILABILITY_BIT``).
"""

from __future__ import annotations


class Timestamps:
    """A timestamp query pool of ``count`` queries owned by ``memory`` (a ``ResizeMemory``)."""

    def __init__(self, runtime, memory, count: int):
        vk = self.vk = runtime.vk
        self.device, self.count = runtime.device, int(count)
        self.period_ns = runtime.timestamp_period
        self.mask = (1 << runtime.timestamp_bits) - 1
        info = vk.VkQueryPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=self.count
        )
        self.pool = memory.own("vkDestroyQueryPool", vk.vkCreateQueryPool(self.device, info, None))
        self.data = vk.ffi.new("uint64_t[]", 2 * self.count)  # (value, availability) per query

    def reset(self, cmd) -> None:
        """Record the reset of every query of the pool (before any write in the same submission)."""
        self.vk.vkCmdResetQueryPool(cmd, self.pool, 0, self.count)

    def write(self, cmd, k: int, top: bool = False) -> None:
        """Record a write of query ``k`` when the commands before it have finished (bottom of
        pipe), or, with ``top``, when execution reaches it (top of pipe)."""
        vk = self.vk
        stage = vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT if top else vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
        vk.vkCmdWriteTimestamp(cmd, stage, self.pool, k)

    def ticks(self) -> list[int] | None:
        """The ``count`` timestamps of the last submission, in ticks masked to
        ``timestampValidBits``; ``None`` while any has no result. Never waits."""
        vk = self.vk
        flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WITH_AVAILABILITY_BIT
        n = self.count
        result = vk.lib.vkGetQueryPoolResults(self.device, self.pool, 0, n, 16 * n, self.data, 16, flags)
        if result != 0 or not all(self.data[2 * k + 1] for k in range(n)):  # VK_NOT_READY, or an error
            return None
        return [int(self.data[2 * k]) & self.mask for k in range(n)]

    def intervals_ns(self) -> list[float]:
        """The ``count - 1`` intervals between consecutive timestamps of the last submission,
        ns (empty while results are missing)."""
        t = self.ticks()
        if t is None:
            return []
        return [((b - a) & self.mask) * self.period_ns for a, b in zip(t, t[1:])]


class PartitionClock:
    """Two timestamps around one partition's command buffer, recorded into command buffers
    ``begin`` and ``end`` (allocated by the caller) and the host wall time of its last timed
    submission (see the module docstring)."""

    def __init__(self, runtime, memory, begin, end):
        self.stamps = Timestamps(runtime, memory, 2)
        self.begin, self.end = begin, end
        self.wall_ns = 0  # host wall time of the last timed execute_partition; 0: none finished since
        vk = runtime.vk
        info = vk.VkCommandBufferBeginInfo(sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO)
        vk.vkBeginCommandBuffer(begin, info)
        self.stamps.reset(begin)
        self.stamps.write(begin, 0, top=True)
        vk.vkEndCommandBuffer(begin)
        vk.vkBeginCommandBuffer(end, info)
        self.stamps.write(end, 1)
        vk.vkEndCommandBuffer(end)

    def device_time_us(self) -> float | None:
        """Device time of the last submission, µs, at most its host wall time; ``None`` before one finished."""
        if not self.wall_ns:
            return None
        (span_ns,) = self.stamps.intervals_ns() or (None,)
        if span_ns is None:
            return None
        return min(span_ns, self.wall_ns) / 1e3

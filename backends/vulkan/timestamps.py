"""Timestamp queries: a query pool (``Timestamps``) and the device time of a partition (``PartitionClock``).

Where the compute queue family has timestamps (``timestampValidBits > 0``), every
partition's command buffer is recorded with two of them, always: the first written at
``TOP_OF_PIPE`` as the command buffer's first command after resetting the pool, the second
at ``BOTTOM_OF_PIPE`` as its last one, after the download copies and their barrier. The
interval is the partition's device time: the staging copies, the fp16 border casts and the
dispatches of one submission. Reading them (``vkGetQueryPoolResults``) happens only when
someone asks (``VulkanBackend.device_time_us``), after the fence wait; recording them costs
two commands per submission and no host work per run.

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

VK_NOT_READY = 1  # VkResult of vkGetQueryPoolResults when a query has no result yet


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
    """Two timestamps around one partition's command buffer and the host wall time of its
    last submission (see the module docstring)."""

    def __init__(self, runtime, memory):
        self.stamps = Timestamps(runtime, memory, 2)
        self.wall_ns = 0  # host wall time of the last execute_partition; 0: none finished since resize

    def begin(self, cmd) -> None:
        """Record, as the command buffer's first commands, the pool's reset and the start timestamp."""
        self.stamps.reset(cmd)
        self.stamps.write(cmd, 0, top=True)

    def end(self, cmd) -> None:
        """Record, as the command buffer's last command, the end timestamp."""
        self.stamps.write(cmd, 1)

    def device_time_us(self) -> float | None:
        """Device time of the last submission, µs, at most its host wall time; ``None`` before one finished."""
        if not self.wall_ns:
            return None
        (span_ns,) = self.stamps.intervals_ns() or (None,)
        if span_ns is None:
            return None
        return min(span_ns, self.wall_ns) / 1e3

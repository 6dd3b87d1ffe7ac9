"""GPU time per op type of Vulkan runs, from timestamp queries (a diagnostic, off by default).

``MNNPY_VULKAN_PROFILE=1`` when a session is created: each partition's command buffer also
writes a timestamp (``vkCmdWriteTimestamp``, bottom of pipe) after its uploads and after
every dispatch; after each submission the backend reads them and adds each dispatch's
interval, in ms, to its op type (``VulkanBackend.profile``). Dispatches between two
barriers may overlap on the device, so an interval is the time until that dispatch
finished after the previous one did: the sum over a run is the partition's GPU time, the
split between op types approximate. Costs a little time per dispatch.

Source: Vulkan 1.3 specification, "Queries" (timestamp queries, ``timestampPeriod``,
``timestampValidBits``).
"""

from __future__ import annotations

import os

PROFILE_ENV = "MNNPY_VULKAN_PROFILE"


def requested() -> bool:
    """Whether ``$MNNPY_VULKAN_PROFILE`` asks for timestamps."""
    return os.environ.get(PROFILE_ENV, "") not in ("", "0")


class Timestamps:
    """A timestamp query pool of ``count`` queries owned by ``memory`` (a ``ResizeMemory``)."""

    def __init__(self, runtime, memory, count: int):
        vk = self.vk = runtime.vk
        self.device, self.count = runtime.device, int(count)
        self.period_ns = runtime.timestamp_period
        info = vk.VkQueryPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, queryType=vk.VK_QUERY_TYPE_TIMESTAMP, queryCount=self.count
        )
        self.pool = memory.own("vkDestroyQueryPool", vk.vkCreateQueryPool(self.device, info, None))
        self.data = vk.ffi.new("uint64_t[]", self.count)

    def reset(self, cmd) -> None:
        self.vk.vkCmdResetQueryPool(cmd, self.pool, 0, self.count)

    def write(self, cmd, k: int) -> None:
        self.vk.vkCmdWriteTimestamp(cmd, self.vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, self.pool, k)

    def intervals_ms(self) -> list[float]:
        """The ``count - 1`` intervals between consecutive timestamps of the last submission, ms."""
        vk = self.vk
        flags = vk.VK_QUERY_RESULT_64_BIT | vk.VK_QUERY_RESULT_WAIT_BIT
        result = vk.lib.vkGetQueryPoolResults(self.device, self.pool, 0, self.count, 8 * self.count, self.data, 8, flags)
        if result != 0:
            return []
        t = [int(self.data[k]) for k in range(self.count)]
        return [(b - a) * self.period_ns / 1e6 for a, b in zip(t, t[1:])]

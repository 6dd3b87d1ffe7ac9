"""GPU time per op type of Vulkan runs, from timestamp queries (a diagnostic, off by default).

``MNNPY_VULKAN_PROFILE=1`` when a session is created: each partition's command buffer also
writes a timestamp (``vkCmdWriteTimestamp``, bottom of pipe) after its uploads and after
every dispatch; after each submission the backend reads them and adds each dispatch's
interval, in ms, to its op type (``VulkanBackend.profile``) and to its op
(``VulkanBackend.profile_ops``, keyed by op name and type). Dispatches between two
barriers may overlap on the device, so an interval is the time until that dispatch
finished after the previous one did: the sum over a run is the partition's GPU time, the
split between op types approximate. Costs a little time per dispatch.

The query pool is ``timestamps.Timestamps``. Source: Vulkan 1.3 specification, "Queries"
(timestamp queries, ``timestampPeriod``, ``timestampValidBits``).
"""

from __future__ import annotations

import os

from mnnpy.backends.vulkan.timestamps import Timestamps

__all__ = ["PROFILE_ENV", "Timestamps", "intervals_ms", "requested"]

PROFILE_ENV = "MNNPY_VULKAN_PROFILE"


def requested() -> bool:
    """Whether ``$MNNPY_VULKAN_PROFILE`` asks for timestamps."""
    return os.environ.get(PROFILE_ENV, "") not in ("", "0")


def intervals_ms(stamps: Timestamps) -> list[float]:
    """The intervals between consecutive timestamps of ``stamps``' last submission, ms."""
    return [ns / 1e6 for ns in stamps.intervals_ns()]

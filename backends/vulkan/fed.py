"""Partitions fed device to device: another session's output on this device as an input.

A partition's command buffer, recorded at resize, copies each uploaded tensor from its
staging slot (``commands.record_partition``). When a run feeds one of them a
``DeviceTensor`` of another session on the same Vulkan device (``VulkanBackend.copy_device``),
that copy must come from the other session's device buffer instead, with no host memory in
between (``vkCmdCopyBuffer`` buffer to buffer). The partition is then submitted as a
*variant*: the same dispatches, recorded once more with those uploads copied from their
sources, and kept (at most ``VARIANTS`` per partition, the oldest freed first) for the next
run that feeds the same sources: a chain of two sessions records it at its first run only.
The variant shares the partition's clock and timestamps (``device_time_us`` reads them).
It refers to its sources weakly: closing the source session frees their memory, and a
variant whose source is gone is freed, never submitted.

Synchronisation: the variant begins with the partition's global barrier (every earlier
submission's shader and transfer writes, the source's included, visible to the copies); the
source session's next run cannot start before the submission is waited on (both take turns
on the device's queue, ``mnnpy.device_queue``), and its own barrier orders its writes after
these reads.
"""

from __future__ import annotations

import weakref
from dataclasses import replace

from mnnpy.backends.vulkan.commands import PartitionRecord, record_partition

VARIANTS = 4  # fed variants kept per partition


def fed_variant(backend, part: PartitionRecord, fed: dict) -> PartitionRecord:
    """The variant of ``part`` whose uploads in ``fed`` (upload tensor -> source tensor of
    another resize's device buffer, same dtype and bytes) are copied device to device;
    recorded on first use into a command buffer of ``part``'s resize, then reused."""
    key = tuple((id(t), id(s)) for t, s in fed.items())
    memory = part.uploads[0].memory
    variant = part.variants.pop(key, None)
    if variant is not None and any(w() is not s for w, s in zip(variant.sources, fed.values())):
        _free(backend, memory, variant)  # a source freed, another at its address: record again
        variant = None
    if variant is None:
        (command,) = backend._command_buffers(memory.pool, 1)
        variant = replace(part, command=command, submit_info=None, keep=[], timed_submit=None, fed=dict(fed), variants={})
        record_partition(backend.vk, variant, memory)
        # the sources weakly: a variant keeps no other session's memory alive (its close frees
        # it); one whose source is gone is never submitted again
        variant.fed, variant.sources = {}, [weakref.ref(s) for s in fed.values()]
        while len(part.variants) >= VARIANTS:
            _free(backend, memory, part.variants.pop(next(iter(part.variants))))
    part.variants[key] = variant  # most recently used last
    return variant


def _free(backend, memory, variant: PartitionRecord) -> None:
    backend.vk.vkFreeCommandBuffers(backend.runtime.device, memory.pool, 1, [variant.command])

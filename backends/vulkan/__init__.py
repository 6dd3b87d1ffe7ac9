"""The Vulkan backend (``vulkan`` cffi binding, SPIR-V compute shaders): first slice.

Runtime (``runtime.py``, device choice in ``device.py``): one per process; a discrete GPU
is preferred, ``MNNPY_VULKAN_DEVICE`` selects by type or part of the name; one compute
queue; pipelines built from the committed ``shaders/vulkan/*.spv`` (``pipeline.py``).

Backend (``backend.py``): per session. Each resize gets one device buffer in one
``VkDeviceMemory`` (``memory.py``): the session's memory plan (the arena) followed by the
constants, uploaded once at resize; one host-visible staging buffer holds a slot per
tensor that ``upload`` writes or ``download`` reads. Handles (``VkTensor``) are that
buffer, a byte offset, a shape and a dtype. Executions (``elementwise.py``) describe
their dispatches at resize; the backend records each partition into one command buffer
(``commands.py``: staging copies, pipeline binds, descriptor sets, push constants,
dispatches, buffer memory barriers between dependent dispatches). A run writes the
mapped staging memory, submits each partition once, waits on a fence and reads the
mapped staging memory: nothing is recorded, compiled or allocated per run.

This slice runs float32 elementwise unary and broadcasting binary ops; every other op
falls back to the CPU through the Schedule. ``import mnnpy.backends.vulkan`` does not
import the ``vulkan`` package; creating the Runtime does.
"""

from mnnpy.backends.vulkan.device import DEVICE_ENV
from mnnpy.backends.vulkan.runtime import VulkanRuntime

__all__ = ["DEVICE_ENV", "VulkanRuntime"]

"""The Vulkan backend (``vulkan`` cffi binding, SPIR-V compute shaders).

Files, as in ``backends/opencl``: ``device.py`` (which device), ``runtime.py``
(``VulkanRuntime``: one per process, one compute queue), ``memory.py`` (``ResizeMemory``,
``VkTensor``), ``pipeline.py`` (pipelines from the committed ``shaders/vulkan/*.spv``, cached
in memory and on disk), ``backend.py`` (``VulkanBackend``), ``execution.py``
(``VulkanExecution``, the Executions' base), ``registry.py``; ``commands.py`` (recording and
submission), ``timestamps.py`` (timestamp queries: device time per partition), ``profile.py``
and ``validation.py``; one module per op family (``elementwise``, ``conv``,
``conv_transpose``, ``gemm``, ``movement``, ``norm``, ``pool``, ``reduce``, ``resize``).

Each resize gets one device buffer in one ``VkDeviceMemory``: the session's memory plan (the
arena) followed by the constants, uploaded once at resize; one host-visible staging buffer
holds a slot per tensor that ``upload`` writes or ``download`` reads. Executions describe
their dispatches at resize; the backend records each partition into one command buffer
(staging copies, pipeline binds, descriptor sets, push constants, dispatches, buffer memory
barriers between dependent dispatches). A run writes the mapped staging memory, submits each
partition once, waits on a fence and reads the mapped staging memory: nothing is recorded,
compiled or allocated per run.

``import mnnpy.backends.vulkan`` does not import the ``vulkan`` package; creating the Runtime does.
"""

from mnnpy.backends.vulkan.device import DEVICE_ENV
from mnnpy.backends.vulkan.runtime import VulkanRuntime

__all__ = ["DEVICE_ENV", "VulkanRuntime"]

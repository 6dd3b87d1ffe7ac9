"""The OpenCL backend (pyopencl): one device per process, one pooled device buffer per session.

Files, as in ``backends/vulkan``: ``device.py`` (which device), ``runtime.py``
(``OpenCLRuntime``: context, queue, programs), ``memory.py`` (buffers, ``CLTensor``),
``program.py`` (programs built from ``shaders/opencl/*.cl``, cached in memory and on disk),
``backend.py`` (``OpenCLBackend``), ``execution.py`` (``OpenCLExecution``, the Executions'
base), ``registry.py``; ``launch.py`` and ``tuning.py`` (kernel launches and their work-group
sizes); one module per op family (``elementwise``, ``conv``, ``conv_transpose``, ``gemm``,
``movement``, ``norm``, ``pool``, ``reduce``, ``resize``).

``import mnnpy.backends.opencl`` does not import pyopencl; the Runtime does, when created.
"""

from mnnpy.backends.opencl.device import DEVICE_ENV
from mnnpy.backends.opencl.runtime import OpenCLRuntime

__all__ = ["DEVICE_ENV", "OpenCLRuntime"]

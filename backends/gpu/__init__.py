"""Backend-independent helpers shared by the GPU backends (``opencl``, ``vulkan``).

Pure Python / NumPy: index-space geometry (``layout``), Resize support checks and tables
(``resize_tables``) and op support checks (``checks``). Nothing here touches a device.
"""

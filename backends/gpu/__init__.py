"""What the GPU backends (``opencl``, ``vulkan``) share: base classes and the op families.

Infrastructure: ``backend`` (``GPUBackend``: schedule checks, storage dtype, fp16 border
twins, border copies; ``GPUTensor``, the handle base), ``dtypes`` (the dtypes held besides
fp16 storage and their codes), ``execution`` (``GPUExecution``, its ``input_dtypes``,
``checked_by``), ``registry`` (``ExecutionRegistry``), ``runtime`` (device choice, shader
folder), ``cache`` (``DiskCache``: program, tuning and pipeline caches).

Op families, each module a base class per op that the backends' modules of the same name
extend with their kernels: ``elementwise``, ``conv``, ``gemm``, ``movement``, ``norm``,
``pool``, ``reduce``; with their checks (``checks``) and pure geometry (``layout``,
``conv_geometry``, ``gemm_geometry``, ``reduce_axes``, ``resize_tables``, ``pow2``).
Nothing here imports a driver.
"""

"""Base class of Vulkan Executions: dispatches described at resize, nothing done per op at run.

A subclass implements ``prepare(inputs, outputs)``, calling ``self.dispatch(...)`` for
each ``vkCmdDispatch`` it needs (kept in ``self.dispatches``); the backend records every
Execution's dispatches into its partition's command buffer at the end of the resize and a
run submits that buffer once (``VulkanBackend.execute_partition``): no Vulkan Execution is
called at run time.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from mnnpy.backends.gpu.dtypes import code, typed
from mnnpy.backends.gpu.execution import GPUExecution
from mnnpy.backends.gpu.layout import collapse
from mnnpy.backends.vulkan.backend import VulkanBackend
from mnnpy.backends.vulkan.commands import Dispatch, binding_range
from mnnpy.backends.vulkan.memory import VkTensor
from mnnpy.backends.vulkan.pipeline import SpecValue

LOCAL_SIZE = 64  # invocations per work group (specialization constant 0 of every shader)
F16 = "_f16"  # suffix of a variant's fp16-storage twin (shaders/vulkan/build.py)
F32_SPEC = 20  # specialization constant 20 + k: binding k holds float32 in an fp16 build
MAX_RANK = 8  # movement_strided's push-constant arrays
VEC = 4  # innermost elements per invocation of the strided copy when its row is long


def variant(name: str, dtype) -> str:
    """The SPIR-V variant of manifest entry ``name`` for inputs of ``dtype`` (``build.by_dtype``):
    ``name`` for float storage (fp32 or fp16), else ``<name>_<code>`` (``dtypes.code``)."""
    return f"{name}_{code(dtype)}" if typed(dtype) else name


class VulkanExecution(GPUExecution):
    """One op on the Vulkan backend (see module docstring)."""

    display = VulkanBackend.display

    def on_resize(self, inputs, outputs):
        self.dispatches: list[Dispatch] = []
        self.prepare(inputs, outputs)

    def elem_offset(self, t: VkTensor) -> int:
        """Offset of ``t`` in elements from the start of its descriptor range (a push constant)."""
        return binding_range(t, self.backend.align)[2]

    def strided(self, x, x_off: int, y, y_off: int, dims, xstr, ystr) -> None:
        """One dispatch of ``movement_strided`` (of ``x``'s dtype) over the merged index space
        (``VEC`` elements per invocation along an innermost row of at least ``2 * VEC``)."""
        if any(int(d) == 0 for d in dims):
            return
        d, sx, sy = collapse(dims, xstr, ystr)
        if len(d) > MAX_RANK:
            raise ValueError(f"strided copy of rank {len(d)} after merging dims (max {MAX_RANK})")
        inner = d[-1]
        vec = VEC if inner >= 2 * VEC else 1
        chunks = -(-inner // vec)
        n = chunks * math.prod(d[:-1])
        pad = [0] * (MAX_RANK - len(d))
        push = struct.pack("<2I2i24i", n, chunks, x_off, y_off, *d, *pad, *sx, *pad, *sy, *pad)
        self.dispatch(variant("movement_strided", x.dtype), [x, y], (1,), push, n, ((1, len(d)), (2, vec)))

    def dispatch(
        self,
        shader: str,
        bindings: list[VkTensor],
        writes: tuple[int, ...],
        push: bytes,
        n: int,
        spec: tuple[tuple[int, SpecValue], ...] = (),
        groups: tuple[int, int, int] | None = None,
        local: tuple[int, int, int] | None = None,
    ) -> None:
        """Ask for one dispatch of SPIR-V variant ``shader``.

        1-D form: ``n`` invocations, ``LOCAL_SIZE`` per group (specialization constant 0),
        groups split over x and y beyond the device's x limit. Explicit form: ``groups``
        (work groups along x, y, z; each within the device's limits) and ``local``
        (specialization constants 0, 10, 11: the shader declares ``local_size_x_id = 0,
        local_size_y_id = 10, local_size_z_id = 11``); ``n`` only says whether there is work.
        ``spec``: the shader's other specialization constants (ids 1..9, 12..19). With fp16
        storage the variant's ``_f16`` twin runs where it binds a float tensor (variants of
        integers and bool only have none), and every float32 binding (weights, constants,
        scratch) gets specialization constant ``20 + k`` = true."""
        d = describe(self.backend, shader, bindings, writes, push, n, spec, groups, local, self.op.type, self.op.name)
        if d is not None:
            self.dispatches.append(d)


def describe(backend, shader, bindings, writes, push, n, spec=(), groups=None, local=None, label="", op="") -> Dispatch | None:
    """The ``Dispatch`` that ``VulkanExecution.dispatch`` describes (same arguments, for
    ``backend``), or None when there is no work; ``label`` (the op type) and ``op`` (its
    name) name it in profiles."""
    if n <= 0 or (groups is not None and min(groups) <= 0):
        return None
    if local is None:
        local_spec = ((0, LOCAL_SIZE),)
    else:
        local_spec = ((0, int(local[0])), (10, int(local[1])), (11, int(local[2])))
    if backend.half and any(t.dtype.kind == "f" for t in bindings):  # the fp16 twin; float32 bindings say so (storage.glsl)
        shader += F16
        spec = (*spec, *((F32_SPEC + k, True) for k, t in enumerate(bindings) if t.dtype == np.float32))
    cache = backend.config.cache
    token = None if cache is None else cache.token
    pipeline = backend.runtime.pipelines.get(shader, len(bindings), len(push), (*local_spec, *spec), token)
    if groups is None:
        count = -(-int(n) // LOCAL_SIZE)
        max_x = backend.runtime.limits["maxComputeWorkGroupCount"][0]
        gx = min(count, max_x)
        groups = (gx, -(-count // gx), 1)
    groups = tuple(map(int, groups))
    return Dispatch(pipeline, list(bindings), tuple(writes), push, groups, label=label, op=op)

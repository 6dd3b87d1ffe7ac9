"""Compute pipelines from the committed SPIR-V: shader modules, layouts, pipelines, cached.

A pipeline is keyed by its SPIR-V variant (``shaders/vulkan/<name>.spv``, listed in
``shaders/vulkan/manifest.json``), its number of storage-buffer bindings (set 0,
bindings 0..n-1), its push-constant size in bytes and its specialization constants
(``(constant_id, value)`` pairs; ``int`` values become 32-bit unsigned, ``float`` 32-bit
float, ``bool`` ``VkBool32``). Every object is created once per Runtime through one
``VkPipelineCache`` and lives as long as the process. Nothing here compiles GLSL.

Source: Vulkan 1.3 specification, "Pipelines" (compute pipelines, specialization
constants, pipeline cache) and "Resource Descriptors" (set layouts, push constants).
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SpecValue = int | float | bool


@dataclass(frozen=True)
class Pipeline:
    """A compute pipeline with the layout objects a dispatch needs to bind it."""

    name: str
    pipeline: Any
    layout: Any
    set_layout: Any
    bindings: int
    push_size: int


def shader_dir():
    """The folder of the ``.spv`` files: package data ``mnnpy.shaders.vulkan``, else the repo's."""
    try:
        from importlib.resources import files

        d = files("mnnpy.shaders.vulkan")
        if d.joinpath("manifest.json").is_file():
            return d
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "shaders" / "vulkan"


def _spec_bytes(spec: tuple[tuple[int, SpecValue], ...]) -> bytes:
    out = b""
    for _, v in spec:
        if isinstance(v, bool):
            out += struct.pack("<I", int(v))
        elif isinstance(v, int):
            out += struct.pack("<I", v)
        else:
            out += struct.pack("<f", float(v))
    return out


class Pipelines:
    """Per-Runtime cache of shader modules, set/pipeline layouts and compute pipelines."""

    def __init__(self, runtime):
        self.rt = runtime
        vk = runtime.vk
        self.cache = vk.vkCreatePipelineCache(
            runtime.device, vk.VkPipelineCacheCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO), None
        )
        self._modules: dict[str, Any] = {}
        self._set_layouts: dict[int, Any] = {}
        self._layouts: dict[tuple[int, int], Any] = {}
        self._pipelines: dict[tuple, Pipeline] = {}
        self._lock = threading.Lock()

    def module(self, name: str):
        """The ``VkShaderModule`` of ``<name>.spv``; ``FileNotFoundError`` for an unknown variant."""
        if name not in self._modules:
            vk = self.rt.vk
            code = shader_dir().joinpath(f"{name}.spv").read_bytes()
            info = vk.VkShaderModuleCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code), pCode=code
            )
            self._modules[name] = vk.vkCreateShaderModule(self.rt.device, info, None)
        return self._modules[name]

    def set_layout(self, bindings: int):
        """Descriptor set layout: ``bindings`` storage buffers, compute stage."""
        if bindings not in self._set_layouts:
            vk = self.rt.vk
            items = [
                vk.VkDescriptorSetLayoutBinding(
                    binding=i,
                    descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    descriptorCount=1,
                    stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT,
                )
                for i in range(bindings)
            ]
            info = vk.VkDescriptorSetLayoutCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, bindingCount=bindings, pBindings=items
            )
            self._set_layouts[bindings] = vk.vkCreateDescriptorSetLayout(self.rt.device, info, None)
        return self._set_layouts[bindings]

    def layout(self, bindings: int, push_size: int):
        """Pipeline layout: one set of ``bindings`` storage buffers, ``push_size`` bytes of push constants."""
        key = (bindings, push_size)
        if key not in self._layouts:
            vk = self.rt.vk
            ranges = (
                [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=push_size)] if push_size else []
            )
            info = vk.VkPipelineLayoutCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                setLayoutCount=1,
                pSetLayouts=[self.set_layout(bindings)],
                pushConstantRangeCount=len(ranges),
                pPushConstantRanges=ranges or None,
            )
            self._layouts[key] = vk.vkCreatePipelineLayout(self.rt.device, info, None)
        return self._layouts[key]

    def get(self, name: str, bindings: int, push_size: int, spec: tuple[tuple[int, SpecValue], ...] = ()) -> Pipeline:
        """The compute pipeline of variant ``name`` (entry ``main``) with these specialization constants."""
        key = (name, bindings, push_size, spec)
        with self._lock:
            if key not in self._pipelines:
                self._pipelines[key] = self._create(name, bindings, push_size, spec)
            return self._pipelines[key]

    def _create(self, name, bindings, push_size, spec) -> Pipeline:
        vk, ffi = self.rt.vk, self.rt.vk.ffi
        data = _spec_bytes(spec)
        entries = [vk.VkSpecializationMapEntry(constantID=cid, offset=4 * k, size=4) for k, (cid, _) in enumerate(spec)]
        spec_info = None
        if spec:
            spec_info = vk.VkSpecializationInfo(
                mapEntryCount=len(entries), pMapEntries=entries, dataSize=len(data), pData=ffi.new("char[]", data)
            )
        stage = vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module=self.module(name),
            pName="main",
            pSpecializationInfo=spec_info,
        )
        layout = self.layout(bindings, push_size)
        info = vk.VkComputePipelineCreateInfo(sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage, layout=layout)
        pipeline = vk.vkCreateComputePipelines(self.rt.device, self.cache, 1, [info], None)[0]
        return Pipeline(name, pipeline, layout, self.set_layout(bindings), bindings, push_size)

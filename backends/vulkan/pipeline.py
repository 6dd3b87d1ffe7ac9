"""Compute pipelines from the committed SPIR-V: shader modules, layouts, pipelines, cached.

A pipeline is keyed by its SPIR-V variant (``shaders/vulkan/<name>.spv``, listed in
``shaders/vulkan/manifest.json``), its number of storage-buffer bindings (set 0,
bindings 0..n-1), its push-constant size in bytes and its specialization constants
(``(constant_id, value)`` pairs; ``int`` values become 32-bit unsigned, ``float`` 32-bit
float, ``bool`` ``VkBool32``). Every object is created once per Runtime through one
``VkPipelineCache`` and lives as long as the process. Nothing here compiles GLSL. Pipelines
are created on up to ``MAX_THREADS`` threads (the driver compiles a resize's pipelines in
parallel; ``Pipeline.pipeline`` waits for one).

On-disk pipeline cache: one file per device in ``mnnpy.models.cache_dir() / "vulkan"``
(``$MNNPY_CACHE`` moves the root), or in the folder ``$MNNPY_VULKAN_CACHE`` names;
``MNNPY_VULKAN_CACHE=0`` (or ``off``) keeps the cache in memory only. The file name holds
the vendor id, device id, device UUID and driver version (``file_name``); the file is an
``mnnpy.cache_file`` entry (magic ``MNNPYVKP``, format, key text naming device name, ids,
driver version, device UUID and pipeline-cache UUID, payload length, SHA-256 over all of
it and the payload) whose payload is what ``vkGetPipelineCacheData`` returned. At Runtime
creation the file is read once; magic, format, key, length and hash are checked on those
bytes, then the payload's ``VkPipelineCacheHeaderVersionOne`` (header size and version,
``vendorID``, ``deviceID``, ``pipelineCacheUUID``) against the device's properties, and only
then is it passed to ``vkCreatePipelineCache`` as ``pInitialData``. Any mismatch, or a
driver that refuses the data, deletes the file and starts with an empty cache
(``stats["rejected"]``, ``last_rejection`` says why). ``Pipelines.save`` writes the cache
atomically when pipelines were created since the last load or save; it runs once at
interpreter exit (``atexit``, in the process that created the Runtime) and may be called
earlier (``VulkanRuntime.save_pipeline_cache``). A folder that cannot be created or written
disables the disk cache with one warning; pipelines still work.

A session with a compilation cache (``create_session(cache_dir=...)``, ``mnnpy.compilation_cache``)
also keeps the pipeline cache's data as the entry ``TOKEN_ENTRY`` of its model's token: the
token gets a ``VkPipelineCache`` of its own at its first resize in a process, seeded from the
entry (``adopt``: the compilation cache checks the bytes in memory, then the Vulkan header and
the driver; no entry: from the Runtime's cache), its sessions create their pipelines through
it, and its data are saved after a resize that created pipelines (``save_to``). A refused
entry warns and is replaced.

Source: Vulkan 1.3 specification, "Pipelines" (compute pipelines, specialization
constants, pipeline cache, "Pipeline Cache Header", ``VkPipelineCacheHeaderVersionOne``)
and "Resource Descriptors" (set layouts, push constants); "Devices and Queues"
(``VkPhysicalDeviceIDProperties::deviceUUID``).
"""

from __future__ import annotations

import atexit
import functools
import os
import struct
import threading
import time
import warnings
import weakref
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnnpy import cache_file
from mnnpy.backends.gpu.cache import DiskCache
from mnnpy.backends.gpu.runtime import shader_dir as gpu_shader_dir
from mnnpy.backends.vulkan.device import VulkanError
from mnnpy.cache_file import atomic_write  # a module global: tests replace it here
from mnnpy.log import get_logger

_log = get_logger("cache")

SpecValue = int | float | bool

CACHE_ENV = "MNNPY_VULKAN_CACHE"
MAGIC = b"MNNPYVKP"
FORMAT = 1
SUFFIX = ".vkpc"
MAX_FILE = cache_file.MAX_FILE  # bytes (256 MiB): a larger file is not read
# VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID (u32 each),
# pipelineCacheUUID (16 bytes); the first 32 bytes of any vkGetPipelineCacheData result.
VK_HEADER = struct.Struct("<IIII16s")
HEADER_VERSION_ONE = 1  # VK_PIPELINE_CACHE_HEADER_VERSION_ONE
TOKEN_ENTRY = "vulkan/pipeline-cache"  # the entry name in a session's compilation cache (adopt, save_to)
MAX_THREADS = 8  # threads creating pipelines at once (vkCreateComputePipelines releases the GIL)


@dataclass(frozen=True)
class Pipeline:
    """A compute pipeline with the layout objects a dispatch needs to bind it. ``created``: the
    ``concurrent.futures.Future`` of the ``VkPipeline`` (created on ``Pipelines``' threads);
    ``pipeline`` waits for it (re-raising what creation raised)."""

    name: str
    created: Future
    layout: Any
    set_layout: Any
    bindings: int
    push_size: int

    @property
    def pipeline(self):
        """The ``VkPipeline`` handle (waits until it is created)."""
        return self.created.result()


@functools.cache
def shader_dir():
    """The folder of the ``.spv`` files: package data ``mnnpy.shaders.vulkan``, else the repo's
    (found once per process: each look resolves paths, system calls that let a pipeline thread
    take the GIL from the session's thread)."""
    return gpu_shader_dir("vulkan", "manifest.json")


@functools.cache
def spirv_names() -> frozenset[str]:
    """The SPIR-V variants there are (``<name>.spv`` in ``shader_dir``), listed once per process."""
    return frozenset(p.name[:-4] for p in shader_dir().iterdir() if p.name.endswith(".spv"))


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


def cache_directory() -> Path | None:
    """The Vulkan pipeline-cache folder (not created here), or None when ``$MNNPY_VULKAN_CACHE``
    turns it off (also None, with a warning, when the mnnpy cache root cannot be created)."""
    return cache_file.resolve_directory(CACHE_ENV, "vulkan", "Vulkan", stacklevel=4)


def device_key(info) -> str:
    """The key text of ``info``'s (``DeviceInfo``) cache file: what its pipeline cache data depends on."""
    return (
        f"vulkan|{info.name}|vendor {info.vendor_id:#06x}|device {info.device_id:#06x}|driver {info.driver_version:#x}"
        f"|device uuid {info.device_uuid.hex()}|pipeline cache uuid {info.uuid.hex()}"
    )


def file_name(info) -> str:
    """``<vendor id>-<device id>-<device UUID>-<driver version>.vkpc`` (hex; the pipeline-cache
    UUID stands in for the device UUID on a Vulkan 1.0 device, which has none)."""
    return f"{info.vendor_id:04x}-{info.device_id:04x}-{(info.device_uuid or info.uuid).hex()}-{info.driver_version:08x}{SUFFIX}"


def check_vk_header(data: bytes, info) -> None:
    """ValueError unless ``data`` starts with a ``VkPipelineCacheHeaderVersionOne`` of ``info``'s device."""
    if len(data) < VK_HEADER.size:
        raise ValueError(f"Vulkan header truncated ({len(data)} bytes)")
    size, version, vendor, device, uuid = VK_HEADER.unpack_from(data)
    if version != HEADER_VERSION_ONE or not VK_HEADER.size <= size <= len(data):
        raise ValueError(f"Vulkan header: version {version}, size {size} bytes")
    if (vendor, device) != (info.vendor_id, info.device_id):
        raise ValueError(
            f"Vulkan header: vendorID {vendor:#x} deviceID {device:#x}, device has {info.vendor_id:#x} {info.device_id:#x}"
        )
    if uuid != info.uuid:
        raise ValueError(f"Vulkan header: pipelineCacheUUID {uuid.hex()}, device has {info.uuid.hex()}")


def _save_at_exit(ref: weakref.ref, pid: int) -> None:
    """``atexit`` hook: save the pipeline cache of a ``Pipelines`` still alive, in its own process only."""
    pipelines = ref()
    if pipelines is not None and os.getpid() == pid:
        try:
            pipelines.save()
        except Exception:  # noqa: BLE001 - never fail interpreter exit
            pass


def _started_pool(workers: int) -> ThreadPoolExecutor:
    """A pool of ``workers`` threads for creating pipelines, every thread started now (with
    the Runtime: a warm process's first resize spent 3-7 ms starting them one pipeline at a
    time); each start-up task waits (at most 5 s) until all have started, so that each runs on
    a thread of its own."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="mnnpy-vulkan-pipeline")
    gate = threading.Barrier(workers, timeout=5)

    def arrive() -> None:
        try:
            gate.wait()
        except threading.BrokenBarrierError:
            pass

    for _ in range(workers):
        pool.submit(arrive)
    return pool


class Pipelines(DiskCache):
    """Per-Runtime cache of shader modules, set/pipeline layouts and compute pipelines, with
    the ``VkPipelineCache`` they are created through loaded from and saved to disk.

    ``directory``: True for ``cache_directory()``, a folder, or None/False for no disk cache.
    ``stats``: ``loaded`` (a verified file passed to the driver), ``rejected`` (files
    discarded), ``written`` (files saved), ``created`` (pipelines created), ``memory_hits``
    (pipelines reused); ``last_rejection``: why the last file was discarded (None if none);
    ``path``: the cache file, None when the disk cache is off or unusable."""

    def __init__(self, runtime, directory: Path | None | bool = True):
        self.rt = runtime
        self.info = runtime.info
        folder = cache_directory() if directory is True else directory or None
        folder = cache_file.usable_directory(folder, "Vulkan pipeline", stacklevel=3)
        self.path: Path | None = None if folder is None else folder / file_name(self.info)
        self.key = device_key(self.info)
        super().__init__("Vulkan pipeline cache", ("loaded", "rejected", "written", "created", "memory_hits"))
        self._dirty = False
        self._modules: dict[str, Any] = {}
        self._set_layouts: dict[int, Any] = {}
        self._layouts: dict[tuple[int, int], Any] = {}
        self._pipelines: dict[tuple, Pipeline] = {}
        self._lock = threading.RLock()
        self._threads = _started_pool(min(MAX_THREADS, os.cpu_count() or 1))
        # compilation-cache token -> its VkPipelineCache (adopt), and (whether its entry is to be
        # saved: pipelines created through it, or no valid entry, since adopt or save_to; the
        # entry's data then)
        self._token_caches: dict[str, Any] = {}
        self._tokens: dict[str, tuple[bool, bytes]] = {}
        self.cache = self._create_cache(self._load())
        if self.path is not None:
            atexit.register(_save_at_exit, weakref.ref(self), os.getpid())

    # -- disk ---------------------------------------------------------------------------
    def _load(self) -> bytes | None:
        """The verified ``vkGetPipelineCacheData`` bytes of the cache file, or None (a bad file is deleted)."""
        if self.path is None:
            return None
        try:
            data = cache_file.read_limited(self.path, MAX_FILE)
            if data is None:
                return None
            payload = cache_file.unpack(data, MAGIC, FORMAT, self.key)
            check_vk_header(payload, self.info)
        except (OSError, ValueError) as e:
            return self.reject(self.path, str(e))
        return payload

    def _new_cache(self, initial: bytes):
        """A new ``VkPipelineCache`` seeded with ``initial`` (verified); ``VkError`` when the driver refuses it."""
        vk = self.rt.vk
        keep = vk.ffi.from_buffer(initial)
        info = vk.VkPipelineCacheCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, initialDataSize=len(initial), pInitialData=keep
        )
        return vk.vkCreatePipelineCache(self.rt.device, info, None)

    def _create_cache(self, initial: bytes | None):
        """A ``VkPipelineCache`` seeded with ``initial`` (verified), empty when None or refused."""
        vk = self.rt.vk
        if initial is not None:
            try:
                cache = self._new_cache(initial)
                self.stats["loaded"] += 1
                _log.info("Vulkan pipeline cache: loaded %s (%d bytes)", self.path, len(initial))
                return cache
            except vk.VkError as e:
                self.reject(self.path, f"the driver refuses the data: {type(e).__name__}")
        info = vk.VkPipelineCacheCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO)
        return vk.vkCreatePipelineCache(self.rt.device, info, None)

    def data(self, cache=None) -> bytes:
        """The current ``vkGetPipelineCacheData`` bytes (header and driver data) of ``cache``
        (default: this Runtime's)."""
        vk, ffi = self.rt.vk, self.rt.vk.ffi
        cache = self.cache if cache is None else cache
        with self._lock:
            size = ffi.new("size_t*")
            for _ in range(4):  # the size may grow between the two calls (another thread's pipeline)
                if vk.lib.vkGetPipelineCacheData(self.rt.device, cache, size, ffi.NULL) != vk.VK_SUCCESS:
                    raise vk.VkError("vkGetPipelineCacheData failed")
                buf = ffi.new("char[]", max(int(size[0]), 1))
                result = vk.lib.vkGetPipelineCacheData(self.rt.device, cache, size, buf)
                if result == vk.VK_SUCCESS:
                    return ffi.buffer(buf, size[0])[:]
            raise vk.VkError(f"vkGetPipelineCacheData: result {result}")

    def save(self) -> bool:
        """Write the cache file (atomically) if pipelines were created since the last load or
        save; True when written. A failed write warns once and leaves the cache in memory."""
        if self.path is None or not self._dirty:
            return False
        self.wait()  # outside the lock: a pipeline still waiting for its token's cache (_adopt) takes it
        with self._lock:
            if not self._dirty:
                return False
            try:
                payload = self.data()
                check_vk_header(payload, self.info)  # never write what the next load would reject
                atomic_write(self.path, cache_file.pack(MAGIC, FORMAT, self.key, payload))
            except Exception as e:  # OSError (read-only folder, full disk), a driver error or bad header
                self.write_failed(str(self.path), e, stacklevel=2)
                return False
            self._dirty = False
            self.stats["written"] += 1
            _log.info("Vulkan pipeline cache: wrote %s", self.path)
            return True

    # -- a session's compilation cache ---------------------------------------------------
    def adopt(self, cache) -> None:
        """Give the token of ``cache``, a session's ``CompilationCache``, a ``VkPipelineCache`` of
        its own, once per token and process: seeded with its pipeline-cache entry
        (``TOKEN_ENTRY``), else (no entry, or a refused one) with this Runtime's cache. The
        session's pipelines are created through it (``get``) and ``save_to`` saves its data, so
        that a model's entry holds the pipelines of that model, not every pipeline the process
        made (a process running five models saved each one's entry with the pipelines of all
        the models before it, and the next process read and merged them all, 11-12 ms a model
        on the H200). The compilation cache checks the entry's bytes in memory (SHA-256 against
        its mapping, key; environment: ``device_key``), then ``check_vk_header`` and the driver
        (``vkCreatePipelineCache`` from them); a refused entry warns (``RuntimeWarning``),
        counts in ``stats["rejected"]`` and is replaced at ``save_to``. The entry is read and the
        driver builds the cache on a pipeline thread (``_adopt``: 5-8 ms on the H200 machine), while
        the session's thread prepares its Executions; the pipelines of the token wait for it on
        their threads (``_create``), submitted after it."""
        with self._lock:
            if cache.token in self._token_caches:
                return
            self._tokens[cache.token] = (False, b"")  # get() marks it pending meanwhile
            self._token_caches[cache.token] = self._threads.submit(self._adopt, cache)

    def _adopt(self, cache) -> Any:
        """``adopt``'s work (on a pipeline thread, the lock taken only to count): the token's
        ``VkPipelineCache``."""
        payload, own, rejected = cache.load(TOKEN_ENTRY, self.key), None, None
        if payload is not None:
            vk = self.rt.vk
            try:
                check_vk_header(payload, self.info)
                own = self._new_cache(payload)
            except (ValueError, vk.VkError) as e:
                rejected, payload = f"{TOKEN_ENTRY}: {e or type(e).__name__}", None
        if own is None:  # no entry: this Runtime's pipelines (its disk cache) seed the token's
            own = self._create_cache(None)  # a merge's destination is externally synchronised: new, nobody else has it
            self.rt.vk.vkMergePipelineCaches(self.rt.device, own, 1, [self.cache])
        with self._lock:
            if rejected is not None:
                self.stats["rejected"] += 1
                self.last_rejection = rejected
            elif payload is not None:
                self.stats["loaded"] += 1
            made = self._tokens[cache.token][0]  # pipelines asked for meanwhile
            self._tokens[cache.token] = (payload is None or made, payload or b"")  # no valid entry: saved at save_to
        if rejected is not None:
            warnings.warn(f"compilation cache entry {TOKEN_ENTRY!r} rejected ({rejected}); rebuilding", RuntimeWarning, 2)
        return own

    def save_to(self, cache) -> bool:
        """Save the data of ``cache``'s token's ``VkPipelineCache`` (``adopt``) as its entry
        ``TOKEN_ENTRY`` when pipelines were created through it since it was adopted or saved and
        the data differ from the entry's; True when saved. With a disk cache of this Runtime,
        the token's pipelines are merged into the Runtime's cache too (``save``). A failure
        warns once (``write_failed``)."""
        adopted = self._token_caches.get(cache.token)
        if adopted is None:
            return False
        own = adopted.result()  # outside the lock, as the wait: _adopt and failed pipelines take it
        self.wait()
        with self._lock:
            pending, known = self._tokens.get(cache.token, (False, b""))
            if not pending:
                return False
            try:
                payload = self.data(own)
                check_vk_header(payload, self.info)  # never save what the next adopt would refuse
            except Exception as e:  # a driver error or bad header
                self.write_failed(f"{TOKEN_ENTRY} of {cache.folder}", e, stacklevel=2)
                return False
            self._tokens[cache.token] = (False, payload)
            if self.path is not None:
                self.rt.vk.vkMergePipelineCaches(self.rt.device, self.cache, 1, [own])
            if payload == known:
                return False  # pipelines created from the entry: nothing new to save
            cache.save(TOKEN_ENTRY, self.key, payload)
            return True

    # -- objects ------------------------------------------------------------------------

    def _call(self, create: str, info, handle: str):
        """``vk.lib.<create>(device, info, NULL, &out)`` with raw structs (the ``vulkan``
        package's wrappers convert every field in Python: about 0.3 ms a pipeline layout on
        the H200 machine); the new handle, or the ``VkError`` of a failed result."""
        vk, ffi = self.rt.vk, self.rt.vk.ffi
        out = ffi.new(f"{handle}[1]")
        result = getattr(vk.lib, create)(self.rt.device, info, ffi.NULL, out)
        if result != vk.VK_SUCCESS:
            raise vk.exception_codes.get(result, vk.VkError)
        return out[0]

    def _module_task(self, name: str):
        """The ``VkShaderModule`` of ``<name>.spv``, or the ``Future`` of it: an unknown variant
        raises ``VulkanError`` at once (``spirv_names``); the SPIR-V is read and the
        driver makes the module on a pipeline thread, before the pipelines of it that are
        submitted after (``_create``). Reading it here cost the session's thread 0.25-0.6 ms
        a module: each system call let a pipeline thread take the GIL."""
        got = self._modules.get(name)
        if isinstance(got, Future) and got.done() and got.exception() is not None:
            got = None  # the driver failed to make it: asked again, made again
        if got is None:
            if name not in spirv_names():
                raise VulkanError(f"no SPIR-V variant {name}.spv in {shader_dir()} (a broken installation?)")
            got = self._modules[name] = self._threads.submit(self._new_module, name)
        return got

    def _new_module(self, name: str):
        vk, ffi = self.rt.vk, self.rt.vk.ffi
        try:
            code = shader_dir().joinpath(f"{name}.spv").read_bytes()
        except OSError as e:  # deleted or unreadable since it was listed
            raise VulkanError(f"cannot read SPIR-V variant {name}.spv: {e}") from e
        words = ffi.from_buffer("uint32_t[]", code)
        info = ffi.new("VkShaderModuleCreateInfo*")
        info.sType, info.codeSize, info.pCode = vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, len(code), words
        return self._call("vkCreateShaderModule", info, "VkShaderModule")

    def set_layout(self, bindings: int):
        """Descriptor set layout: ``bindings`` storage buffers, compute stage."""
        if bindings not in self._set_layouts:
            vk, ffi = self.rt.vk, self.rt.vk.ffi
            items = ffi.new(f"VkDescriptorSetLayoutBinding[{max(bindings, 1)}]")
            for i in range(bindings):
                items[i].binding, items[i].descriptorType = i, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                items[i].descriptorCount, items[i].stageFlags = 1, vk.VK_SHADER_STAGE_COMPUTE_BIT
            info = ffi.new("VkDescriptorSetLayoutCreateInfo*")
            info.sType, info.bindingCount = vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, bindings
            info.pBindings = items if bindings else ffi.NULL
            self._set_layouts[bindings] = self._call("vkCreateDescriptorSetLayout", info, "VkDescriptorSetLayout")
        return self._set_layouts[bindings]

    def layout(self, bindings: int, push_size: int):
        """Pipeline layout: one set of ``bindings`` storage buffers, ``push_size`` bytes of push constants."""
        key = (bindings, push_size)
        if key not in self._layouts:
            vk, ffi = self.rt.vk, self.rt.vk.ffi
            sets = ffi.new("VkDescriptorSetLayout[1]", [self.set_layout(bindings)])
            info = ffi.new("VkPipelineLayoutCreateInfo*")
            info.sType, info.setLayoutCount, info.pSetLayouts = vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, 1, sets
            if push_size:
                ranges = ffi.new("VkPushConstantRange[1]")
                ranges[0].stageFlags, ranges[0].offset, ranges[0].size = vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size
                info.pushConstantRangeCount, info.pPushConstantRanges = 1, ranges
            self._layouts[key] = self._call("vkCreatePipelineLayout", info, "VkPipelineLayout")
        return self._layouts[key]

    def get(
        self, name: str, bindings: int, push_size: int, spec: tuple[tuple[int, SpecValue], ...] = (), token: str | None = None
    ) -> Pipeline:
        """The compute pipeline of variant ``name`` (entry ``main``) with these specialization
        constants. A new one is created on one of ``MAX_THREADS`` threads, through the
        ``VkPipelineCache`` of the compilation-cache ``token`` where it was adopted, else this
        Runtime's: the pipelines a resize asks for are compiled in parallel, and recording its
        command buffers waits for them (``Pipeline.pipeline``); one whose creation failed is
        forgotten (asked again, it is created again)."""
        key = (name, bindings, push_size, spec)
        hit = self._pipelines.get(key)  # a hit takes no lock: a resize asks for each dispatch's pipeline
        if hit is None:
            with self._lock:
                hit = self._pipelines.get(key)
                if hit is None:
                    return self._new(key, token)
        self.stats["memory_hits"] += 1
        _log.debug("Vulkan pipeline %s %s: memory hit", name, spec)
        return hit

    def _new(self, key: tuple, token: str | None) -> Pipeline:
        """``get``'s miss (the lock held, an ``RLock``: a failed creation's callback takes it): a
        new ``Pipeline`` whose creation is submitted, through the token's ``VkPipelineCache``,
        else this Runtime's."""
        name, bindings, push_size, spec = key
        module, layout = self._module_task(name), self.layout(bindings, push_size)
        through = self._token_caches.get(token, self.cache)
        created = self._threads.submit(self._create, name, module, layout, spec, through)
        p = self._pipelines[key] = Pipeline(name, created, layout, self.set_layout(bindings), bindings, push_size)
        self.stats["created"] += 1
        if token in self._tokens:  # its entry is saved again at save_to
            self._tokens[token] = (True, self._tokens[token][1])
        self._dirty = True
        created.add_done_callback(lambda f: f.exception() is None or self._forget(key, p))
        return p

    def _forget(self, key: tuple, p: Pipeline) -> None:
        """Drop ``p`` (its creation failed) from the pipelines kept under ``key``."""
        with self._lock:
            if self._pipelines.get(key) is p:
                del self._pipelines[key]

    def wait(self) -> None:
        """Return once every pipeline asked for so far is created (or failed)."""
        with self._lock:
            pending = [p.created for p in self._pipelines.values()]
        wait(pending)

    def _create(self, name: str, module, layout, spec, through) -> Any:
        """A new ``VkPipeline`` (on a worker thread; the pipeline cache is internally
        synchronised). The create info is built as raw structs: the ``vulkan`` package's
        wrappers convert each field in Python, holding the GIL that the session's own thread
        needs (about 0.1 ms a pipeline)."""
        vk, ffi = self.rt.vk, self.rt.vk.ffi
        t0 = time.perf_counter()
        if isinstance(through, Future):  # the token's cache, being adopted (adopt)
            through = through.result()
        if isinstance(module, Future):  # the shader module, being made (_module_task)
            module = module.result()
        info = ffi.new("VkComputePipelineCreateInfo*")
        info.sType, info.layout = vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, layout
        stage = info.stage
        stage.sType, stage.stage, stage.module = (
            vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            vk.VK_SHADER_STAGE_COMPUTE_BIT,
            module,
        )
        entry = ffi.new("char[]", b"main")
        stage.pName = entry
        if spec:
            data = ffi.new("char[]", _spec_bytes(spec))
            entries = ffi.new(f"VkSpecializationMapEntry[{len(spec)}]")
            for k, (cid, _) in enumerate(spec):
                entries[k].constantID, entries[k].offset, entries[k].size = cid, 4 * k, 4
            spec_info = ffi.new("VkSpecializationInfo*")
            spec_info.mapEntryCount, spec_info.pMapEntries, spec_info.dataSize, spec_info.pData = (
                len(spec),
                entries,
                4 * len(spec),
                data,
            )
            stage.pSpecializationInfo = spec_info
        out = ffi.new("VkPipeline[1]")
        result = vk.lib.vkCreateComputePipelines(
            self.rt.device, through if through is not None else ffi.NULL, 1, info, ffi.NULL, out
        )
        if result != vk.VK_SUCCESS:
            raise vk.exception_codes.get(result, vk.VkError)
        pipeline = out[0]
        _log.info("Vulkan pipeline %s %s: miss, created in %.1f ms", name, spec, (time.perf_counter() - t0) * 1e3)
        return pipeline

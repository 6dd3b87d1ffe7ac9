"""The GPU backends' disk caches (OpenCL program binaries, Vulkan pipeline cache) share one
hash-checked file layout (mnnpy/cache_file.py): a file with a flipped byte, truncated, with bytes
appended or larger than the limit is rejected with the reason, and the backend rebuilds (and
writes it again) with outputs still right. Each backend is skipped, with the reason, where it is
unusable (CI: PoCL, lavapipe). The rest of each cache (keys, folders, warnings, device headers)
is tested in tests/test_opencl_cache.py and tests/test_vulkan_cache.py."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import helper

from mnnpy import cache_file
from tests.backend_compare import backend_cases, compare, gpu_backends
from tests.fifo import within
from tests.oracle import ELEMENTWISE, make_model, rand

SOURCE = "__kernel void axpb(__global float *x, float a, int n) { int i = get_global_id(0); if (i < n) x[i] = a * x[i] + B; }"
OPTIONS = ["-D B=1.0f"]
N = 37


class _OpenCL:
    """A ``ProgramCache`` entry of one small program, built with the process-wide Runtime's
    device, context and queue (each ``load`` is a fresh ``ProgramCache``)."""

    def __init__(self, tmp_path, monkeypatch, rng):
        from mnnpy.backend import get_runtime
        from mnnpy.backends.opencl import program as program_cache

        self.pc, self.rt, self.prg = program_cache, get_runtime("opencl"), None
        monkeypatch.setenv(program_cache.CACHE_ENV, str(tmp_path / "clcache"))

    def write(self):
        c = self.pc.ProgramCache(self.rt)
        c.get("t.cl", SOURCE, OPTIONS)
        key = c.key(SOURCE, OPTIONS)
        return c.path(key), key

    def load(self):
        c = self.pc.ProgramCache(self.rt)
        self.prg = c.get("t.cl", SOURCE, OPTIONS)
        return c

    @staticmethod
    def hits(c):
        return c.stats["disk_hits"]

    def run(self, c):
        """Run ``axpb`` (a=2) on 0..N-1 and check ``2x + 1``."""
        cl, rt = self.rt.cl, self.rt
        x = np.arange(N, dtype=np.float32)
        buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
        k = cl.Kernel(self.prg, "axpb")
        k.set_args(buf, np.float32(2.0), np.int32(N))
        cl.enqueue_nd_range_kernel(rt.queue, k, (64,), (16,))
        out = np.empty_like(x)
        cl.enqueue_copy(rt.queue, out, buf, is_blocking=True)
        np.testing.assert_array_equal(out, 2 * x + 1)

    def rebuilt(self, c, path):
        """After a rejection: built again, and the program works."""
        assert c.stats["built"] == 1
        self.run(c)


class _Vulkan:
    """The ``Pipelines`` of a small model's session, put in place of the process-wide Runtime's
    for the test (each ``load`` is a fresh ``Pipelines``)."""

    def __init__(self, tmp_path, monkeypatch, rng):
        from mnnpy.backend import get_runtime
        from mnnpy.backends.vulkan import pipeline

        self.vp, self.rt, self.monkeypatch, self.rng = pipeline, get_runtime("vulkan"), monkeypatch, rng
        monkeypatch.setenv(pipeline.CACHE_ENV, str(tmp_path / "vkcache"))

    def write(self):
        p = self.vp.Pipelines(self.rt)
        self.run(p)
        assert p.stats["created"] >= 2 and p.stats["written"] == 1 and p.path.is_file()
        return p.path, p.key

    def load(self):
        return self.vp.Pipelines(self.rt)

    @staticmethod
    def hits(c):
        return c.stats["loaded"]

    def run(self, c):
        """A small model on Vulkan with ``c`` as the Runtime's pipelines, checked against the CPU."""
        self.monkeypatch.setattr(self.rt, "pipelines", c)
        x = rand(self.rng, 3, 5, 37)
        nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
        compare(make_model(nodes, {"x": x}, ["y"]), {"x": x}, ELEMENTWISE, True, backend="vulkan")

    def rebuilt(self, c, path):
        """After a rejection: the file deleted (never handed to the driver); a session's outputs
        still right, and the cache saved again."""
        assert c.last_rejection.startswith(path.name) and not path.exists()
        self.run(c)
        assert c.stats["written"] == 1


@pytest.fixture
def cache(backend, tmp_path, monkeypatch, rng):
    return {"opencl": _OpenCL, "vulkan": _Vulkan}[backend](tmp_path, monkeypatch, rng)


def _offsets(data: bytes, key: str, backend: str) -> dict[str, int]:
    end = cache_file.HEAD.size + len(key.encode())
    start = end + cache_file.LEN.size + cache_file.DIGEST
    where = {
        "magic": 0,
        "format": 8,
        "keylen": 12,
        "key": cache_file.HEAD.size + 3,
        "payload-length": end,
        "digest": end + cache_file.LEN.size + 5,
    }
    if backend == "opencl":
        where["payload"] = start + 11
    else:  # the payload's VkPipelineCacheHeaderVersionOne
        where.update({"vk-header-size": start, "vk-vendor": start + 8, "vk-uuid": start + 16 + 3})
    where["payload-last"] = len(data) - 1
    return where


REASONS = {
    "magic": "bad magic",
    "format": "format",
    "keylen": "another key",
    "key": "another key",
    "payload-length": "payload length",
    "digest": "hash",
    "payload": "hash",
    "vk-header-size": "hash",
    "vk-vendor": "hash",
    "vk-uuid": "hash",
    "payload-last": "hash",
}
HEADER = ["magic", "format", "keylen", "key", "payload-length", "digest"]
FLIPS = {
    "opencl": [*HEADER, "payload", "payload-last"],
    "vulkan": [*HEADER, "vk-header-size", "vk-vendor", "vk-uuid", "payload-last"],
}


@pytest.mark.parametrize("backend,where", backend_cases(FLIPS, ids=str))
def test_flipped_byte_rejected_and_rebuilt(cache, backend, where):
    path, key = cache.write()
    data = bytearray(path.read_bytes())
    good = bytes(data)
    data[_offsets(data, key, backend)[where]] ^= 0x41
    path.write_bytes(bytes(data))
    c = cache.load()
    assert c.stats["rejected"] == 1 and cache.hits(c) == 0
    assert REASONS[where] in c.last_rejection
    cache.rebuilt(c, path)
    # written again, valid (PoCL binaries are deterministic; any valid entry loads)
    assert path.is_file() and path.read_bytes()[:16] == good[:16]
    fresh = cache.load()
    assert cache.hits(fresh) == 1 and fresh.stats["rejected"] == 0
    cache.run(fresh)


@pytest.mark.parametrize("size", [0, 5, 20, "half", "minus1"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_truncated_or_empty_rejected(cache, backend, size):
    path, _ = cache.write()
    data = path.read_bytes()
    n = {"half": len(data) // 2, "minus1": len(data) - 1}.get(size, size)
    path.write_bytes(data[:n])
    c = cache.load()
    assert c.stats["rejected"] == 1 and cache.hits(c) == 0
    assert any(w in c.last_rejection for w in ("truncated", "length", "another key"))
    cache.rebuilt(c, path)


@pytest.mark.parametrize("backend", gpu_backends())
def test_appended_bytes_rejected(cache, backend):
    path, _ = cache.write()
    path.write_bytes(path.read_bytes() + b"\0")
    c = cache.load()
    assert c.stats["rejected"] == 1 and "payload length" in c.last_rejection
    cache.rebuilt(c, path)


MAX_FILE = {"opencl": 64, "vulkan": 16}  # a limit below the written file's size


@pytest.mark.parametrize("backend", gpu_backends())
def test_oversized_file_not_read(cache, backend, monkeypatch):
    cache.write()
    module = cache.pc if backend == "opencl" else cache.vp
    monkeypatch.setattr(module, "MAX_FILE", MAX_FILE[backend])
    c = cache.load()
    assert c.stats["rejected"] == 1 and f"larger than {MAX_FILE[backend]}" in c.last_rejection
    cache.run(c)


@pytest.mark.parametrize("backend", gpu_backends())
def test_named_pipe_rejected_without_blocking(cache, backend):
    """Defect 3 of issue 12: a FIFO in place of the entry blocked ``open`` forever."""
    path, _ = cache.write()
    path.unlink()
    os.mkfifo(path)
    c = within(20, cache.load, path)
    assert c.stats["rejected"] == 1 and cache.hits(c) == 0 and "named pipe" in c.last_rejection
    cache.rebuilt(c, path)
    assert path.is_file()

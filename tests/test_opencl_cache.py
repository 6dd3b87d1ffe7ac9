"""OpenCL program-binary disk cache: hits across caches, the entry layout, foreign keys, binaries the
driver refuses, unwritable folders. Flipped bytes, truncated, appended and oversized files (the
hash-checked layout shared with Vulkan) are in tests/test_gpu_cache.py.

Every test uses its own ``ProgramCache`` on a folder in ``tmp_path`` (the Runtime is a
process-wide singleton; only its device, context and queue are borrowed).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import compare
from tests.oracle import ELEMENTWISE, make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)

from mnnpy.backends.opencl import program as pc  # noqa: E402
from mnnpy.backends.opencl.program import ProgramCache  # noqa: E402

SOURCE = "__kernel void axpb(__global float *x, float a, int n) { int i = get_global_id(0); if (i < n) x[i] = a * x[i] + B; }"
N = 37


def _run(rt, prg, b=1.0):
    """Run ``axpb`` (a=2) on 0..N-1 and check ``2x + b``."""
    cl = rt.cl
    x = np.arange(N, dtype=np.float32)
    buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    k = cl.Kernel(prg, "axpb")
    k.set_args(buf, np.float32(2.0), np.int32(N))
    cl.enqueue_nd_range_kernel(rt.queue, k, (64,), (16,))
    out = np.empty_like(x)
    cl.enqueue_copy(rt.queue, out, buf, is_blocking=True)
    np.testing.assert_array_equal(out, 2 * x + b)


def _entry(cache, options=("-D B=1.0f",)):
    return cache.path(cache.key(SOURCE, list(options)))


def test_directory_from_env(rt, tmp_path, monkeypatch):
    monkeypatch.setenv(pc.CACHE_ENV, str(tmp_path / "x"))
    assert ProgramCache(rt).directory == tmp_path / "x" and (tmp_path / "x").is_dir()
    monkeypatch.delenv(pc.CACHE_ENV)
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path / "root"))
    assert ProgramCache(rt).directory == tmp_path / "root" / "opencl"
    for off in ("0", "off", "OFF"):
        monkeypatch.setenv(pc.CACHE_ENV, off)
        assert ProgramCache(rt).directory is None


def test_memory_then_disk_hit(rt, folder):
    c = ProgramCache(rt)
    p1 = c.get("t.cl", SOURCE, ["-D B=1.0f"])
    assert c.get("t.cl", SOURCE, ["-D B=1.0f"]) is p1
    assert c.stats == dict(memory_hits=1, disk_hits=0, built=1, rejected=0, written=1, evicted=0)
    assert _entry(c).is_file() and len(os.listdir(folder)) == 1
    c2 = ProgramCache(rt)
    _run(rt, c2.get("t.cl", SOURCE, ["-D B=1.0f"]))
    assert c2.stats["disk_hits"] == 1 and c2.stats["built"] == 0 and c2.last_rejection is None
    # other options, another entry
    _run(rt, c2.get("t.cl", SOURCE, ["-D B=3.0f"]), 3.0)
    assert c2.stats["built"] == 1 and len(os.listdir(folder)) == 2


def test_entry_layout(rt, folder):
    c = ProgramCache(rt)
    c.get("t.cl", SOURCE, ["-D B=1.0f"])
    data = _entry(c).read_bytes()
    key = c.key(SOURCE, ["-D B=1.0f"])
    assert data.startswith(pc.MAGIC) and key.encode() in data
    assert rt.device.name in key and rt.device.driver_version in key and key.endswith("-D B=1.0f")
    assert pc.unpack(data, key) == data[-len(pc.unpack(data, key)) :]
    assert _entry(c).name == pc.hashlib.sha256(key.encode()).hexdigest() + pc.SUFFIX


def test_foreign_key_rejected(rt, folder):
    """A valid entry of another key, renamed to this key's file name, is not loaded."""
    c = ProgramCache(rt)
    c.get("t.cl", SOURCE, ["-D B=1.0f"])
    c.get("t.cl", SOURCE, ["-D B=3.0f"])
    os.replace(_entry(c, ["-D B=3.0f"]), _entry(c, ["-D B=1.0f"]))
    c2 = ProgramCache(rt)
    _run(rt, c2.get("t.cl", SOURCE, ["-D B=1.0f"]), 1.0)
    assert c2.stats["rejected"] == 1 and "another key" in c2.last_rejection


def test_consistent_entry_with_bad_binary_rejected(rt, folder):
    """Hash and key right, but the driver refuses the binary: discarded and rebuilt."""
    c = ProgramCache(rt)
    key = c.key(SOURCE, ["-D B=1.0f"])
    _entry(c).write_bytes(pc.pack(key, b"not a device binary" * 4))
    _run(rt, c.get("t.cl", SOURCE, ["-D B=1.0f"]))
    assert c.stats["rejected"] == 1 and "does not build" in c.last_rejection and c.stats["written"] == 1
    assert pc.unpack(_entry(c).read_bytes(), key) != b"not a device binary" * 4


def test_disabled(rt, tmp_path, monkeypatch):
    monkeypatch.setenv(pc.CACHE_ENV, "off")
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    c = ProgramCache(rt)
    _run(rt, c.get("t.cl", SOURCE, ["-D B=1.0f"]))
    assert c.directory is None and c.stats["written"] == 0 and not (tmp_path / "opencl").exists()


def test_uncreatable_directory(rt, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(pc.CACHE_ENV, str(tmp_path / "file" / "opencl"))
    with pytest.warns(RuntimeWarning, match="disk cache disabled"):
        c = ProgramCache(rt)
    _run(rt, c.get("t.cl", SOURCE, ["-D B=1.0f"]))
    assert c.directory is None and c.stats["built"] == 1


def test_unwritable_directory(rt, folder, monkeypatch):
    """Writes that fail (read-only folder, full disk) warn once; programs still work."""

    def fail(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(pc, "atomic_write", fail)
    c = ProgramCache(rt)
    with pytest.warns(RuntimeWarning, match="cannot write"):
        _run(rt, c.get("t.cl", SOURCE, ["-D B=1.0f"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _run(rt, c.get("t.cl", SOURCE, ["-D B=3.0f"]), 3.0)
    assert c.stats["built"] == 2 and c.stats["written"] == 0 and os.listdir(folder) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user for a read-only folder")
def test_read_only_directory(rt, folder):
    folder.mkdir()
    folder.chmod(0o500)
    try:
        c = ProgramCache(rt)
        with pytest.warns(RuntimeWarning):
            _run(rt, c.get("t.cl", SOURCE, ["-D B=1.0f"]))
    finally:
        folder.chmod(0o700)


def test_session_programs_reloaded_from_disk(rt, folder, monkeypatch, rng):
    """The real shaders through a session: built and written, then loaded by a fresh cache."""
    x = rand(rng, 13, 7, 31)
    model = make_model([helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["y"])], {"x": x}, ["y"])
    monkeypatch.setattr(rt, "programs", ProgramCache(rt))
    compare(model, {"x": x}, ELEMENTWISE)
    assert rt.programs.stats["built"] >= 2 and rt.programs.stats["written"] == rt.programs.stats["built"]
    monkeypatch.setattr(rt, "programs", ProgramCache(rt))
    compare(model, {"x": x}, ELEMENTWISE)
    assert rt.programs.stats["built"] == 0 and rt.programs.stats["disk_hits"] >= 2


def test_devices_reports_the_cache(folder, capsys, monkeypatch):
    from mnnpy.cli import main

    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {folder} (" in out and "tuning.json absent" in out
    (folder / "tuning.json").mkdir(parents=True)  # a folder where the tuning file belongs
    assert main(["devices"]) == 0
    assert "tuning.json unusable (not a file)" in capsys.readouterr().out
    monkeypatch.setenv(pc.CACHE_ENV, "off")
    assert main(["devices"]) == 0
    assert "cache: off" in capsys.readouterr().out


def test_least_recently_used_entries_evicted(rt, folder, monkeypatch):
    """Beyond ``MAX_ENTRIES`` files, writing a new entry deletes the least recently used; a
    disk hit counts as a use."""
    import os
    import time

    monkeypatch.setattr(pc, "MAX_ENTRIES", 2)
    cache = pc.ProgramCache(rt, folder)
    sources = [f"__kernel void k{i}(__global float *x) {{ x[0] = {i}; }}" for i in range(3)]
    cache.get("a.cl", sources[0], [])
    cache.get("b.cl", sources[1], [])
    paths = [cache.path(cache.key(s, [])) for s in sources]
    old = time.time() - 100
    os.utime(paths[0], (old, old))
    os.utime(paths[1], (old + 10, old + 10))
    pc.ProgramCache(rt, folder).get("a.cl", sources[0], [])  # a disk hit: entry 0 is now the newest
    cache.get("c.cl", sources[2], [])
    assert [p.exists() for p in paths] == [True, False, True] and cache.stats["evicted"] == 1

"""Vulkan pipeline cache on disk: written, reloaded, verified; foreign Vulkan headers, short payloads
and files of other devices discarded. Flipped bytes, truncated, appended and oversized files (the
hash-checked layout shared with OpenCL) are in tests/test_gpu_cache.py.

Every test uses its own ``Pipelines`` on a folder in ``tmp_path``; where a session must go
through it, it replaces the process-wide Runtime's ``pipelines`` for the test only
(``monkeypatch``). The exit-time save runs in a child interpreter.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import compare, subprocess_env
from tests.oracle import ELEMENTWISE, make_model, rand

_OK, _WHY = backend_availability("vulkan")
if not _OK:
    pytest.skip(f"Vulkan unavailable: {_WHY}", allow_module_level=True)

from mnnpy import cache_file  # noqa: E402
from mnnpy.backends.vulkan import pipeline as vp  # noqa: E402
from mnnpy.backends.vulkan.pipeline import Pipelines  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def vrt():
    """The process-wide Vulkan Runtime (its device is borrowed; its ``pipelines`` only through monkeypatch)."""
    from mnnpy.backend import get_runtime

    return get_runtime("vulkan")


@pytest.fixture
def vfolder(tmp_path, monkeypatch):
    """A fresh Vulkan cache folder, set through ``$MNNPY_VULKAN_CACHE`` for the test."""
    d = tmp_path / "vkcache"
    monkeypatch.setenv(vp.CACHE_ENV, str(d))
    return d


def _model(rng, op="Relu"):
    x = rand(rng, 3, 5, 37)
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node(op, ["a"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"]), {"x": x}


def _session_through(vrt, monkeypatch, pipelines, rng, op="Relu"):
    """Run a small model on Vulkan with ``pipelines`` as the Runtime's, checked against the CPU."""
    monkeypatch.setattr(vrt, "pipelines", pipelines)
    model, feeds = _model(rng, op)
    compare(model, feeds, ELEMENTWISE, True, backend="vulkan")


def _written(vrt, monkeypatch, rng) -> Pipelines:
    """A cache that created the model's pipelines and saved them (at the end of the resize)."""
    p = Pipelines(vrt)
    _session_through(vrt, monkeypatch, p, rng)
    assert p.stats["created"] >= 2 and p.stats["written"] == 1 and p.path.is_file()
    return p


def test_directory_from_env(vrt, tmp_path, monkeypatch):
    monkeypatch.setenv(vp.CACHE_ENV, str(tmp_path / "x"))
    p = Pipelines(vrt)
    assert p.path == tmp_path / "x" / vp.file_name(vrt.info) and (tmp_path / "x").is_dir()
    monkeypatch.delenv(vp.CACHE_ENV)
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path / "root"))
    assert Pipelines(vrt).path.parent == tmp_path / "root" / "vulkan"
    for off in ("0", "off", "OFF"):
        monkeypatch.setenv(vp.CACHE_ENV, off)
        assert Pipelines(vrt).path is None and vp.cache_directory() is None


def test_an_unknown_variant_fails_at_once_and_a_known_one_is_read_on_a_thread(vrt):
    from mnnpy.backends.vulkan.device import VulkanError
    from mnnpy.backends.vulkan.pipeline import Pipelines, spirv_names

    p = Pipelines(vrt)
    with pytest.raises(VulkanError, match="no_such_variant.spv"):
        p.get("no_such_variant", 2, 8)
    assert "unary_identity" in spirv_names() and "no_such_variant" not in p._modules
    assert p.get("unary_identity", 2, 12, ((0, 64),)).pipeline is not None  # module read and made on a thread


def test_a_variant_gone_since_it_was_listed_is_a_vulkan_error(vrt, monkeypatch):
    from mnnpy.backends.vulkan import pipeline as vp
    from mnnpy.backends.vulkan.device import VulkanError

    monkeypatch.setattr(vp, "spirv_names", lambda: frozenset({"ghost"}))  # listed, no file
    with pytest.raises(VulkanError, match="ghost.spv"):
        _ = vp.Pipelines(vrt).get("ghost", 2, 8).pipeline  # the module read fails on its thread


def test_file_name_and_key_name_the_device(vrt):
    info = vrt.info
    name, key = vp.file_name(info), vp.device_key(info)
    assert name.endswith(vp.SUFFIX) and (info.device_uuid or info.uuid).hex() in name
    assert f"{info.driver_version:08x}" in name and f"{info.vendor_id:04x}" in name
    assert info.uuid.hex() in key and info.device_uuid.hex() in key and f"driver {info.driver_version:#x}" in key
    other = dataclasses.replace(info, driver_version=info.driver_version + 1)
    assert vp.file_name(other) != name and vp.device_key(other) != key


def test_session_writes_then_fresh_cache_loads(vrt, vfolder, monkeypatch, rng):
    p = _written(vrt, monkeypatch, rng)
    assert p.stats["written"] == 1 and p.stats["loaded"] == 0 and os.listdir(vfolder) == [p.path.name]
    assert not p.save()  # nothing new since
    q = Pipelines(vrt)
    assert q.stats["loaded"] == 1 and q.stats["rejected"] == 0 and q.last_rejection is None
    _session_through(vrt, monkeypatch, q, rng)
    # new pipelines in the loaded cache are saved over the old file
    _session_through(vrt, monkeypatch, q, rng, "Sigmoid")
    assert q.stats["written"] >= 1 and os.listdir(vfolder) == [p.path.name]
    assert Pipelines(vrt).stats["loaded"] == 1


def test_file_layout(vrt, vfolder, monkeypatch, rng):
    p = _written(vrt, monkeypatch, rng)
    data = p.path.read_bytes()
    assert data.startswith(vp.MAGIC) and p.key.encode() in data
    payload = cache_file.unpack(data, vp.MAGIC, vp.FORMAT, p.key)
    assert data.endswith(payload) and payload == p.data()[: len(payload)]
    size, version, vendor, device, uuid = vp.VK_HEADER.unpack_from(payload)
    assert (version, vendor, device, uuid) == (1, vrt.info.vendor_id, vrt.info.device_id, vrt.info.uuid)
    assert vp.VK_HEADER.size <= size <= len(payload)


def _vk_header(vrt, **change) -> bytes:
    info = vrt.info
    fields = dict(size=32, version=1, vendor=info.vendor_id, device=info.device_id, uuid=info.uuid)
    fields.update(change)
    return vp.VK_HEADER.pack(fields["size"], fields["version"], fields["vendor"], fields["device"], fields["uuid"])


HEADERS = {
    "uuid": (dict(uuid=bytes(16)), "pipelineCacheUUID"),
    "vendor": (dict(vendor=0x1234), "vendorID"),
    "device": (dict(device=0x4321), "deviceID"),
    "version": (dict(version=2), "version 2"),
    "size-small": (dict(size=16), "size 16"),
    "size-large": (dict(size=4096), "size 4096"),
}


@pytest.mark.parametrize("case", list(HEADERS))
def test_consistent_file_with_foreign_vulkan_header_rejected(vrt, vfolder, monkeypatch, rng, case):
    """Outer hash and key right, but the payload's VkPipelineCacheHeaderVersionOne is another device's."""
    change, reason = HEADERS[case]
    p = Pipelines(vrt)
    vfolder.mkdir(exist_ok=True)
    p.path.write_bytes(cache_file.pack(vp.MAGIC, vp.FORMAT, p.key, _vk_header(vrt, **change) + b"\0" * 64))
    q = Pipelines(vrt)
    assert q.stats["rejected"] == 1 and q.stats["loaded"] == 0 and reason in q.last_rejection
    assert not q.path.exists()
    _session_through(vrt, monkeypatch, q, rng)


def test_short_vulkan_payload_rejected(vrt, vfolder):
    p = Pipelines(vrt)
    p.path.write_bytes(cache_file.pack(vp.MAGIC, vp.FORMAT, p.key, _vk_header(vrt)[:20]))
    q = Pipelines(vrt)
    assert q.stats["rejected"] == 1 and "Vulkan header truncated" in q.last_rejection


@pytest.mark.parametrize("other", ["device_uuid", "uuid", "driver_version"])
def test_file_of_another_device_renamed_into_place_rejected(vrt, vfolder, monkeypatch, rng, other):
    """A valid file written for another device UUID (or driver, or pipeline-cache UUID, which the
    file name does not hold: such a file is found under this device's name), renamed into place."""
    info = vrt.info
    value = {"driver_version": info.driver_version + 1}.get(other, bytes(range(16)))
    foreign = dataclasses.replace(info, **{other: value})
    header = vp.VK_HEADER.pack(32, 1, foreign.vendor_id, foreign.device_id, foreign.uuid)
    vfolder.mkdir()
    theirs = vfolder / vp.file_name(foreign)
    theirs.write_bytes(cache_file.pack(vp.MAGIC, vp.FORMAT, vp.device_key(foreign), header))
    ours = vfolder / vp.file_name(info)
    assert (theirs == ours) == (other == "uuid")
    if theirs != ours:
        os.replace(theirs, ours)
    q = Pipelines(vrt)
    assert q.stats["rejected"] == 1 and "another key" in q.last_rejection and not ours.exists()
    _session_through(vrt, monkeypatch, q, rng)


def test_disabled(vrt, tmp_path, monkeypatch, rng):
    monkeypatch.setenv(vp.CACHE_ENV, "off")
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    p = Pipelines(vrt)
    _session_through(vrt, monkeypatch, p, rng)
    assert p.path is None and not p.save() and p.stats["written"] == 0 and not (tmp_path / "vulkan").exists()


def test_uncreatable_directory(vrt, tmp_path, monkeypatch, rng):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(vp.CACHE_ENV, str(tmp_path / "file" / "vulkan"))
    with pytest.warns(RuntimeWarning, match="disk cache disabled"):
        p = Pipelines(vrt)
    _session_through(vrt, monkeypatch, p, rng)
    assert p.path is None and not p.save()


def test_unwritable_directory_warns_once(vrt, vfolder, monkeypatch, rng):
    """Writes that fail (read-only folder, full disk) warn once; pipelines still work."""

    def fail(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(vp, "atomic_write", fail)
    p = Pipelines(vrt)
    with pytest.warns(RuntimeWarning, match="cannot write"):
        _session_through(vrt, monkeypatch, p, rng)  # saved at the end of the resize
    assert not p.save()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _session_through(vrt, monkeypatch, p, rng, "Sigmoid")
        assert not p.save()
    assert p.stats["written"] == 0 and os.listdir(vfolder) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user for a read-only folder")
def test_read_only_directory(vrt, vfolder, monkeypatch, rng):
    vfolder.mkdir()
    vfolder.chmod(0o500)
    try:
        p = Pipelines(vrt)
        with pytest.warns(RuntimeWarning):
            _session_through(vrt, monkeypatch, p, rng)
    finally:
        vfolder.chmod(0o700)


EXIT_SCRIPT = """
import numpy as np
from onnx import helper
from tests.backend_compare import compare
from tests.oracle import ELEMENTWISE, make_model, rand

x = rand(np.random.default_rng(0), 3, 5, 37)
model = make_model([helper.make_node("Tanh", ["x"], ["y"])], {"x": x}, ["y"])
compare(model, {"x": x}, ELEMENTWISE, True, backend="vulkan")
"""


def test_saved_at_exit_then_loaded(vrt, vfolder, monkeypatch, rng):
    """A process that ran a session leaves the file at exit; the next Runtime's cache loads it."""
    env = subprocess_env()
    env.pop("MNNPY_VULKAN_VALIDATION", None)
    done = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    path = vfolder / vp.file_name(vrt.info)
    assert path.is_file()
    q = Pipelines(vrt)
    assert q.stats["loaded"] == 1 and q.stats["rejected"] == 0
    _session_through(vrt, monkeypatch, q, rng, "Tanh")


def test_devices_reports_the_cache(vrt, vfolder, monkeypatch, rng, capsys):
    from mnnpy.cli import main

    assert main(["devices"]) == 0
    assert f"cache: {vfolder} (pipeline cache {vp.file_name(vrt.info)} absent" in capsys.readouterr().out
    p = _written(vrt, monkeypatch, rng)
    assert main(["devices"]) == 0
    assert f"{p.path.name} {p.path.stat().st_size} bytes" in capsys.readouterr().out
    monkeypatch.setenv(vp.CACHE_ENV, "off")
    assert main(["devices"]) == 0
    assert f"cache: off (${vp.CACHE_ENV})" in capsys.readouterr().out

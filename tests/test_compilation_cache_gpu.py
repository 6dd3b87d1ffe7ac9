"""The GPU entries of the compilation cache (``create_session(cache_dir=...)``): OpenCL program
binaries (``opencl/<file>/<key hash>``) and the Vulkan pipeline cache (``vulkan/pipeline-cache``)
kept under the model's token. A warm session loads what the cold one saved; every tampering is
rejected with a ``RuntimeWarning`` and rebuilt, outputs equal to the cold session's: bytes
flipped at every 1/64 of each entry and truncations (through the store, and two through a
session), files swapped between tokens, consistent entries the driver must refuse (a binary
that does not build, a foreign Vulkan header), a file changed between its hash and its use.

Each test gives the process-wide Runtime a fresh in-memory program cache / pipeline set with
no folder of its own (``monkeypatch``), so that only the compilation cache carries anything
from one session to the next.
"""

from __future__ import annotations

import warnings
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import pytest

import mnnpy
from mnnpy import compilation_cache as cc
from mnnpy.backend import backend_availability, get_runtime
from mnnpy.cli import main as cli
from mnnpy.converter import convert
from tests.backend_compare import GPUS, conv_model, he_weights
from tests.test_compilation_cache import damaged, entry_files

PADS = {"pads": [1, 1, 1, 1]}
BACKENDS = [pytest.param(b, marks=pytest.mark.skipif(not backend_availability(b)[0], reason=f"{b} unavailable")) for b in GPUS]


def model(seed: int) -> tuple[mnnpy.Interpreter, dict]:
    """Conv 3x3 -> Relu -> Conv 3x3 on a 1x4x10x10 input (conv and elementwise programs)."""
    rng = np.random.default_rng(seed)
    m, feeds = conv_model(
        rng, (1, 4, 10, 10), (6, 4, 3, 3), PADS, after=[("Relu", {}, []), ("Conv", PADS, [he_weights(rng, 4, 6, 3, 3)])]
    )
    return mnnpy.Interpreter(convert(m)), feeds


@pytest.fixture
def fresh(monkeypatch):
    """``fresh(backend)``: the backend's Runtime with a new, folder-less program cache or
    pipeline set (call again for a 'new process'); returns that cache."""

    def make(backend: str):
        rt = get_runtime(backend)
        if backend == "opencl":
            from mnnpy.backends.opencl.program import ProgramCache

            monkeypatch.setattr(rt, "programs", ProgramCache(rt, None))
            return rt.programs
        from mnnpy.backends.vulkan.pipeline import Pipelines

        monkeypatch.setattr(rt, "pipelines", Pipelines(rt, None))
        return rt.pipelines

    return make


def run(interp, feeds, backend, folder, token=None, expect_warning=False):
    """The outputs of a session on ``backend`` with ``folder`` as its compilation cache, after
    checking whether a ``RuntimeWarning`` said an entry was rejected."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        s = interp.create_session(backend=backend, cache_dir=folder, cache_token=token)
        got = s.run(feeds)
        s.close()
    rejected = [str(w.message) for w in seen if "rejected" in str(w.message)]
    assert bool(rejected) == expect_warning, [str(w.message) for w in seen]
    return got


def entry_path(folder: Path, token: str, name: str) -> Path:
    """The file of entry ``name`` of ``token`` (as the mapping says now)."""
    return folder / "entries" / token / cc.read_mapping(folder)[token][name]["file"]


def gpu_names(folder: Path, token: str) -> dict[str, str]:
    """file -> entry name of ``token``'s GPU entries."""
    return {r["file"]: n for n, r in cc.read_mapping(folder)[token].items() if n.startswith(("opencl/", "vulkan/"))}


@pytest.fixture
def cold(tmp_path, fresh):
    """``cold(backend)``: (interpreter, feeds, outputs, token) after a cold session on ``tmp_path``."""

    def make(backend: str, seed: int = 1, token: str | None = None):
        interp, feeds = model(seed)
        cache = fresh(backend)
        want = run(interp, feeds, backend, tmp_path, token)
        assert cache.stats["written"] >= 1 if backend == "opencl" else cache.stats["created"] >= 2
        return interp, feeds, want, token or interp.model_token()

    return make


def same(got, want):
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("backend", BACKENDS)
def test_warm_session_loads_what_the_cold_one_saved(backend, cold, fresh, tmp_path, capsys):
    interp, feeds, want, token = cold(backend)
    ref = interp.create_session(backend="cpu").run(feeds)
    for k in ref:
        np.testing.assert_allclose(want[k], ref[k], rtol=1e-4, atol=1e-4)
    names = sorted(gpu_names(tmp_path, token).values())
    if backend == "opencl":
        assert len(names) >= 2 and all(n.startswith("opencl/") for n in names), names
    else:
        assert names == ["vulkan/pipeline-cache"]
    cache = fresh(backend)
    same(run(interp, feeds, backend, tmp_path), want)
    if backend == "opencl":
        assert cache.stats["built"] == 0 and cache.stats["disk_hits"] == len(names)
    else:
        assert cache.stats["loaded"] == 1 and cache.stats["rejected"] == 0
    assert cli(["cache", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in names), out


@pytest.mark.parametrize("backend", BACKENDS)
def test_flipped_bytes_and_truncation_are_rejected_and_rebuilt(backend, cold, fresh, tmp_path):
    interp, feeds, want, token = cold(backend)
    names = gpu_names(tmp_path, token)
    device = cc.read_mapping(tmp_path)[token][next(iter(names.values()))]["environment"].rsplit("; ", 1)[-1]
    for name in names.values():
        good = entry_path(tmp_path, token, name).read_bytes()
        variants = damaged(good)
        for bad in variants:  # every variant through the store (fast) ...
            entry_path(tmp_path, token, name).write_bytes(bad)
            with pytest.warns(RuntimeWarning, match="rejected"):
                assert cc.CompilationCache(tmp_path, token).load(name, device) is None
        entry_path(tmp_path, token, name).write_bytes(good)
        for bad in (variants[32], variants[-2]):  # ... and two through a session: rebuilt, outputs equal
            entry_path(tmp_path, token, name).write_bytes(bad)  # (a rebuilt entry is another file)
            cache = fresh(backend)
            same(run(interp, feeds, backend, tmp_path, expect_warning=True), want)
            assert cache.stats["built"] >= 1 if backend == "opencl" else cache.stats["loaded"] == 0
    fresh(backend)
    same(run(interp, feeds, backend, tmp_path), want)  # the rebuilt entries are good again


@pytest.mark.parametrize("backend", BACKENDS)
def test_swapped_files_and_consistent_bad_payloads_are_rejected(backend, cold, fresh, tmp_path):
    ta, tb = "a" * 64, "b" * 64
    interp, feeds, want, _ = cold(backend, 1, ta)
    cold(backend, 2, tb)
    a_files = {n: f for f, n in gpu_names(tmp_path, ta).items()}
    b_files = {n: f for f, n in gpu_names(tmp_path, tb).items()}
    shared = sorted(a_files.keys() & b_files.keys())
    assert shared
    for n in shared:  # b's file put in place of a's entry of the same name: its key says token b
        src, dst = tmp_path / "entries" / tb / b_files[n], tmp_path / "entries" / ta / a_files[n]
        dst.write_bytes(src.read_bytes())
    fresh(backend)
    same(run(interp, feeds, backend, tmp_path, ta, expect_warning=True), want)
    # entries consistent for the compilation cache that the backend must refuse
    cache = cc.CompilationCache(tmp_path, ta)
    mapping = cc.read_mapping(tmp_path)[ta]
    for n in shared:
        device = mapping[n]["environment"].rsplit("; ", 1)[-1]
        bad = b"\x00" + b"not a device binary" if backend == "opencl" else b"\x20\x00\x00\x00" + bytes(60)
        cache.save(n, device, bad)
    cache.flush()
    programs = fresh(backend)
    same(run(interp, feeds, backend, tmp_path, ta, expect_warning=True), want)
    assert programs.stats["rejected"] >= 1
    fresh(backend)
    same(run(interp, feeds, backend, tmp_path, ta), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_file_changed_between_hash_and_use(backend, cold, fresh, tmp_path, monkeypatch):
    interp, feeds, want, token = cold(backend)
    fresh(backend)
    same(run(interp, feeds, backend, tmp_path), want)  # OpenCL: binaries probed, saved marked (files stay)
    changed = []

    def change(path, data):  # the bytes in memory were checked; the file changes under them
        path.write_bytes(data[: len(data) // 2])
        changed.append(path)

    monkeypatch.setattr(cc, "after_verify", change)
    fresh(backend)
    same(run(interp, feeds, backend, tmp_path), want)  # used the verified bytes
    monkeypatch.setattr(cc, "after_verify", None)
    gpu = gpu_names(tmp_path, token)  # the session's plan (mnnpy.plan_cache) was changed too
    assert len([p for p in changed if p.name in gpu]) == len(gpu) and entry_files(tmp_path)
    fresh(backend)
    same(run(interp, feeds, backend, tmp_path, expect_warning=True), want)  # the next session sees it


@pytest.mark.skipif(not backend_availability("vulkan")[0], reason="vulkan unavailable")
def test_a_models_pipeline_entry_holds_its_own_pipelines(fresh, tmp_path):
    """Each token's pipelines go through a ``VkPipelineCache`` of its own
    (``Pipelines.adopt``): a model's entry is the same whether another model made pipelines
    in the process before it or not (it used to hold every pipeline the process had made),
    and a new process loads it and creates the model's pipelines from it."""
    from onnx import helper

    from tests.oracle import make_model, rand

    rng = np.random.default_rng(5)
    x = rand(rng, 2, 3, 5)
    other = mnnpy.Interpreter(convert(make_model([helper.make_node("Sigmoid", ["x"], ["y"])], {"x": x}, ["y"], {})))
    interp, feeds = model(1)
    token = interp.model_token()
    sizes = []
    for first in (None, other):
        folder = tmp_path / f"after-{first is not None}"
        pipelines = fresh("vulkan")
        through = []
        real = pipelines._create
        pipelines._create = lambda *a: through.append(a[-1].result() if isinstance(a[-1], Future) else a[-1]) or real(*a)
        if first is not None:
            run(first, {"x": x}, "vulkan", folder)
            assert len(through) >= 1
        made_before = len(through)
        run(interp, feeds, "vulkan", folder)
        own = pipelines._token_caches[token].result()  # adopted on a pipeline thread
        assert len(through) > made_before and all(c is own for c in through[made_before:])  # only its own cache
        assert all(c is not own and c is not pipelines.cache for c in through[:made_before])
        sizes.append(entry_path(folder, token, "vulkan/pipeline-cache").stat().st_size)
    assert sizes[0] == sizes[1], sizes  # (lavapipe's cache data is a header: equal either way)
    pipelines = fresh("vulkan")
    run(interp, feeds, "vulkan", tmp_path / "after-True")
    assert pipelines.stats["loaded"] == 1 and pipelines.stats["rejected"] == 0


@pytest.mark.skipif(not backend_availability("vulkan")[0], reason="vulkan unavailable")
def test_a_refused_pipeline_entry_is_replaced_when_its_pipelines_were_in_memory(cold, fresh, tmp_path):
    """A damaged pipeline entry is replaced at the end of the resize even when no pipeline was
    created for it (another token's session made them all in this process): the next process
    loads the new entry without a warning."""
    interp, feeds, want, token = cold("vulkan")
    path = entry_path(tmp_path, token, "vulkan/pipeline-cache")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    pipelines = fresh("vulkan")
    same(run(interp, feeds, "vulkan", tmp_path / "other", token="ab" * 32), want)  # every pipeline made here
    made = pipelines.stats["created"]
    same(run(interp, feeds, "vulkan", tmp_path, expect_warning=True), want)
    assert pipelines.stats["created"] == made  # all from memory
    again = fresh("vulkan")
    same(run(interp, feeds, "vulkan", tmp_path), want)  # no warning: the entry was replaced
    assert again.stats["loaded"] == 1 and again.stats["rejected"] == 0

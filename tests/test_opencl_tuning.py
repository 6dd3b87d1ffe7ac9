"""OpenCL work-group auto-tuning: candidates, timing, the persistent tuning cache, tampering.

Each test uses its own ``Tuner`` on a folder in ``tmp_path`` (session tests swap it into
the process-wide Runtime with ``monkeypatch``, which restores it).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability, get_runtime
from tests.backend_compare import compare
from tests.fifo import within
from tests.oracle import ELEMENTWISE, make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)

from mnnpy.backends.opencl import program as pc  # noqa: E402
from mnnpy.backends.opencl import tuning  # noqa: E402
from mnnpy.backends.opencl.launch import Launch, default_local  # noqa: E402
from mnnpy.backends.opencl.tuning import Tuner, candidates  # noqa: E402

SOURCE = """
__kernel void add2(__global float *x, int w, int h) {
    int i = get_global_id(0), j = get_global_id(1);
    if (i < w && j < h) x[j * w + i] += 2.0f;
}
__kernel void shared(__global float *x, int n) {
    __local float t[256];
    int i = get_global_id(0);
    t[get_local_id(0)] = i < n ? x[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i < n) x[i] = t[get_local_id(0)] + 2.0f;
}
__attribute__((reqd_work_group_size(16, 1, 1)))
__kernel void fixed(__global float *x, int n) { int i = get_global_id(0); if (i < n) x[i] += 2.0f; }
"""


_ALIVE: list = []  # clSetKernelArg does not retain buffers: keep each test's alive until it ends


@pytest.fixture(autouse=True)
def _keep_buffers():
    yield
    get_runtime("opencl").queue.finish()
    _ALIVE.clear()


def _launch(rt, work, name="add2", local=None):
    """A Launch of ``name`` over ``work`` on a fresh buffer; returns (launch, buffer, host data)."""
    cl = rt.cl
    prg = cl.Program(rt.context, SOURCE).build()
    k = cl.Kernel(prg, name)
    n = int(np.prod(work))
    x = np.arange(n, dtype=np.float32)
    buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
    _ALIVE.append(buf)
    k.set_args(buf, *[np.int32(w) for w in work])
    limit = k.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, rt.device)
    la = Launch(cl, rt, k, work, local or default_local(work, limit), f"test.cl:{name}:")  # enqueues on rt.queue
    return la, buf, x, limit


def _result(rt, la, buf, x):
    """Reset the buffer, run the launch once, check ``x + 2``."""
    cl = rt.cl
    cl.enqueue_copy(rt.queue, buf, x, is_blocking=True)
    la()
    out = np.empty_like(x)
    cl.enqueue_copy(rt.queue, out, buf, is_blocking=True)
    np.testing.assert_array_equal(out, x + 2)


def _doc(folder):
    return json.loads((folder / tuning.FILE).read_text())


def test_candidates():
    dims = (1024, 1024, 64)
    wide = candidates((37, 5), (32, 2), 256, dims, "wide")
    assert wide[0] == (32, 2) and len(set(wide)) == len(wide)
    assert set(wide) == {(a, b) for a in (1, 2, 4, 8, 16, 32, 64) for b in (1, 2, 4, 8) if a * b <= 256}
    fast = candidates((11557,), (64,), 1024, dims, "fast")
    assert fast == [(64,), (32,), (128,), (256,)]
    fast2 = candidates((300, 300), (64, 1), 1024, dims, "fast")
    assert fast2[0] == (64, 1) and (8, 8) in fast2 and (16, 16) in fast2 and len(fast2) <= 9
    # device per-dimension limits and the kernel's limit
    assert all(c[2] <= 4 for c in candidates((512, 512, 512), (8, 8, 1), 1024, (1024, 1024, 4), "wide")[1:])
    assert all(np.prod(c) <= 32 for c in candidates((512, 512), (8, 4), 32, dims, "wide"))
    assert candidates((1,), (1,), 256, dims, "wide") == [(1,)]


@pytest.mark.parametrize("mode", ["fast", "wide"])
def test_tune_times_applies_and_persists(rt, folder, mode):
    la, buf, x, limit = _launch(rt, (61, 13))
    default = la.local
    t = Tuner(rt)
    t.tune(la, mode, limit)
    n = len(candidates(la.work, default, limit, rt.device.max_work_item_sizes, mode))
    assert t.stats["tuned"] == 1 and t.stats["timings"] == n * tuning.REPEATS[mode]
    _result(rt, la, buf, x)
    assert la.glob == tuple(-(-w // v) * v for w, v in zip(la.work, la.local))
    doc = _doc(folder)
    (key, entry), *rest = doc["entries"].items()
    assert not rest and key.endswith("|test.cl:add2:|61x13") and rt.device.name in key
    assert entry == {"local": list(la.local), "mode": mode}
    # a fresh Tuner (a new process) applies the stored size without timing
    la2, buf2, x2, _ = _launch(rt, (61, 13))
    t2 = Tuner(rt)
    t2.tune(la2, mode, limit)
    assert t2.stats == dict(hits=1, tuned=0, timings=0, skipped=0, rejected=0) and la2.local == la.local
    _result(rt, la2, buf2, x2)


def test_wide_result_serves_fast_not_the_reverse(rt, folder):
    la, _, _, limit = _launch(rt, (61, 13))
    t = Tuner(rt)
    t.tune(la, "fast", limit)
    lb = _launch(rt, (61, 13))
    t.tune(lb[0], "wide", limit)
    assert t.stats["tuned"] == 2 and t.stats["hits"] == 0
    assert next(iter(_doc(folder)["entries"].values()))["mode"] == "wide"
    t2 = Tuner(rt)
    lc = _launch(rt, (61, 13))
    t2.tune(lc[0], "fast", limit)
    assert t2.stats["hits"] == 1 and t2.stats["timings"] == 0


def test_other_work_size_other_entry(rt, folder):
    t = Tuner(rt)
    for work in [(61, 13), (64, 13), (61, 1)]:
        la, buf, x, limit = _launch(rt, work)
        t.tune(la, "fast", limit)
        _result(rt, la, buf, x)
    assert t.stats["tuned"] == 3 and len(_doc(folder)["entries"]) == 3


def test_mode_none_never_times_nor_reads(rt, folder):
    la, _, _, limit = _launch(rt, (61, 13))
    Tuner(rt).tune(la, "wide", limit)
    la2, buf, x, _ = _launch(rt, (61, 13), local=(1, 1))
    t = Tuner(rt)
    t.tune(la2, "none", limit)
    assert la2.local == (1, 1) and t.stats == dict(hits=0, tuned=0, timings=0, skipped=0, rejected=0)
    _result(rt, la2, buf, x)


def test_local_size_dependent_kernels_not_tuned(rt, folder):
    t = Tuner(rt)
    for name, local in [("shared", (256,)), ("fixed", (16,))]:
        la, buf, x, limit = _launch(rt, (1000,), name, local)
        t.tune(la, "wide", limit)
        assert la.local == local
        _result(rt, la, buf, x)
    assert t.stats["skipped"] == 2 and t.stats["timings"] == 0 and not (folder / tuning.FILE).exists()


@pytest.mark.parametrize(
    "tamper",
    ["entry-edited", "hash-edited", "garbage", "empty", "truncated", "format", "malformed-entry"],
)
def test_tampered_file_discarded_and_retuned(rt, folder, tamper):
    la, _, _, limit = _launch(rt, (61, 13))
    Tuner(rt).tune(la, "fast", limit)
    path = folder / tuning.FILE
    doc = _doc(folder)
    key = next(iter(doc["entries"]))
    if tamper == "entry-edited":
        doc["entries"][key]["local"] = [1, 1]
    elif tamper == "hash-edited":
        doc["sha256"] = "0" * 64
    elif tamper == "format":
        doc["format"] = 99
    elif tamper == "malformed-entry":
        doc["entries"][key]["local"] = [0, "x"]
        doc["sha256"] = tuning._digest(doc["entries"])
    text = {"garbage": "\x00\xff not json", "empty": "", "truncated": path.read_text()[:40]}.get(tamper, json.dumps(doc))
    path.write_bytes(text.encode("latin-1"))
    la2, buf, x, _ = _launch(rt, (61, 13))
    t = Tuner(rt)
    t.tune(la2, "fast", limit)
    assert t.stats["rejected"] == 1 and t.stats["hits"] == 0 and t.stats["tuned"] == 1, t.stats
    assert t.last_rejection.startswith(tuning.FILE)
    _result(rt, la2, buf, x)
    new = _doc(folder)  # rewritten, valid
    assert new["sha256"] == tuning._digest(new["entries"]) and new["entries"][key]["local"] == list(la2.local)
    assert Tuner(rt)._load()[key]["local"] == list(la2.local)


def test_named_pipe_tuning_file_discarded(rt, folder):
    """Defect 3 of issue 12: a FIFO named ``tuning.json`` blocked session creation forever."""
    la, buf, x, limit = _launch(rt, (61, 13))
    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / tuning.FILE)
    t = Tuner(rt)
    within(20, lambda: t.tune(la, "fast", limit), folder / tuning.FILE)
    assert t.stats["rejected"] == 1 and "named pipe" in t.last_rejection and t.stats["tuned"] == 1
    _result(rt, la, buf, x)
    assert (folder / tuning.FILE).is_file() and Tuner(rt)._load()


def test_keeps_other_processes_entries(rt, folder):
    """Saving merges into the file as it is on disk now."""
    a, b = Tuner(rt), Tuner(rt)
    la, _, _, limit = _launch(rt, (61, 13))
    a._load(), b._load()  # both loaded the (empty) file
    a.tune(la, "fast", limit)
    lb = _launch(rt, (64, 13))
    b.tune(lb[0], "fast", limit)
    assert len(_doc(folder)["entries"]) == 2


def test_without_disk_cache(rt, tmp_path, monkeypatch):
    monkeypatch.setenv(pc.CACHE_ENV, "off")
    la, buf, x, limit = _launch(rt, (61, 13))
    t = Tuner(rt)
    t.tune(la, "fast", limit)
    lb = _launch(rt, (61, 13))
    t.tune(lb[0], "fast", limit)
    assert t.path is None and t.stats["tuned"] == 1 and t.stats["hits"] == 1
    _result(rt, la, buf, x)


def test_unwritable_tuning_file(rt, folder, monkeypatch):
    def fail(path, data):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(tuning, "atomic_write", fail)
    la, buf, x, limit = _launch(rt, (61, 13))
    t = Tuner(rt)
    with pytest.warns(RuntimeWarning, match="cannot write"):
        t.tune(la, "fast", limit)
    _result(rt, la, buf, x)


def _model(rng):
    x = rand(rng, 13, 7, 127)
    y = rand(rng, 7, 127)
    nodes = [helper.make_node("Add", ["x", "y"], ["a"]), helper.make_node("Relu", ["a"], ["r"])]
    return make_model(nodes, {"x": x, "y": y}, ["r"]), {"x": x, "y": y}


def test_session_fast_tuning_persists(rt, folder, monkeypatch, rng):
    model, feeds = _model(rng)
    monkeypatch.setattr(rt, "tuner", Tuner(rt))
    compare(model, feeds, ELEMENTWISE, tuning="fast")
    assert rt.tuner.stats["tuned"] == 2 and rt.tuner.stats["timings"] > 0
    entries = _doc(folder)["entries"]
    # keyed by the work size: the broadcasting Add one item per element, Relu 4 elements per item
    assert len(entries) == 2 and all(e["mode"] == "fast" for e in entries.values())
    assert {(k.split("|")[-2].split(":")[1], k.split("|")[-1]) for k in entries} == {("binary", "11557"), ("unary", "2890")}
    # a second "process": cache hits, no timing, same outputs
    monkeypatch.setattr(rt, "tuner", Tuner(rt))
    compare(model, feeds, ELEMENTWISE, tuning="fast")
    assert rt.tuner.stats["hits"] == 2 and rt.tuner.stats["timings"] == 0


def test_session_tuning_none(rt, folder, monkeypatch, rng):
    model, feeds = _model(rng)
    monkeypatch.setattr(rt, "tuner", Tuner(rt))
    compare(model, feeds, ELEMENTWISE, tuning="none")
    assert rt.tuner.stats == dict(hits=0, tuned=0, timings=0, skipped=0, rejected=0)
    assert not (folder / tuning.FILE).exists()

"""mnnpy on a local Ray cluster (``ray.init(num_cpus=2)``): SessionMapper in ``map_batches``
gives what RowMapper gives here; ``mnnpy ocr --ray`` and ``mnnpy vad DIR --ray`` write the same
bytes as the local runs; an actor killed mid-job is restarted and every input comes back
exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from mnnpy.cli import main
from tests.test_session_spec import scale_model
from tests.test_vad_folder import write_wavs

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'mnnpy[ray]')")
pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'ray[data]')")

import mnnpy  # noqa: E402
import mnnpy.ray  # noqa: E402
from mnnpy.apps import folder_job  # noqa: E402
from mnnpy.apps.ocr_rows import OcrRows, ocr_specs  # noqa: E402
from mnnpy.row_mapper import RowMapper  # noqa: E402

LINES = 12


@pytest.fixture(scope="module")
def cluster():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never one running here
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # CrashOnce travels by value
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def lines_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lines")
    assert main(["eval", "ocr", "--lines", str(LINES), "--seed", "5", "--save-images", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def local_run(lines_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "local.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out)]) == 0
    return out


def test_session_mapper_in_map_batches_matches_row_mapper(cluster):
    spec = mnnpy.SessionSpec(scale_model(4), num_threads=1)
    x = np.random.default_rng(1).standard_normal((10, 3)).astype(np.float32)
    rows = [{"id": i, "x": x[i] if i != 6 else np.zeros(5, np.float32)} for i in range(10)]
    ds = ray.data.from_items(rows, override_num_blocks=3)
    mapped = ds.map_batches(
        mnnpy.ray.SessionMapper, fn_constructor_args=(spec,), compute=ray.data.ActorPoolStrategy(size=2), batch_size=3
    )
    got = sorted(mapped.take_all(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == list(range(10))
    assert got[6]["error"].startswith("InputError") and "expected 3" in got[6]["error"]
    local = RowMapper(spec)({"x": x[[i for i in range(10) if i != 6]]})
    ran = [r for r in got if r["id"] != 6]
    assert all(r["error"] == "" for r in ran)
    np.testing.assert_array_equal(np.stack([r["y"] for r in ran]), local["y"])
    np.testing.assert_array_equal(np.array([r["s"] for r in ran]), local["s"])


def test_an_actor_no_node_can_hold_is_an_input_error(cluster):
    ds = ray.data.from_items([{"x": np.zeros(3, np.float32)}])
    spec = mnnpy.SessionSpec(scale_model(4))
    with pytest.raises(mnnpy.InputError, match="asks for 3 CPUs, but the largest node of the Ray cluster has 2"):
        mnnpy.ray.map_rows(ds, RowMapper, spec, cpus_per_worker=3)
    if mnnpy.ray.gpus_in_cluster() == 0:
        with pytest.raises(mnnpy.InputError, match="asks for 1 GPUs"):
            mnnpy.ray.map_rows(ds, RowMapper, spec, gpus_per_worker=1)
    for bad, words in (({"workers": 10**6}, "workers must be an int from 1 to 1024"), ({"workers": True}, "workers must be")):
        with pytest.raises(mnnpy.InputError, match=words):
            mnnpy.ray.map_rows(ds, RowMapper, spec, **bad)
    for cpus in (float("nan"), "1", True):
        with pytest.raises(mnnpy.InputError, match="cpus_per_worker must be"):
            mnnpy.ray.map_rows(ds, RowMapper, spec, cpus_per_worker=cpus)


def _within(seconds: float, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``'s result (or its exception) where it returns within ``seconds``;
    a failed test, never a hung suite, where it waits longer (as Ray does for what no node has)."""
    box: dict = {}

    def call():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - raised again in the test's thread
            box["error"] = e

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{getattr(fn, '__name__', fn)} still waits after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_backend_check_no_node_can_hold_is_refused_before_its_task(cluster, lines_dir, tmp_path, capfd):
    with pytest.raises(mnnpy.InputError, match="asks for 3 CPUs, but the largest node of the Ray cluster has 2"):
        _within(30, mnnpy.ray.check_backend, mnnpy.SessionSpec(scale_model(4)), cpus_per_worker=3)
    out = tmp_path / "r.jsonl"
    assert _within(60, main, ["ocr", str(lines_dir), "--out", str(out), "--ray", "--threads", "3"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("error: an actor asks for 3 CPUs") and err.count("\n") == 1 and not out.exists(), err


def test_map_rows_checks_the_mapper_and_the_rows_before_any_actor_starts(cluster):
    spec = mnnpy.SessionSpec(scale_model(4))
    ds = ray.data.from_items([{"x": np.zeros(3, np.float32)}])
    for args, kwargs, words in [
        ((RowMapper, "model.mnnpy"), {}, "RowMapper takes a mnnpy.SessionSpec"),
        ((mnnpy.ray.SessionMapper, spec), {"rows": "all"}, "rows must be 'sample'"),
        ((RowMapper, spec), {"max_batch": 0}, "max_batch must be a positive int"),
        ((RowMapper, spec), {"inputs": ["x"]}, "inputs must map model input names"),
        ((mnnpy.ray.SessionMapper, spec), {"colour": 1}, "SessionMapper does not take these arguments: .* 'colour'"),
        ((RowMapper,), {}, "RowMapper does not take these arguments: missing a required argument: 'spec'"),
        (("RowMapper", spec), {}, "map_rows takes a row class"),
        ((RowMapper, spec), {"inputs": {"x": "image"}}, "the dataset has no column 'image'"),
    ]:
        with pytest.raises(mnnpy.InputError, match=words):
            mnnpy.ray.map_rows(ds, *args, **kwargs)
    for call in (lambda: mnnpy.ray.check_schema([1, 2]), lambda: mnnpy.ray.map_rows([1, 2], RowMapper, spec)):
        with pytest.raises(mnnpy.InputError, match="expected a ray.data.Dataset .*, got list"):
            call()


def test_map_rows_takes_session_mapper_as_it_takes_row_mapper(cluster):
    spec = mnnpy.SessionSpec(scale_model(4), num_threads=1)
    x = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    ds = ray.data.from_items([{"id": i, "x": x[i]} for i in range(5)])
    mapped = mnnpy.ray.map_rows(ds, mnnpy.ray.SessionMapper, spec, batch_size=5)
    got = sorted(_within(180, mapped.take_all), key=lambda r: r["id"])
    assert [r["error"] for r in got] == [""] * 5
    np.testing.assert_array_equal(np.stack([r["y"] for r in got]), RowMapper(spec)({"x": x})["y"])


def test_ray_starts_its_own_cluster_even_where_one_runs(cluster):
    here = ray.get_runtime_context().gcs_address
    code = "import ray, mnnpy.ray; mnnpy.ray.connect(None, num_cpus=1); print(ray.get_runtime_context().gcs_address)"
    env = {**os.environ, "RAY_ADDRESS": here}  # what ray.init(address=None) would join
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] != here


def test_ocr_on_ray_writes_the_local_bytes(cluster, lines_dir, local_run, tmp_path, capsys):
    out = tmp_path / "ray.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out), "--ray", "--batch-size", "3"]) == 0
    assert "Ray, 2 actor(s)" in capsys.readouterr().out
    assert out.read_bytes() == local_run.read_bytes()
    assert len(out.read_text().splitlines()) == LINES


def test_vad_on_ray_writes_the_local_bytes(cluster, tmp_path):
    write_wavs(tmp_path / "wavs")
    here, there = tmp_path / "here.jsonl", tmp_path / "ray.jsonl"
    assert main(["vad", str(tmp_path / "wavs"), "--out", str(here)]) == 1  # the broken file
    assert main(["vad", str(tmp_path / "wavs"), "--out", str(there), "--ray", "--batch-size", "1"]) == 1
    assert there.read_bytes() == here.read_bytes() and len(here.read_text().splitlines()) == 4


class CrashOnce(OcrRows):
    """OcrRows whose process dies (``os._exit``) the first time it meets ``crash_on``; ``marker``
    records that it did, so the restarted actor runs the batch again."""

    def __init__(self, specs, root, crash_on: str, marker: str, gpu_ids=()):
        super().__init__(specs, root, gpu_ids)
        self.crash_on, self.marker = crash_on, marker

    def __call__(self, batch):
        if self.crash_on in list(batch["path"]) and not os.path.exists(self.marker):
            with open(self.marker, "w") as f:
                f.write(str(os.getpid()))
            os._exit(1)
        return super().__call__(batch)


def test_a_killed_actor_is_restarted_and_no_input_is_lost_or_repeated(cluster, lines_dir, local_run, tmp_path):
    paths = folder_job.list_inputs(lines_dir, (".png",))
    marker = tmp_path / "crashed"
    kwargs = {"crash_on": paths[5], "marker": str(marker)}
    results = folder_job.run_ray(CrashOnce, (ocr_specs(), str(lines_dir)), kwargs, paths, 2, 2, 0, lambda n: None)
    assert marker.exists()  # an actor did die mid-job
    assert sorted(results) == paths  # each input once (run_ray raises on a repeated one)
    lines = folder_job.checked_results(paths, results)
    assert [json.loads(line) for line in lines] == [json.loads(line) for line in local_run.read_text().splitlines()]


def _map(items, batch_size: int, **options) -> list[dict]:
    """``items`` (one block each, so that Ray Data batches rows of different blocks together)
    through SessionMapper on the scale model, sorted by id."""
    spec = mnnpy.SessionSpec(scale_model("n"), num_threads=1)
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    mapped = ds.map_batches(
        mnnpy.ray.SessionMapper,
        fn_constructor_args=(spec,),
        fn_constructor_kwargs=options,
        compute=ray.data.ActorPoolStrategy(size=1),
        batch_size=batch_size,
    )
    return sorted(mapped.take_all(), key=lambda r: r["id"])


@pytest.mark.parametrize("batch_size", [1, 3])
def test_rows_of_mixed_rank_keep_their_shape_or_get_an_error(cluster, batch_size):
    """Ray Data pads a column's rows to the highest rank among them, and stops the job when
    blocks of different ranks meet: no row comes back reshaped, and the job runs to its end."""
    x = np.arange(3, dtype=np.float32)
    rows = [{"id": i, "x": x + i} for i in range(4)] + [{"id": 4, "x": np.stack([x, x])}]
    got = _map(rows, batch_size)
    assert [r["id"] for r in got] == list(range(5))
    assert "rows are samples (1-D), got a row of shape (2, 3)" in got[4]["error"]
    for r in got[:4]:  # each ran as the sample it is, or failed saying why (Ray padded it to (1, 3))
        if r["error"]:
            assert "got a row of shape (1, 3)" in r["error"] and "Ray Data pads" in r["error"]
        else:
            np.testing.assert_array_equal(r["y"], 2 * (x + r["id"]))
            assert np.asarray(r["s"]).shape == ()
    assert sum(not r["error"] for r in got) >= 2


def test_whole_rows_keep_their_shapes_on_ray(cluster):
    rows = [{"id": i, "x": np.full((i + 1, 3), i, np.float32)} for i in range(3)] + [{"id": 3, "x": np.zeros((2, 4), np.float32)}]
    got = _map(rows, 2, rows="whole")
    assert [np.asarray(r["y"]).shape for r in got] == [(1, 3), (2, 3), (3, 3), (0, 0)]
    assert [r["error"] == "" for r in got] == [True, True, True, False] and "expected 3" in got[3]["error"]
    np.testing.assert_array_equal(got[2]["s"], np.full(3, 6, np.float32))


def test_rows_of_mixed_dtypes_are_refused_before_the_job(cluster):
    x = np.arange(3, dtype=np.float32)
    ds = ray.data.from_items([{"x": x}, {"x": x.astype(np.int64)}], override_num_blocks=2)
    with pytest.raises(mnnpy.InputError, match="no common schema .*give each column one dtype"):
        mnnpy.ray.map_rows(ds, RowMapper, mnnpy.SessionSpec(scale_model("n")))
    mnnpy.ray.check_schema(ray.data.from_items([{"x": x}, {"x": x}], override_num_blocks=2))


def test_an_unavailable_backend_on_ray_is_one_error_line(cluster, lines_dir, tmp_path, capfd):
    out = tmp_path / "r.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out), "--ray", "--backend", "vulkan:99"]) == 2
    err = capfd.readouterr().err
    assert err.startswith("error: backend 'vulkan:99' is unavailable") and err.count("\n") == 1, err
    assert "checked on a node of the Ray cluster" in err and not out.exists()


def test_ray_reports_the_actors_it_started(cluster, lines_dir, local_run, tmp_path, capsys):
    out = tmp_path / "ray.jsonl"
    assert main(["ocr", str(lines_dir), "--out", str(out), "--ray", "--workers", "1024", "--batch-size", "6"]) == 0
    assert "Ray, 2 actor(s)" in capsys.readouterr().out  # 12 lines in 2 batches
    assert out.read_bytes() == local_run.read_bytes()

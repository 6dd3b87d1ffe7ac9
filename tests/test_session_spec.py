"""SessionSpec (a picklable prepared session) in spawned workers, and RowMapper (rows through a
session: batching to the model's batch dimension, padding, errors per row). No Ray here:
tests/test_ray.py runs the same on a local Ray cluster."""

from __future__ import annotations

import multiprocessing
import pickle
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.row_mapper import RowMapper
from tests.oracle import make_model


def scale_model(batch) -> bytes:
    """``x (batch, 3) float32 -> y = 2 x (batch, 3), s = sum over axis 1 (batch,)``, as .mnnpy bytes."""
    nodes = [helper.make_node("Mul", ["x", "c"], ["y"]), helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, axes=[1])]
    inputs = {"x": np.zeros((4, 3), np.float32)}
    c = {"c": np.array(2.0, np.float32)}
    return convert(make_model(nodes, inputs, ["y", "s"], c, opset=12, input_shapes={"x": [batch, 3]}))


def _run_in_child(spec: mnnpy.SessionSpec, x: np.ndarray) -> np.ndarray:
    """In a spawned worker: a Session from the pickled spec, run on ``x``."""
    return spec.create_session().run({"x": x})["y"]


def test_import_mnnpy_never_imports_ray():
    code = "import sys, mnnpy, mnnpy.row_mapper, mnnpy.apps.folder_job; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_session_does_not_pickle_but_its_spec_does(tmp_path):
    path = tmp_path / "m.mnnpy"
    path.write_bytes(scale_model("n"))
    spec = mnnpy.SessionSpec(path, num_threads=1, cache_dir=tmp_path / "cache")
    with pytest.raises(TypeError, match="cannot be pickled: give workers a mnnpy.SessionSpec"):
        pickle.dumps(spec.create_session())
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and back.model == str(path) and back.cache_dir == str(tmp_path / "cache")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(back.create_session().run({"x": x})["y"], 2 * x)
    assert "bytes>" in repr(mnnpy.SessionSpec(scale_model("n")))


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_spec_makes_its_session_in_a_spawned_worker(method):
    spec = mnnpy.SessionSpec(scale_model("n"), num_threads=1)
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    with multiprocessing.get_context(method).Pool(1) as pool:
        got = pool.apply(_run_in_child, (spec, x))
    np.testing.assert_array_equal(got, spec.create_session().run({"x": x})["y"])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"model": 3}, "path or the model's bytes"),
        ({"precision": "double"}, "precision"),
        ({"num_threads": 0}, "num_threads"),
        ({"backend": "cpu:01"}, "malformed device name"),
        ({"backend": []}, "backend must be"),
        ({"cache_token": "abc"}, "cache_token"),
        ({"priority": "urgent"}, "priority"),
        ({"memory_limit": -1}, "memory_limit"),
        ({"model": b""}, "bytes are empty"),
        ({"model": ""}, "path is empty"),
        ({"backend": "gpu"}, "unknown backend 'gpu'"),
        ({"backend": "gpu:0"}, "unknown backend 'gpu'"),
        ({"backend": ["vulkan", "tpu"]}, "unknown backend 'tpu'"),
        ({"backend": "opencl,gpu"}, "unknown backend 'gpu'"),
        ({"backend": "auto:1"}, "'auto' stands alone"),
        ({"backend": ["auto", "cpu"]}, "'auto' stands alone"),
    ],
)
def test_bad_options_are_input_errors(kwargs, words):
    args = {"model": b"x", **kwargs}
    with pytest.raises(mnnpy.InputError, match=words):
        mnnpy.SessionSpec(args.pop("model"), **args)


@pytest.mark.parametrize(
    "backend, kept",
    [
        ("cpu", "cpu"),
        ("vulkan:1", "vulkan:1"),  # a device index: whether it exists is the worker's machine's question
        ("auto", "auto"),
        (["vulkan:0", "cpu"], ("vulkan:0", "cpu")),
        ("opencl, cpu", ("opencl", "cpu")),  # the list create_session makes of the string
    ],
)
def test_known_backend_names_are_kept(backend, kept):
    assert mnnpy.SessionSpec(b"x", backend=backend).backend == kept


def test_check_backend_says_what_create_session_would_here():
    mnnpy.SessionSpec(b"x", backend="cpu").check_backend()
    mnnpy.SessionSpec(b"x", backend="auto").check_backend()
    with pytest.raises(mnnpy.BackendUnavailableError, match="backend .vulkan:99. is unavailable"):
        mnnpy.SessionSpec(b"x", backend="vulkan:99").check_backend()
    mnnpy.SessionSpec(b"x", backend=["vulkan:99", "cpu"]).check_backend()  # a list skips it, as create_session does


def test_a_missing_model_fails_where_the_session_is_made(tmp_path):
    spec = mnnpy.SessionSpec(tmp_path / "none.mnnpy")  # it may exist on a worker's machine
    with pytest.raises(mnnpy.MnnpyError):
        spec.create_session()


def test_on_gpus_moves_only_a_bare_gpu_api():
    spec = mnnpy.SessionSpec(b"x")
    assert spec.on_gpus([0]) is spec and mnnpy.SessionSpec(b"x", backend="vulkan").on_gpus([]).backend == "vulkan"
    gpus = [d for d in mnnpy.devices() if d.backend == "vulkan" and d.type == "gpu"]
    moved = mnnpy.SessionSpec(b"x", backend="vulkan").on_gpus([0]).backend
    assert moved == (gpus[0].id if gpus else "vulkan")


def _expected(x):
    return 2 * x, x.sum(axis=1)


@pytest.mark.parametrize("batch", [4, "n"])
def test_row_mapper_batches_pads_and_keeps_order(batch):
    mapper = RowMapper(mnnpy.SessionSpec(scale_model(batch), num_threads=1), max_batch=3)
    assert mapper.fixed_batch == (4 if batch == 4 else None)
    x = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    out = mapper({"x": x, "id": np.arange(7)})
    assert list(out) == ["id", "y", "s", "error"]
    np.testing.assert_array_equal(out["id"], np.arange(7))
    y, s = _expected(x)
    np.testing.assert_array_equal(out["y"], y)
    np.testing.assert_allclose(out["s"], s, rtol=1e-6)
    assert list(out["error"]) == [""] * 7


def test_row_mapper_reports_bad_rows_and_runs_the_rest():
    mapper = RowMapper(mnnpy.SessionSpec(scale_model(4), num_threads=1))
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    rows = np.empty(5, dtype=object)
    rows[:] = [x[0], np.zeros(4, np.float32), x[2], x[3].astype(np.float64), np.zeros((2, 2, 2), np.float32)]
    out = mapper({"x": rows})
    assert out["error"][0] == out["error"][2] == ""
    assert out["error"][1].startswith("InputError") and "expected 3" in out["error"][1]
    assert out["error"][3].startswith("InputError") and "float64" in out["error"][3]
    assert out["error"][4].startswith("InputError") and "rows are samples (1-D)" in out["error"][4]
    np.testing.assert_array_equal(out["y"][0], 2 * x[0])
    np.testing.assert_array_equal(out["y"][2], 2 * x[2])
    assert out["y"][1].shape == (0,) and out["y"][3].shape == (0,)


def test_row_mapper_whole_inputs_and_configuration_errors():
    mapper = RowMapper(mnnpy.SessionSpec(scale_model("n"), num_threads=1), outputs=["s"], rows="whole")
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)  # each row a whole (2, 3) input
    out = mapper({"x": x})
    assert list(out) == ["s", "error"]
    np.testing.assert_array_equal(out["s"], x.sum(axis=2))
    with pytest.raises(mnnpy.InputError, match="rows must be 'sample'"):
        RowMapper(mnnpy.SessionSpec(scale_model("n")), rows="auto")
    lacking = mapper({"id": np.arange(2), "z": x})  # every row's error; the job goes on
    assert list(lacking["error"]) == ["InputError: the batch has no column 'x' (its columns: ['id', 'z'])"] * 2
    assert lacking["s"].shape == (2, 0) and list(lacking["id"]) == [0, 1]
    spec = mnnpy.SessionSpec(scale_model("n"))
    with pytest.raises(mnnpy.InputError, match="no model input or output named 'q'"):
        RowMapper(spec, outputs=["q"])
    with pytest.raises(mnnpy.InputError, match="max_batch"):
        RowMapper(spec, max_batch=0)


@pytest.mark.parametrize(
    "args, kwargs, words",
    [
        (("model.mnnpy",), {}, "RowMapper takes a mnnpy.SessionSpec"),
        ((), {"rows": "all"}, "rows must be 'sample'"),
        ((), {"max_batch": True}, "max_batch must be a positive int"),
        ((), {"inputs": ["x"]}, "inputs must map model input names to column names"),
        ((), {"outputs": "y"}, "outputs must be a list"),
        ((), {"outputs": ["q"]}, "no model input or output named 'q'"),
        ((), {"inputs": {"x": "image", "w": "weights"}}, "no model input or output named 'w'"),
    ],
)
def test_row_mapper_check_refuses_what_the_constructor_would_without_a_session(args, kwargs, words):
    args = args or (mnnpy.SessionSpec(scale_model("n")),)
    with pytest.raises(mnnpy.InputError, match=words):
        RowMapper.check(*args, **kwargs)
    with pytest.raises(mnnpy.InputError, match=words):
        RowMapper(*args, **kwargs)


def test_row_mapper_check_gives_the_columns_a_batch_needs(tmp_path):
    assert RowMapper.check(mnnpy.SessionSpec(scale_model("n"))) == ["x"]
    assert RowMapper.check(mnnpy.SessionSpec(scale_model("n")), inputs={"x": "image"}) == ["image"]
    elsewhere = mnnpy.SessionSpec(tmp_path / "on_the_nodes.mnnpy")  # a path only the cluster's nodes have
    assert RowMapper.check(elsewhere) is None and RowMapper.check(elsewhere, inputs={"x": "image"}) == ["image"]


def test_a_cache_token_without_a_cache_folder_is_refused_by_the_spec():
    with pytest.raises(mnnpy.InputError, match="cache_token needs a cache_dir"):
        mnnpy.SessionSpec(scale_model("n"), cache_token="ab" * 32, cache_dir=None)
    mnnpy.SessionSpec(scale_model("n"), cache_token="ab" * 32).create_session()  # the default folder: accepted, runs


def _ranks(out) -> dict[str, int]:
    """The rank of one row of each output column."""
    return {k: np.asarray(v[0]).ndim for k, v in out.items() if k != "error"}


@pytest.mark.parametrize("batch", [4, "n"])
def test_row_mapper_keeps_one_rank_and_dtype_per_output_column(batch):
    """Whatever a batch holds (good rows, bad ones, only bad ones), a column's rows have one
    rank and dtype: Ray Data pads lower ranks and stops the job on mixed types."""
    mapper = RowMapper(mnnpy.SessionSpec(scale_model(batch), num_threads=1))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    good = mapper({"x": x})
    assert _ranks(good) == {"y": 1, "s": 0}
    mixed = np.empty(2, dtype=object)
    mixed[:] = [x[0], x]  # a sample and a whole input: rows="sample" runs the first, refuses the second
    for bad in ({"x": mixed}, {"x": x[None]}, {"x": x[:, :2].copy()}):
        out = mapper(bad)
        ranks = [np.asarray(v).ndim for v in out["y"]], [np.asarray(v).ndim for v in out["s"]]
        assert ranks == ([1] * len(out["y"]), [0] * len(out["s"])), out
        assert {np.asarray(v).dtype for v in [*out["y"], *out["s"]]} == {np.dtype(np.float32)}
    out = mapper({"x": mixed})
    assert out["error"][0] == "" and "rows are samples (1-D), got a row of shape (2, 3)" in out["error"][1]
    np.testing.assert_array_equal(out["y"][0], 2 * x[0])
    assert out["y"][1].shape == (0,) and np.isnan(out["s"][1])  # a failed row: empty, or NaN for a scalar


def test_row_mapper_whole_rows_keep_their_shapes():
    mapper = RowMapper(mnnpy.SessionSpec(scale_model("n"), num_threads=1), rows="whole")
    rows = np.empty(3, dtype=object)
    rows[:] = [np.ones((2, 3), np.float32), np.ones((5, 3), np.float32), np.ones(3, np.float32)]
    out = mapper({"x": rows})
    assert [v.shape for v in out["y"]] == [(2, 3), (5, 3), (0, 0)]
    assert [v.shape for v in out["s"]] == [(2,), (5,), (0,)]
    assert out["error"][2].startswith("InputError") and "rows are whole inputs (2-D)" in out["error"][2]

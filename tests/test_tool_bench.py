"""``mnnpy bench`` (TFLite's benchmark_model) on a small Conv model: the statistics, the table,
JSON and CSV, onnxruntime side by side, the profile, and bad input (exit 2). Speed is never
asserted; only that the figures are consistent."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper

import mnnpy
from mnnpy.cli import main
from mnnpy.converter import convert
from mnnpy.tools.profile import device_mib, latency_stats
from tests.backend_compare import backends, gpu_backends
from tests.oracle import make_model


@pytest.fixture(scope="module")
def conv_onnx(tmp_path_factory):
    """x (1, 3, 16, 16) -> Conv 3x3 (8 filters) -> Relu -> y: 2 * 8*3*3*3 * 16*16 FLOPs."""
    w = np.random.default_rng(1).standard_normal((8, 3, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    model = make_model(nodes, {"x": np.zeros((1, 3, 16, 16), np.float32)}, ["y"], {"w": w})
    path = tmp_path_factory.mktemp("bench") / "conv.onnx"
    onnx.save(model, path)
    return path


def test_latency_stats():
    s = latency_stats([1.0, 2.0, 3.0, 4.0, 10.0])
    assert (s["avg"], s["min"], s["max"], s["p50"]) == (4.0, 1.0, 10.0, 3.0)
    assert s["std"] == pytest.approx(np.std([1, 2, 3, 4, 10]))
    assert s["p50"] <= s["p90"] <= s["p99"] <= s["max"]


@pytest.mark.parametrize("backend", backends())
def test_bench_json(conv_onnx, backend, capsys):
    args = ["bench", str(conv_onnx), "--backend", backend, "--compare", "onnxruntime", "--runs", "6", "--warmup", "1"]
    assert main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gflops"] == pytest.approx(2 * 8 * 27 * 256 / 1e9, rel=0.2)
    assert report["peak_rss_mib"] > 10
    r, ort = report["engines"][backend], report["engines"]["onnxruntime"]
    assert r["runs"] == ort["runs"] == 6
    assert 0 < r["min"] <= r["p50"] <= r["p90"] <= r["p99"] <= r["max"] and r["ratio"] == 1.0
    assert r["min"] <= r["avg"] <= r["max"] and r["std"] >= 0
    assert ort["ratio"] == pytest.approx(ort["avg"] / r["avg"])
    assert r["gflops_per_s"] == pytest.approx(report["gflops"] * 1e3 / r["avg"])
    assert r["arena_mib"][backend] > 0
    assert (backend in r["device_mib"]) == (backend != "cpu") and all(v > 0 for v in r["device_mib"].values())


@pytest.mark.parametrize("backend", gpu_backends())
def test_device_mib_grows_with_the_weights(backend):
    """``profile.device_mib``: the same activations, 1x1 or 5x5 filters: the larger weights
    (8*3*25 float32) are on the device too."""
    x = np.zeros((1, 3, 16, 16), np.float32)
    got = []
    for k in (1, 5):
        w = np.ones((8, 3, k, k), np.float32)
        conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[k // 2] * 4)
        s = mnnpy.Interpreter(convert(make_model([conv], {"x": x}, ["y"], {"w": w}))).create_session(backend=backend)
        s.resize({"x": x.shape})
        got.append(device_mib(s)[backend])
        s.close()
    assert 0 < got[0] and got[1] - got[0] >= 0.9 * 8 * 3 * (25 - 1) * 4 / 2**20, got


def test_bench_table_csv_profile(conv_onnx, capsys):
    assert main(["bench", str(conv_onnx), "--runs", "3", "--warmup", "0", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "GFLOPs per run: 0.000" in out and "p99" in out and "peak RSS" in out
    assert "cpu: each Execution timed" in out and "Conv       1" in out  # Relu is fused into the Conv
    assert main(["bench", str(conv_onnx), "--duration", "0.2", "--warmup", "0", "--csv"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.startswith("engine,create,first,runs,avg,std") and row.startswith("cpu,")
    assert int(row.split(",")[3]) >= 5  # at least one block within the duration


@pytest.mark.parametrize("backend", backends("opencl"))
def test_bench_profile_opencl_from_profiling_events(conv_onnx, backend, capsys):
    assert main(["bench", str(conv_onnx), "--backend", backend, "--runs", "2", "--warmup", "0", "--profile", "--json"]) == 0
    prof = json.loads(capsys.readouterr().out)["profile"]["opencl"]
    assert prof["how"] in ("OpenCL profiling events per kernel", "no OpenCL profiling queue on this device")
    if prof["ops"]:
        assert [t[:2] for t in prof["types"]] == [["Conv", 1]] and prof["types"][0][2] > 0


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--shape", "x=1,3,,16"], "empty dim"),
        (["--runs", "0"], "--runs must be between 1"),
        (["--duration", "-1"], "--duration must be between 0 and 3600"),
    ],
)
def test_bench_bad_input(conv_onnx, extra, message, capsys):
    assert main(["bench", str(conv_onnx), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_bench_needs_the_onnx_file_for_onnxruntime(conv_onnx, tmp_path, capsys):
    converted = tmp_path / "conv.mnnpy"
    assert main(["convert", str(conv_onnx), str(converted)]) == 0
    capsys.readouterr()
    assert main(["bench", str(converted), "--compare", "onnxruntime", "--runs", "1"]) == 2
    assert "needs the ONNX model" in capsys.readouterr().err
    assert main(["bench", str(converted), "--compare", "onnxruntime", "--onnx", str(conv_onnx), "--runs", "2"]) == 0


def test_bench_bad_or_mismatched_onnx_file(conv_onnx, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    converted = tmp_path / "conv.mnnpy"
    assert main(["convert", str(conv_onnx), str(converted)]) == 0
    garbage, other = tmp_path / "garbage.onnx", tmp_path / "add.onnx"
    garbage.write_text("garbage\n")
    z = np.zeros((2, 4), np.float32)
    onnx.save(make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": z, "b": z}, ["y"]), other)
    cases = [
        (tmp_path / "missing.onnx", "missing.onnx: no such file"),
        (garbage, "onnxruntime cannot load it"),
        (other, "its inputs ['a', 'b'] are not the model's ['x']"),
    ]
    for onnx_file, message in cases:
        capsys.readouterr()
        assert main(["bench", str(converted), "--compare", "onnxruntime", "--onnx", str(onnx_file), "--runs", "1"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_bench_tiny_duration_still_times_every_engine(conv_onnx, capsys):
    pytest.importorskip("onnxruntime")
    argv = ["bench", str(conv_onnx), "--compare", "onnxruntime", "--duration", "1e-9", "--warmup", "0", "--json"]
    assert main(argv) == 0
    engines = json.loads(capsys.readouterr().out)["engines"]
    assert engines["cpu"]["runs"] >= 1 and engines["onnxruntime"]["runs"] >= 1


def test_bench_says_which_dynamic_dims_it_assumed(tmp_path, capsys):
    path = tmp_path / "relu.onnx"
    x = np.zeros((1, 4), np.float32)
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"], input_shapes={"x": ["N", "C"]}), path)
    assert main(["bench", str(path), "--runs", "1", "--warmup", "0", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["inputs"]["x"][1] == [1, 64]  # stdout stays JSON
    assert "dim 0 (N) = 1" in err and "dim 1 (C) = 64" in err and "--shape x=1,64" in err


def test_second_newcomer_findings(conv_onnx, tmp_path, capsys):
    """A named pipe as --input is refused at once (never waited on); a .npy header claiming
    more than its file holds is refused before NumPy allocates; --onnx without the option
    that reads it is refused (bench and diff)."""
    import os

    fifo = tmp_path / "x.npy"
    os.mkfifo(fifo)
    for tool in ("bench", "diff"):
        assert main([tool, str(conv_onnx), "--input", f"x={fifo}"]) == 2
        assert "not a regular file" in capsys.readouterr().err
    lying = tmp_path / "lying.npy"
    np.save(lying, np.zeros((1, 3, 16, 16), np.float32))
    data = lying.read_bytes().replace(b"(1, 3, 16, 16)", b"(1, 3, 16, 99)")
    lying.write_bytes(data)
    assert main(["bench", str(conv_onnx), "--input", f"x={lying}"]) == 2
    assert "its header claims" in capsys.readouterr().err
    assert main(["bench", str(conv_onnx), "--onnx", str(conv_onnx)]) == 2
    assert "--compare onnxruntime" in capsys.readouterr().err
    assert main(["diff", str(conv_onnx), "--onnx", str(conv_onnx)]) == 2
    assert "--reference onnxruntime" in capsys.readouterr().err
    assert main(["bench", str(conv_onnx), "--backend", "cpu,nosuch"]) == 2  # unknown: bad input, not a row
    assert "--backend 'nosuch': unknown backend" in capsys.readouterr().err

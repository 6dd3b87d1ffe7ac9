"""``mnnpy diff`` (TFLite's inference_diff): a small Conv model on every backend against the
CPU reference and onnxruntime, the statistics of ``compare``, and bad input (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import helper

from mnnpy.cli import main
from mnnpy.tools import tolerances
from mnnpy.tools.diff import compare
from tests.backend_compare import backends
from tests.oracle import make_model


@pytest.fixture(scope="module")
def conv_onnx(tmp_path_factory):
    """x (1, 3, 16, 16) -> Conv 3x3 (8 filters) -> Relu -> y; an int64 Shape output s."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
        helper.make_node("Shape", ["y"], ["s"]),
    ]
    model = make_model(nodes, {"x": np.zeros((1, 3, 16, 16), np.float32)}, ["y", "s"], {"w": w})
    path = tmp_path_factory.mktemp("diff") / "conv.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("backend", backends())
def test_diff_passes_on_each_backend(conv_onnx, backend, capsys):
    assert main(["diff", str(conv_onnx), "--backend", backend, "--runs", "2", "--json"]) == 0
    y, s = json.loads(capsys.readouterr().out)[backend]
    assert y["name"] == "y" and y["passed"] and 0 <= y["mean_abs"] <= y["max_abs"] < 1e-4
    assert (y["atol"], y["rtol"]) == (tolerances.ACCUMULATE["atol"], tolerances.ACCUMULATE["rtol"])
    assert s["name"] == "s" and s["passed"] and (s["atol"], s["max_abs"]) == (0.0, 0.0)  # integers: exact


def test_diff_onnxruntime_reference_and_fp16_tolerance(conv_onnx, capsys):
    pytest.importorskip("onnxruntime")
    assert main(["diff", str(conv_onnx), "--reference", "onnxruntime", "--precision", "low", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    assert "reference: onnxruntime" in out and "0.00488+0.00488|x|" in out and "FAIL" not in out


def test_diff_all_tensors_names_no_failure_on_the_cpu(conv_onnx, capsys):
    assert main(["diff", str(conv_onnx), "--all-tensors", "--runs", "1"]) == 0
    assert "cpu: no tensor fails" in capsys.readouterr().out


def test_compare_statistics_and_failure():
    want = np.array([1.0, -2.0, 0.0, 4.0], np.float32)
    got = want + np.array([0.0, 1e-5, 2e-5, 0.01], np.float32)
    d = compare("y", [got], [want], "normal")
    assert not d.passed  # 0.01 > 1e-4 + 1e-4 * 4
    assert d.max_abs == pytest.approx(0.01, rel=1e-3) and d.max_rel == pytest.approx(0.0025, rel=1e-3)
    assert d.mean_abs == pytest.approx((1e-5 + 2e-5 + 0.01) / 4, rel=1e-3)
    assert compare("y", [got], [want], "low").passed  # fp16 tolerance: 0.01 <= 0.0049 + 0.0049 * 4
    assert not compare("y", [got[:3]], [want], "normal").passed  # shapes differ
    nan = want.copy()
    nan[0] = np.nan
    assert not compare("y", [nan], [want], "normal").passed


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--shape", "z=1,3"], "unknown input name 'z'"),
        (["--shape", "x=1,a"], "dims must be integers"),
        (["--backend", "nosuch"], "nosuch"),
        (["--runs", "0"], "--runs must be between 1 and 1000"),
        (["--input", "x=/no/such.npy"], "cannot read /no/such.npy"),
    ],
)
def test_diff_bad_input(conv_onnx, extra, message, capsys):
    assert main(["diff", str(conv_onnx), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_diff_missing_model_and_missing_onnx(tmp_path, conv_onnx, capsys):
    assert main(["diff", str(tmp_path / "none.mnnpy")]) == 2
    assert "no such file" in capsys.readouterr().err
    converted = tmp_path / "conv.mnnpy"
    assert main(["convert", str(conv_onnx), str(converted)]) == 0
    assert main(["diff", str(converted), "--reference", "onnxruntime"]) == 2
    assert "needs the ONNX model" in capsys.readouterr().err


@pytest.fixture(scope="module")
def other_onnx(tmp_path_factory):
    """a + b -> y: inputs that are not conv_onnx's."""
    z = np.zeros((2, 4), np.float32)
    path = tmp_path_factory.mktemp("diff_other") / "add.onnx"
    onnx.save(make_model([helper.make_node("Add", ["a", "b"], ["y"])], {"a": z, "b": z}, ["y"]), path)
    return path


def test_diff_bad_onnx_file(tmp_path, conv_onnx, other_onnx, capsys):
    pytest.importorskip("onnxruntime")
    converted = tmp_path / "conv.mnnpy"
    assert main(["convert", str(conv_onnx), str(converted)]) == 0
    garbage = tmp_path / "garbage.onnx"
    garbage.write_text("garbage\n")
    cases = [
        (tmp_path / "missing.onnx", f"--onnx {tmp_path / 'missing.onnx'}: no such file"),
        (garbage, "onnxruntime cannot load it"),
        (other_onnx, "its inputs ['a', 'b'] are not the model's ['x']"),
    ]
    rng = np.random.default_rng(2)
    for name, x_shape, outs, message in (
        ("wider.onnx", (1, 5, 16, 16), ["y", "s"], "input 'x' has dim 1 = 5 there but 3 in the model"),
        ("renamed.onnx", (1, 3, 16, 16), ["z"], "it has no output 'y'"),
    ):
        w = rng.standard_normal((8, x_shape[1], 3, 3)).astype(np.float32)
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], [outs[0]])]
        if len(outs) > 1:
            nodes.append(helper.make_node("Shape", [outs[0]], ["s"]))
        onnx.save(make_model(nodes, {"x": np.zeros(x_shape, np.float32)}, outs, {"w": w}), tmp_path / name)
        cases.append((tmp_path / name, message))
    for onnx_file, message in cases:
        capsys.readouterr()
        for argv in (
            ["diff", str(converted), "--runs", "1", "--reference", "onnxruntime"],
            ["bench", str(converted), "--runs", "1", "--compare", "onnxruntime"],
        ):
            assert main([*argv, "--onnx", str(onnx_file)]) == 2
            err = capsys.readouterr().err
            assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_diff_says_which_dynamic_dims_it_assumed(tmp_path, capsys):
    path = tmp_path / "relu.onnx"
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros((1, 3, 2), np.float32)}, ["y"], input_shapes={"x": ["N", 3, "T"]}
    )
    onnx.save(model, path)
    assert main(["diff", str(path), "--runs", "1"]) == 0
    err = capsys.readouterr().err
    assert "input 'x'" in err and "dim 0 (N) = 1" in err and "dim 2 (T) = 64" in err and "--shape x=1,3,64" in err
    assert main(["diff", str(path), "--runs", "1", "--shape", "x=2,3,5"]) == 0
    assert "note:" not in capsys.readouterr().err

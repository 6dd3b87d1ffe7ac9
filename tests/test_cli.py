"""The ``mnnpy`` command line, in-process (``main([...])``) and as ``python -m mnnpy``."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from mnnpy.cli import COMMANDS, command, main
from tests.oracle import make_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def onnx_path(tmp_path):
    x = np.zeros((1, 3, 4), np.float32)
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Mul", ["i", "c"], ["m"]),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], {"c": np.array(2.0, np.float32)}, input_shapes={"x": ["batch", 3, "w"]})
    helper.set_model_props(model, {"character": "x" * 500, "lang": "en"})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture
def model_path(onnx_path, tmp_path):
    out = tmp_path / "m.mnnpy"
    assert main(["convert", str(onnx_path), str(out)]) == 0
    return out


def test_convert_prints_counts_and_size(onnx_path, tmp_path, capsys):
    out = tmp_path / "o.mnnpy"
    assert main(["convert", str(onnx_path), str(out)]) == 0
    text = capsys.readouterr().out
    assert "ops: 3 -> 2" in text and "Identity" in text
    assert f"{out.stat().st_size} bytes" in text
    assert main(["convert", str(onnx_path), str(out), "--no-optimize"]) == 0
    assert "ops: 3 -> 3" in capsys.readouterr().out


def test_info(model_path, capsys):
    assert main(["info", str(model_path)]) == 0
    text = capsys.readouterr().out
    assert "format version: 1" in text
    assert "producer: mnnpy.converter" in text
    assert "x: float32 (batch, 3, w)" in text
    assert "y: float32" in text
    assert "Mul" in text and "Relu" in text
    assert "character: <500 characters>" in text and "lang: 'en'" in text
    assert "x" * 100 not in text  # huge values are not printed


def test_run_random_inputs(model_path, capsys):
    assert main(["run", str(model_path), "--shape", "x=2,3,5", "--repeat", "3", "--threads", "1"]) == 0
    text = capsys.readouterr().out
    assert "input  x: float32 (2, 3, 5)" in text
    assert "output y: float32 (2, 3, 5)" in text
    assert "latency: first" in text and "median of 3" in text


def test_run_default_dynamic_dims(model_path, capsys):
    assert main(["run", str(model_path), "--repeat", "1"]) == 0
    assert "input  x: float32 (1, 3, 64)" in capsys.readouterr().out


def test_run_with_npy_input(model_path, tmp_path, capsys):
    x = np.arange(-6, 6, dtype=np.float32).reshape(1, 3, 4)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(model_path), "--input", f"x={tmp_path / 'x.npy'}", "--repeat", "0"]) == 0
    text = capsys.readouterr().out
    assert "output y: float32 (1, 3, 4) first values [0., 0., 0., 0., 0., 0.]" in text
    assert "n/a" in text


@pytest.mark.parametrize(
    "argv,match",
    [
        (["run", "MODEL", "--shape", "nope=1,2"], "unknown input name 'nope'"),
        (["run", "MODEL", "--shape", "x=1,a"], "dims must be integers"),
        (["run", "MODEL", "--shape", "x=1,4,4"], "input 'x': dim 1 is 4, expected 3"),
        (["run", "MODEL", "--input", "x=/no/such.npy"], "cannot read .npy"),
        (["run", "MODEL", "--backend", "no-such-backend"], "no-such-backend"),
        (["info", "/no/such/model.mnnpy"], "cannot read model file"),
        (["convert", "/no/such/model.onnx", "/tmp/never.mnnpy"], "cannot read ONNX model"),
    ],
)
def test_errors_exit_2_without_traceback(model_path, capsys, argv, match):
    argv = [str(model_path) if a == "MODEL" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err
    assert "Traceback" not in err


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    assert e.value.code == 2


def test_subcommand_table_is_extensible(capsys):
    @command("hello-test", "say hello", lambda p: p.add_argument("--name", default="world"))
    def hello(args):
        print(f"hello {args.name}")
        return 0

    try:
        assert main(["hello-test", "--name", "mnnpy"]) == 0
        assert capsys.readouterr().out == "hello mnnpy\n"
        with pytest.raises(ValueError):
            command("hello-test", "again")(hello)
    finally:
        COMMANDS.pop("hello-test")


def test_python_dash_m(model_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-m", "mnnpy", "info", str(model_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert "producer: mnnpy.converter" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "mnnpy", "info", str(model_path) + ".missing"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for name in ("convert", "info", "run", "demo"):
        assert name in out

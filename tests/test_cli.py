"""The ``mnnpy`` command line, in-process (``main([...])``) and as ``python -m mnnpy``."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import mnnpy
from mnnpy import model_file
from mnnpy.cli import COMMANDS, command, main
from mnnpy.converter import convert
from tests.backend_compare import subprocess_env
from tests.oracle import make_model


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
        (["run", "MODEL", "--input", "x=/no/such.npy"], "cannot read /no/such.npy as a .npy array"),
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
    env = subprocess_env()
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


# -- bad options and files: a clear error naming the option, never a traceback ------------
@pytest.fixture
def bad_inputs(tmp_path):
    """Files that are not plain .npy arrays, by placeholder name."""
    np.savez(tmp_path / "z.npz", x=np.zeros((1, 3, 4), np.float32))
    (tmp_path / "png.npy").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (tmp_path / "text.npy").write_text("1 2 3\n")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "short.npy", np.zeros((1, 3, 4), np.float32))
    (tmp_path / "short.npy").write_bytes((tmp_path / "short.npy").read_bytes()[:-8])
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 4), np.float32))
    (tmp_path / "adir.npy").mkdir()
    return tmp_path


@pytest.mark.parametrize(
    "extra,match",
    [
        (["--shape", "x=1,3,-64"], "--shape x=1,3,-64: dims must be positive (got -64)"),
        (["--shape", "x=1,0,4"], "dims must be positive (got 0)"),
        (["--shape", "x=1,3,"], "--shape x=1,3,: empty dim"),
        (["--shape", "x=1,,3"], "empty dim"),
        (["--shape", "x=1,3,99999999,99999999"], "more than the 2 GiB limit"),
        (["--shape", "x=1,3,99999999999"], "input 'x': a random float32 input of shape (1, 3, 99999999999)"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),
        (["--threads", "1000"], "--threads must be between 1 and 256, got 1000"),
        (["--threads", "0"], "--threads must be between 1 and 256, got 0"),
        (["--repeat", "-1"], "--repeat must be >= 0, got -1"),
        (["--shape", "x=1,3,4", "--shape", "x=1,3,5"], "--shape given twice for input 'x'"),
        (["--input", "x=DIR/x.npy", "--input", "x=DIR/x.npy"], "--input given twice for input 'x'"),
        (["--input", "x=DIR/x.npy", "--shape", "x=1,3,32"], "input 'x' has both --input and --shape"),
        (["--input", "x=DIR/z.npz"], "cannot read DIR/z.npz as a .npy array: not a .npy file"),
        (["--input", "x=DIR/png.npy"], "cannot read DIR/png.npy as a .npy array: not a .npy file"),
        (["--input", "x=DIR/text.npy"], "cannot read DIR/text.npy as a .npy array: not a .npy file"),
        (["--input", "x=DIR/obj.npy"], "cannot read DIR/obj.npy as a .npy array: Object arrays cannot be loaded"),
        (["--input", "x=DIR/short.npy"], "cannot read DIR/short.npy as a .npy array"),
        (["--input", "x=DIR/adir.npy"], "cannot read DIR/adir.npy as a .npy array: DIR/adir.npy is a folder, not a regular file"),
    ],
)
def test_run_rejects_bad_options(model_path, bad_inputs, capsys, extra, match):
    argv = ["run", str(model_path), "--repeat", "0"] + [a.replace("DIR", str(bad_inputs)) for a in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match.replace("DIR", str(bad_inputs)) in err, err
    assert "Traceback" not in err


def test_run_scalar_shape_and_pickle_free_load(model_path, bad_inputs, capsys):
    """``--shape NAME=`` is a scalar (rejected here by the session as a rank mismatch, clearly)."""
    assert main(["run", str(model_path), "--shape", "x=", "--repeat", "0"]) == 2
    assert "error: " in capsys.readouterr().err
    assert main(["run", str(model_path), "--input", f"x={bad_inputs / 'x.npy'}", "--repeat", "0"]) == 0


def _run_with_stdout_closed(argv: list[str]) -> subprocess.CompletedProcess:
    """``python -m mnnpy ARGV`` whose stdout is a pipe with no reader (as in ``| head -1``)."""
    env = subprocess_env()
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run(
            [sys.executable, "-m", "mnnpy", *argv], stdout=w, stderr=subprocess.PIPE, text=True, env=env, timeout=120
        )
    finally:
        os.close(w)


@pytest.mark.parametrize("cmd", ["info", "run"])
def test_closed_stdout_pipe_exits_quietly(model_path, cmd):
    proc = _run_with_stdout_closed([cmd, str(model_path)])
    assert proc.returncode == 141 and proc.stderr == ""


def test_main_returns_141_on_broken_pipe(monkeypatch, capsys):
    @command("pipe-test", "write to a closed pipe")
    def pipe(args):
        raise BrokenPipeError(32, "Broken pipe")

    try:
        assert main(["pipe-test"]) == 141
        assert capsys.readouterr().err == ""
    finally:
        COMMANDS.pop("pipe-test")


# -- the converter API: write errors, output verified by the loader ------------------------
@pytest.mark.parametrize("where", ["dir", "missing-dir"])
def test_convert_cannot_write(onnx_path, tmp_path, capsys, where):
    out = tmp_path if where == "dir" else tmp_path / "no" / "such" / "m.mnnpy"
    with pytest.raises(mnnpy.MnnpyError, match=f"cannot write {out}: "):
        convert(str(onnx_path), out)
    assert main(["convert", str(onnx_path), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write {out}: ") and "Traceback" not in err


def test_convert_refuses_output_the_loader_rejects(onnx_path, tmp_path, monkeypatch, capsys):
    """A converter bug (bytes the loader would reject) surfaces at conversion; nothing is written."""
    good = model_file.serialize
    monkeypatch.setattr(model_file, "serialize", lambda net: (lambda d: d[:4] + b"XXXX" + d[8:])(good(net)))
    out = tmp_path / "bad.mnnpy"
    with pytest.raises(mnnpy.ModelFormatError, match="does not load back"):
        convert(str(onnx_path), out)
    assert main(["convert", str(onnx_path), str(out)]) == 2
    assert "does not load back" in capsys.readouterr().err
    assert not out.exists()


def _constant_output_model():
    """``y = Relu(x)`` and a second output ``k`` fed by a Constant node, declared without a shape."""
    k = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [
        helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(k)),
        helper.make_node("Relu", ["x"], ["y"]),
    ]
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("k", TensorProto.FLOAT, None),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), k


def test_constant_graph_output_without_declared_shape(tmp_path):
    """A graph output fed by a Constant node, declared without a shape, keeps the constant's shape."""
    model, k = _constant_output_model()
    out = tmp_path / "k.mnnpy"
    convert(model, out)
    interp = mnnpy.Interpreter(str(out))
    assert {d.name: d.shape for d in interp.outputs}["k"] == (2, 3)
    got = interp.create_session().run({"x": np.array([-1, 2], np.float32)})
    np.testing.assert_array_equal(got["k"], k)
    np.testing.assert_array_equal(got["y"], [0, 2])


def test_convert_catches_a_shapeless_constant(tmp_path, monkeypatch):
    """The old importer bug (a constant output's shape dropped) now fails at conversion, named."""
    import mnnpy.converter as conv

    def buggy_import(proto):
        net = conv.import_onnx.__wrapped__(proto)
        for t in net.main.tensors:
            if t.data is not None:
                t.shape = None
        return net

    buggy_import.__wrapped__ = conv.import_onnx
    monkeypatch.setattr(conv, "import_onnx", buggy_import)
    out = tmp_path / "k.mnnpy"
    with pytest.raises(mnnpy.ModelFormatError, match="does not load back.*shape"):
        convert(_constant_output_model()[0], out, optimize_graph=False)
    assert not out.exists()


def test_devices_lists_every_backend_with_its_availability(capsys):
    from mnnpy.backend import backend_availability

    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cpu: available\n")
    ok, reason = backend_availability("opencl")
    assert ("opencl: available" if ok else f"opencl: unavailable: {reason}") in out


def test_invalid_onnx_graph_is_not_blamed_on_the_converter(tmp_path):
    """A graph reading a tensor nothing defines: ModelFormatError naming the tensor and
    pointing at the ONNX file, not only at the converter."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["q"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(mnnpy.ModelFormatError, match=r"'q'.*the ONNX graph itself may be invalid"):
        convert(model)


def test_attribute_the_opset_does_not_define_is_refused():
    """ReduceSum-13 takes ``axes`` as an input: the old attribute is refused (onnxruntime does
    too), never ignored (which would reduce every axis)."""
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(mnnpy.ModelFormatError, match=r"\['axes'\] are not defined by ReduceSum-13"):
        convert(model)


def test_run_shape_of_rank_65_is_a_clean_error(model_path, capsys):
    """``--shape`` with more dims than NumPy takes: one line, exit 2 (it was a ValueError
    traceback from drawing the random input)."""
    assert main(["run", str(model_path), "--shape", "x=" + ",".join(["1"] * 65)]) == 2
    assert "more than 64" in capsys.readouterr().err


def test_convert_into_a_pipe_nobody_reads_fails_at_once(onnx_path, tmp_path):
    """``mnnpy convert m.onnx fifo`` with no reader on the FIFO: a one-line error, not an
    ``open`` blocked for ever (a reader waiting on it would get the model)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "mnnpy.cli", "convert", str(onnx_path), str(fifo)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert done.returncode == 2 and "no reader" in done.stderr, done.stderr

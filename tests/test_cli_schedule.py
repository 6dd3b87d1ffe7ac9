"""``mnnpy info --partitions`` and ``--dot``: the Schedule across backends, with fallback reasons."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from mnnpy.cli import main
from mnnpy.converter import convert
from tests.backend_compare import has_plans
from tests.oracle import make_model

OPENCL, OPENCL_WHY = backend_availability("opencl")


@pytest.fixture
def mixed_model(tmp_path):
    """x (N, 3, h, w) -> Relu -> Erf (no GPU execution) -> Sigmoid -> y."""
    x = np.zeros((1, 3, 5, 5), np.float32)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Erf", ["r"], ["e"]),
        helper.make_node("Sigmoid", ["e"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], input_shapes={"x": ["n", 3, "h", "w"]})
    path = tmp_path / "m.mnnpy"
    path.write_bytes(convert(model))
    return path


def test_partitions_cpu(mixed_model, capsys):
    assert main(["info", "--partitions", "--backend", "cpu", str(mixed_model)]) == 0
    out = capsys.readouterr().out
    assert "1 partitions (3 ops on cpu); 0 tensors copied between backends" in out
    assert "partition 0 on cpu: 3 ops" in out and "fell back" not in out


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
def test_partitions_opencl_lists_fallback_reason(mixed_model, capsys):
    assert main(["info", "--partitions", "--backend", "opencl", "--shape", "x=2,3,7,9", str(mixed_model)]) == 0
    out = capsys.readouterr().out
    heads = re.findall(r"^partition \d+ on \w+: \d+ ops, \d+ tensors copied in$", out, re.M)
    assert heads == [
        "partition 0 on opencl: 1 ops, 0 tensors copied in",
        "partition 1 on cpu: 1 ops, 1 tensors copied in",
        "partition 2 on opencl: 1 ops, 1 tensors copied in",
    ], out
    assert "fell back: opencl: no OpenCL execution for Erf" in out


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
def test_dot_colours_ops_by_backend(mixed_model, tmp_path, capsys):
    dot = tmp_path / "s.dot"
    assert main(["info", "--dot", str(dot), "--backend", "opencl,cpu", str(mixed_model)]) == 0
    text = dot.read_text()
    assert text.startswith("digraph mnnpy {") and text.rstrip().endswith("}")
    fills = re.findall(r'^  op\d+ \[label="(\w+)\\n[^"]*", fillcolor="(#[0-9a-f]+)"', text, re.M)
    assert fills == [("Relu", "#9ecae1"), ("Erf", "#d9d9d9"), ("Sigmoid", "#9ecae1")], text
    assert text.count("[style=dashed") == 2  # two border copies
    assert 'tooltip="opencl: no OpenCL execution for Erf"' in text


def test_dot_to_stdout_cpu(mixed_model, capsys):
    assert main(["info", "--dot", "-", "--backend", "cpu", str(mixed_model)]) == 0
    out = capsys.readouterr().out
    assert out.count(" -> ") == 2 and "dashed" not in out


def test_bad_shape_and_unwritable_dot(mixed_model, tmp_path, capsys):
    assert main(["info", "--partitions", "--shape", "nope=1,2", str(mixed_model)]) != 0
    assert "unknown input name 'nope'" in capsys.readouterr().err
    assert main(["info", "--dot", str(tmp_path / "missing" / "s.dot"), "--backend", "cpu", str(mixed_model)]) != 0
    assert "cannot write" in capsys.readouterr().err


def test_partitions_for_shapes_plans_nothing(mixed_model):
    """Describing a schedule for given shapes allocates no memory and builds no Execution."""
    import mnnpy

    session = mnnpy.Interpreter(str(mixed_model)).unplanned_session("cpu")
    text = session.partitions({"x": (2, 3, 4000, 4000)})
    assert "partition 0 on cpu: 3 ops" in text and not has_plans(session)


def test_partitions_after_a_run_cover_every_segment(rng):
    """NonZero makes the rest of the graph data-dependent: after a run, partitions() lists
    the ops of every segment; before, it says where run-time scheduling starts. (``x`` is
    larger than ``MAX_VALUE_INPUT``: smaller inputs are folded through at resize.)"""
    import mnnpy

    x = rng.random((300, 300)).astype(np.float32)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz"]),
        helper.make_node("Cast", ["nz"], ["sf"], to=1),
        helper.make_node("Sigmoid", ["sf"], ["y"]),
    ]
    session = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"]))).create_session("cpu")
    before = session.partitions()
    assert "scheduled at run time" in before and "Sigmoid" not in before
    session.run({"x": x})
    after = session.partitions()
    assert "Relu" in after and "Sigmoid" in after and "scheduled at run time" not in after


def test_info_shape_edge_cases(mixed_model, capsys):
    assert main(["info", "--partitions", "--dot", "-", str(mixed_model)]) != 0
    assert "both write to stdout" in capsys.readouterr().err
    assert main(["info", "--dot", "", str(mixed_model)]) != 0
    assert "--dot needs a file name" in capsys.readouterr().err
    # x= is a scalar, which this rank-4 input cannot take
    assert main(["info", "--partitions", "--backend", "cpu", "--shape", "x=", str(mixed_model)]) != 0
    assert "rank" in capsys.readouterr().err


@pytest.mark.skipif(not OPENCL, reason=f"OpenCL unavailable: {OPENCL_WHY}")
def test_run_with_precision_and_tuning(mixed_model, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MNNPY_OPENCL_CACHE", str(tmp_path / "cl"))
    argv = ["run", str(mixed_model), "--backend", "opencl", "--precision", "low", "--tuning", "fast", "--repeat", "1"]
    assert main([*argv, "--shape", "x=1,3,5,7"]) == 0
    assert "output y: float32 (1, 3, 5, 7)" in capsys.readouterr().out


def test_a_session_describes_its_declared_shapes_before_a_run():
    """Before a run, ``placement``/``partitions``/``dot`` describe the declared shapes with a
    dynamic batch dim 1 and the other dynamic dims 64 (as ``mnnpy info --partitions``): a
    model that cannot take 1x1 maps (an unpadded 2x2 MaxPool) is described, not refused."""
    from onnx import TensorProto, numpy_helper

    import mnnpy

    w = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
        helper.make_node("MaxPool", ["c"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    session = mnnpy.Interpreter(convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))).create_session()
    assert "2 ops on cpu" in session.partitions()
    assert "MaxPool" in str(session.placement) and session.dot().startswith("digraph")

"""``mnnpy run`` with NNAPI's execution options: ``--timing``, ``--async N``, ``--deadline-ms``."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from mnnpy.cli import main
from mnnpy.converter import convert


@pytest.fixture
def model_path(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, (64, 64), np.eye(64, dtype=np.float32).ravel())
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])], "g", [x], [y], [w]
    )
    path = tmp_path / "m.mnnpy"
    path.write_bytes(convert(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()))
    return path


def test_timing_prints_device_and_driver_time(model_path, capsys):
    assert main(["run", str(model_path), "--repeat", "5", "--timing"]) == 0
    out = capsys.readouterr().out
    assert "timing (median): on device" in out and "in driver" in out and "µs" in out


def test_async_keeps_runs_in_flight_and_reports_throughput(model_path, capsys):
    assert main(["run", str(model_path), "--repeat", "20", "--async", "3"]) == 0
    out = capsys.readouterr().out
    assert "throughput:" in out and "3 in flight" in out and "median of 20" in out


def test_a_generous_deadline_passes_and_an_impossible_one_is_reported(model_path, capsys):
    assert main(["run", str(model_path), "--repeat", "3", "--deadline-ms", "60000"]) == 0
    capsys.readouterr()
    # the first run (it resizes) has no deadline: the timed runs miss theirs and are counted
    assert main(["run", str(model_path), "--repeat", "3", "--deadline-ms", "0"]) == 1
    assert "deadline missed in 3 of 3 runs" in capsys.readouterr().err


@pytest.mark.parametrize("argv, match", [(["--async", "-1"], "--async"), (["--deadline-ms", "-5"], "timeout_ms")])
def test_bad_values_are_usage_errors(model_path, capsys, argv, match):
    assert main(["run", str(model_path), "--repeat", "1", *argv]) == 2
    assert match in capsys.readouterr().err

"""Tagged loggers (``mnnpy.log``): ``MNNPY_LOG`` at import, placement with fallback reasons,
plan cache hits and misses, resize and compile times, GPU cache hits and misses, and nothing
logged on the run path."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy import log
from mnnpy.backend import backend_availability, get_runtime
from mnnpy.converter import convert
from mnnpy.stress_suite import conv_model, image, loop_model
from tests.oracle import make_model

GPUS = [b for b in ("opencl", "vulkan") if backend_availability(b)[0]]
AVAILABLE = ["cpu", *GPUS]
SHAPE = {"x": (1, 3, 16, 16)}  # the conv model planned at this input shape

SCRIPT = """
import mnnpy
from mnnpy.stress_suite import conv_model, image
session = mnnpy.Interpreter(conv_model()).create_session(backend="cpu")
for _ in range(3):
    session.run({"x": image((1, 3, 16, 16), 0)})
"""


def _stderr(level: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != log.ENV}
    if level is not None:
        env[log.ENV] = level
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_mnnpy_log_configures_a_handler_at_import():
    debug = _stderr("debug")
    for line in (
        "DEBUG mnnpy.schedule: Conv '",
        "DEBUG mnnpy.planner: plan cache miss: {'x': (1, 3, 16, 16)} from op 0",
        "INFO mnnpy.planner: resized {'x': (1, 3, 16, 16)} from op 0 in ",
        "INFO mnnpy.session: session on ['cpu'] created in ",
        "INFO mnnpy.convert: 10 ONNX nodes -> ",
    ):
        assert line in debug, debug
    assert debug.count("resized") == 1  # three runs, one resize, logged once
    info = _stderr("INFO")
    assert "mnnpy.planner: resized" in info and "DEBUG" not in info
    assert _stderr(None) == ""


def test_unknown_level_warns_and_configures_nothing(monkeypatch):
    monkeypatch.setenv(log.ENV, "loud")
    with pytest.warns(RuntimeWarning, match="MNNPY_LOG.*'loud'"):
        assert log.configure_from_env() is None
    with pytest.raises(ValueError, match="unknown log level"):
        log.configure("loud")
    with pytest.raises(ValueError, match="unknown mnnpy log tag"):
        log.get_logger("sheduler")


def test_configure_replaces_its_handler_and_off_removes_it():
    logger = logging.getLogger("mnnpy")
    before = list(logger.handlers)
    try:
        stream = io.StringIO()
        log.configure("info", stream)
        log.configure("debug", stream)
        assert len(logger.handlers) == len(before) + 1 and logger.level == logging.DEBUG
        log.get_logger("cache").debug("hello %s", log.lazy(str.upper, "world"))
        assert "DEBUG mnnpy.cache: hello WORLD" in stream.getvalue()
    finally:
        log.configure("off")
    assert logger.handlers == before and logger.level == logging.NOTSET


def _records(caplog, name: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == name]


@pytest.mark.skipif(not GPUS, reason="no GPU backend here")
def test_placement_names_each_op_backend_and_fallback_reason(caplog):
    """float64 runs on no GPU backend: the op falls back to the CPU, and the log says why."""
    x = np.linspace(-1, 1, 12).reshape(3, 4)
    model = make_model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["y"])], {"x": x}, ["y"])
    interp = mnnpy.Interpreter(convert(model))
    caplog.set_level(logging.DEBUG, logger="mnnpy")
    session = interp.create_session(backend=[GPUS[0], "cpu"])
    placed = _records(caplog, "mnnpy.schedule")
    assert len(placed) == 2 and all(m.startswith("Relu '") and " on cpu (fell back: " + GPUS[0] in m for m in placed), placed
    assert "fell back" in session.partitions()


@pytest.mark.parametrize("backend", AVAILABLE)
def test_no_log_record_on_the_run_path(backend, caplog):
    """A run at the plan's shapes logs nothing, at DEBUG too; a change of shapes logs the plan
    cache (a miss, then hits when shapes come back)."""
    session = mnnpy.Interpreter(conv_model()).create_session(backend=backend)
    a, b = image((1, 3, 16, 16), 0), image((1, 3, 24, 16), 1)
    session.run({"x": a})
    caplog.set_level(logging.DEBUG, logger="mnnpy")
    caplog.clear()
    for _ in range(20):
        session.run({"x": a})
    assert caplog.records == []
    for x in (b, a, b):
        session.run({"x": x})
    planner = _records(caplog, "mnnpy.planner")
    assert sum("plan cache miss" in m for m in planner) == 1 and sum("plan cache hit" in m for m in planner) == 2, planner
    assert sum(m.startswith("resized") for m in planner) == 1


@pytest.mark.parametrize("backend", AVAILABLE)
def test_no_log_record_in_loop_iterations(backend, caplog):
    """A Loop's iterations (its body run again and again) log nothing, at DEBUG too."""
    session = mnnpy.Interpreter(loop_model()).create_session(backend=backend)
    x = np.arange(4, dtype=np.float32)
    session.run({"M": np.array(3, np.int64), "x": x})
    caplog.set_level(logging.DEBUG, logger="mnnpy")
    caplog.clear()
    y = session.run({"M": np.array(500, np.int64), "x": x})["y"]
    np.testing.assert_array_equal(y, x + 500)
    assert caplog.records == []


@pytest.mark.skipif("opencl" not in GPUS, reason="OpenCL unavailable")
def test_opencl_program_and_tuning_cache_hits_and_misses(tmp_path, monkeypatch, caplog):
    from mnnpy.backends.opencl.program import ProgramCache
    from mnnpy.backends.opencl.tuning import Tuner

    rt = get_runtime("opencl")
    interp = mnnpy.Interpreter(conv_model())
    caplog.set_level(logging.DEBUG, logger="mnnpy")
    for n in range(2):  # a fresh process's caches on the same folder: built, then from disk
        monkeypatch.setattr(rt, "programs", ProgramCache(rt, tmp_path))
        monkeypatch.setattr(rt, "tuner", Tuner(rt, tmp_path))
        caplog.clear()
        interp.create_session(backend="opencl", tuning="fast").resize(SHAPE)
        cache = _records(caplog, "mnnpy.cache")
        built = [m for m in cache if m.startswith("OpenCL program") and ": miss, built in " in m]
        disk = [m for m in cache if ": disk hit, loaded in " in m]
        tuned = [m for m in cache if m.startswith("OpenCL tuning") and ": miss, " in m]
        hits = [m for m in cache if m.startswith("OpenCL tuning") and ": hit, local " in m]
        assert (len(built) > 0, len(disk) > 0, len(tuned) > 0, len(hits) > 0) == (n == 0, n == 1, n == 0, n == 1), cache
    entry = next(tmp_path.glob("*.clbin"))
    entry.write_bytes(entry.read_bytes()[:-1])
    monkeypatch.setattr(rt, "programs", ProgramCache(rt, tmp_path))
    caplog.clear()
    interp.create_session(backend="opencl").resize(SHAPE)
    assert any(m.startswith(f"OpenCL program cache: discarded {entry}: ") for m in _records(caplog, "mnnpy.cache"))


@pytest.mark.skipif("vulkan" not in GPUS, reason="Vulkan unavailable")
def test_vulkan_pipeline_cache_hits_and_misses(tmp_path, monkeypatch, caplog):
    from mnnpy.backends.vulkan.pipeline import Pipelines

    rt = get_runtime("vulkan")
    monkeypatch.setattr(rt, "pipelines", Pipelines(rt, tmp_path))
    interp = mnnpy.Interpreter(conv_model())
    caplog.set_level(logging.DEBUG, logger="mnnpy")
    interp.create_session(backend="vulkan").resize(SHAPE)
    first = _records(caplog, "mnnpy.cache")
    assert any(m.startswith("Vulkan pipeline conv") and ": miss, created in " in m for m in first), first
    assert any(m.startswith("Vulkan pipeline cache: wrote ") for m in first), first
    caplog.clear()
    interp.create_session(backend="vulkan").resize(SHAPE)
    again = _records(caplog, "mnnpy.cache")
    assert again and all(m.endswith(": memory hit") for m in again), again
    assert any("recorded " in m for m in _records(caplog, "mnnpy.vulkan"))

"""The six silero-vad 6.2.3 exports as models (issue 11, item 6): each converts and matches
onnxruntime on every backend, one chunk and 20 consecutive chunks with the state fed back,
every output (probability and state) within 1e-4; and 1,000 streaming runs of one session
neither grow memory nor plan again after the first. The app built on them (``mnnpy vad``) is
tested in ``tests/test_vad.py``."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import mnnpy
from mnnpy import models
from mnnpy.apps import vad
from tests.backend_compare import backends

ort = pytest.importorskip("onnxruntime")

MAX_DIFF = 1e-4  # every export, fp32 (silero_vad_half.onnx holds float32 weights too)
CHUNKS = 20


def _feeds(name: str, sr: int, chunk: np.ndarray, state: dict) -> dict:
    """One chunk (context samples first) and the carried state in the export's input names."""
    if name == "silero_vad_16k_sequence.onnx":
        return {"input": chunk.reshape(1, -1), **state}
    feeds = {"input": chunk.reshape(1, -1), **state}
    if name not in ("silero_vad_half.onnx", "silero_vad_openvino_16k.onnx"):
        feeds["sr"] = np.array(sr, np.int64)
    return feeds


def _initial_state(name: str) -> dict:
    if name == "silero_vad_16k_sequence.onnx":
        return {"h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}
    return {"state": np.zeros(vad.STATE_SHAPE, np.float32)}


def _carry(name: str, outputs: dict) -> dict:
    """The next chunk's state from this chunk's outputs."""
    if name == "silero_vad_16k_sequence.onnx":
        return {"h": outputs["hn"], "c": outputs["cn"]}
    return {"state": outputs["stateN"]}


def _chunks(sr: int, count: int) -> list[np.ndarray]:
    """``count`` chunks of noise with a tone (speech-like energy), each with its context."""
    rng = np.random.default_rng(7)
    n = vad.WINDOW[sr] + vad.CONTEXT[sr]
    t = np.arange(count * n) / sr
    audio = (0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t)) + 0.05 * rng.standard_normal(t.size)).astype(
        np.float32
    )
    return [audio[k * n : (k + 1) * n] for k in range(count)]


def _cases():
    return [
        pytest.param(b.values[0], name, sr, id=f"{b.id}-{name}-{sr}", marks=b.marks)
        for b in backends()
        for name, rates in vad.MODEL_RATES.items()
        for sr in rates
    ]


@pytest.mark.parametrize("backend, name, sr", _cases())
def test_export_streams_like_onnxruntime(backend, name, sr):
    """One chunk, then 20 with the state fed back: every output within ``MAX_DIFF``."""
    session = mnnpy.Interpreter(models.silero_mnnpy_path(name)).create_session(backend=[backend, "cpu"])
    ref = ort.InferenceSession(str(models.silero_model_path(name)), providers=["CPUExecutionProvider"])
    names = [o.name for o in ref.get_outputs()]
    state_got = state_want = _initial_state(name)
    for chunk in _chunks(sr, CHUNKS):
        got = session.run(_feeds(name, sr, chunk, state_got))
        want = dict(zip(names, ref.run(None, _feeds(name, sr, chunk, state_want))))
        for k in names:
            np.testing.assert_allclose(got[k], want[k], atol=MAX_DIFF, rtol=0, err_msg=f"{name} {k}")
        state_got, state_want = _carry(name, got), _carry(name, want)


def test_a_thousand_streaming_runs_plan_once_and_keep_memory():
    """``silero_vad.onnx`` (a top-level If on the rate, nested Ifs on shapes) on the CPU: after
    the first run, 1,000 more plan nothing (main graph and every body) and hold no more memory
    (tracemalloc, after 100 warm-up runs and with garbage collected: under 64 KiB more after
    than before)."""
    session = mnnpy.Interpreter(models.silero_mnnpy_path("silero_vad.onnx")).create_session(backend="cpu")
    chunk = _chunks(16000, 1)[0]
    state = _initial_state("silero_vad.onnx")

    def plans(runner) -> int:
        return runner.resize_count + sum(plans(b) for b in runner.bodies().values())

    state = _carry("silero_vad.onnx", session.run(_feeds("silero_vad.onnx", 16000, chunk, state)))  # plans
    planned = plans(session.runner)
    tracemalloc.start()
    try:
        for _ in range(100):  # Python's and numpy's free lists and caches fill up
            state = _carry("silero_vad.onnx", session.run(_feeds("silero_vad.onnx", 16000, chunk, state)))
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            state = _carry("silero_vad.onnx", session.run(_feeds("silero_vad.onnx", 16000, chunk, state)))
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert plans(session.runner) == planned
    assert grown < 64 * 1024, f"{grown} bytes more after 1,000 runs"

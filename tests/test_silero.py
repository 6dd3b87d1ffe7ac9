"""The silero-vad models from ``mnnpy.models``: the wheel and its six exports (checksummed, cached,
conversion on first use), and each export's interface as ``mnnpy.apps.vad`` documents it,
read with onnx and run with onnxruntime.

The first run downloads ``silero-vad==6.2.3`` from PyPI into the cache (``$MNNPY_CACHE``);
the fetcher's failure modes are tested offline, with a fake pip and a fake wheel.
"""

from __future__ import annotations

import collections
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest

import mnnpy
from mnnpy import models
from mnnpy.apps import vad

ort = pytest.importorskip("onnxruntime")

S = (["input", "state", "sr"], ["output", "stateN"])
# export -> (input names, output names), If count, If nesting depth, LSTM count
INTERFACES = {
    "silero_vad.onnx": (S, 25, 4, 4),
    "silero_vad_16k_op15.onnx": (S, 12, 3, 2),
    "silero_vad_half.onnx": ((["input", "state"], ["output", "stateN"]), 12, 3, 2),
    "silero_vad_op18_ifless.onnx": ((["input", "sr", "state"], ["output", "stateN"]), 1, 1, 0),
    "silero_vad_openvino_16k.onnx": ((["input", "state"], ["output", "stateN"]), 0, 0, 1),
    "silero_vad_16k_sequence.onnx": ((["input", "h", "c"], ["speech_probs", "hn", "cn"]), 0, 0, 1),
}


def _op_counts(graph: onnx.GraphProto, counts: collections.Counter, depth: int = 0) -> int:
    """Count op types in ``graph`` and its subgraphs into ``counts``; returns the If nesting depth."""
    deepest = depth
    for node in graph.node:
        counts[node.op_type] += 1
        for a in node.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
                deepest = max(deepest, _op_counts(g, counts, depth + 1))
    return deepest


def _session(name: str):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(models.silero_model_path(name)), opts, providers=["CPUExecutionProvider"])


# -- the wheel and its members -------------------------------------------------------------
def test_wheel_holds_exactly_the_six_exports():
    wheel = models.fetch_silero_wheel()
    assert wheel.name == models.SILERO_WHEEL.filename and models.sha256_file(wheel) == models.SILERO_WHEEL.sha256
    with zipfile.ZipFile(wheel) as z:
        members = sorted(n for n in z.namelist() if n.endswith(".onnx"))
    assert members == sorted(member for member, _ in models.SILERO_MODELS.values())
    assert sorted(models.SILERO_MODELS) == sorted(vad.MODEL_RATES)


@pytest.mark.parametrize("name", sorted(models.SILERO_MODELS))
def test_model_path_is_verified_and_cached(name):
    path = models.silero_model_path(name)
    assert path.name == name and path.parent == models.cache_dir() / models.SILERO_WHEEL.folder
    assert models.sha256_file(path) == models.SILERO_MODELS[name][1]
    assert models.silero_model_path(name) == path


def test_unknown_export_is_a_fetch_error():
    with pytest.raises(models.ModelFetchError, match="unknown silero-vad model 'nope.onnx'"):
        models.silero_model_path("nope.onnx")


def test_bad_wheel_checksum_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))

    def fake_pip(cmd, **kw):
        assert cmd[-1] == "silero-vad==6.2.3"
        Path(cmd[cmd.index("-d") + 1], models.SILERO_WHEEL.filename).write_bytes(b"not the wheel")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_pip)
    with pytest.raises(models.ModelFetchError, match="sha256"):
        models.silero_model_path("silero_vad.onnx")
    assert not list(tmp_path.rglob("*.whl")) and not list(tmp_path.rglob("*.onnx"))


def test_bad_member_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    wheel = tmp_path / "fake.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(models.SILERO_MODELS["silero_vad_half.onnx"][0], b"tampered")
    monkeypatch.setattr(models, "fetch_silero_wheel", lambda: wheel)
    with pytest.raises(models.ModelFetchError, match="sha256"):
        models.silero_model_path("silero_vad_half.onnx")


def test_conversion_is_lazy_and_cached(tmp_path, monkeypatch):
    """Nothing is converted until asked for; then once, and the cached file is reused."""
    import mnnpy.converter as conv

    name = "silero_vad_16k_sequence.onnx"
    onnx_path = tmp_path / name
    onnx_path.write_bytes(models.silero_model_path(name).read_bytes())
    monkeypatch.setattr(models, "silero_model_path", lambda n: onnx_path)
    calls = []
    real = conv.convert
    monkeypatch.setattr(conv, "convert", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert not list(tmp_path.glob("*.mnnpy")) and not calls
    path = models.silero_mnnpy_path(name)
    assert models.silero_mnnpy_path(name) == path and len(calls) == 1
    assert [d.name for d in mnnpy.Interpreter(str(path)).inputs] == ["input", "h", "c"]


# -- each export's interface -----------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(INTERFACES))
def test_interface_and_ops(name):
    """Input and output names, float32/int64 dtypes, and the If/LSTM counts of the docstring's table."""
    (inputs, outputs), n_if, depth, n_lstm = INTERFACES[name]
    sess = _session(name)
    assert [i.name for i in sess.get_inputs()] == inputs and [o.name for o in sess.get_outputs()] == outputs
    for i in sess.get_inputs():
        assert i.type == ("tensor(int64)" if i.name == "sr" else "tensor(float)"), (i.name, i.type)
    assert all(o.type == "tensor(float)" for o in sess.get_outputs())
    counts: collections.Counter = collections.Counter()
    assert _op_counts(onnx.load(str(models.silero_model_path(name))).graph, counts) == depth
    assert counts["If"] == n_if and counts["LSTM"] == n_lstm
    assert not {"Loop", "Scan", "SequenceEmpty", "SequenceInsert", "SequenceAt", "SplitToSequence"} & set(counts)


def test_half_export_is_float32():
    """``silero_vad_half.onnx`` stores no fp16 tensor: every initializer is float32."""
    model = onnx.load(str(models.silero_model_path("silero_vad_half.onnx")))
    assert {t.data_type for t in model.graph.initializer} == {onnx.TensorProto.FLOAT}


def test_exports_agree_on_streamed_chunks():
    """20 consecutive 16 kHz chunks with context and state fed back: five exports give the same
    probabilities (within 1e-6); the half export, trained apart, does not."""
    audio = (np.random.default_rng(3).standard_normal(20 * 512) * 0.3).astype(np.float32)
    probs = {name: vad.Vad(16000, name, backend="onnxruntime").probabilities(audio) for name in INTERFACES}
    ref = probs["silero_vad.onnx"]
    for name, p in probs.items():
        assert p.shape == (20,) and p.dtype == np.float32
        if name != "silero_vad_half.onnx":
            np.testing.assert_allclose(p, ref, atol=1e-6, rtol=0, err_msg=name)
    assert np.abs(probs["silero_vad_half.onnx"] - ref).max() > 1e-3

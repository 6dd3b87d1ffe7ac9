"""Fuzzing (issue 12, VTS): the seed corpus is valid, every saved finding is refused with an
``MnnpyError`` (tests/fuzz_regressions/, ``<harness>-<what>.<ext>``), and a bounded atheris run
of each harness finds nothing new. The longer run: ``python -m mnnpy.tools.fuzz loader --runs
100000`` (figures in docs/fuzzing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from mnnpy.converter import convert
from mnnpy.tools import fuzz

REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
ROOT = Path(__file__).resolve().parents[1]
BOUNDED_RUNS = 1500  # per harness: about 30 s each here, instrumentation included


@pytest.mark.parametrize("name", sorted(fuzz.seed_models()))
def test_seed_model_matches_onnxruntime(name):
    """Each seed is a valid model that mnnpy runs as onnxruntime does, so that the fuzzer
    mutates inputs that reach the kernels rather than the format checks only."""
    model = fuzz.seed_models()[name]
    import mnnpy

    interp = mnnpy.Interpreter(convert(model))
    rng = np.random.default_rng(3)
    feeds = {}
    for d in interp.inputs:
        if d.dtype == np.bool_:
            feeds[d.name] = np.array(True)
        elif d.dtype == np.int64:
            feeds[d.name] = np.array(3, np.int64)
        else:
            feeds[d.name] = rng.standard_normal(d.shape).astype(d.dtype)
    got = interp.create_session().run(feeds)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got.values(), want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", sorted(fuzz.TARGETS))
def test_seed_corpus_is_accepted(kind, tmp_path):
    """The written corpus loads, prepares and runs without any refusal (``exercise`` raises
    what the harnesses would swallow)."""
    import onnx

    for path in sorted(fuzz.seed_corpus(tmp_path, kind).iterdir()):
        data = path.read_bytes()
        fuzz.exercise(convert(onnx.load_from_string(data)) if kind == "converter" else data)


@pytest.mark.parametrize("path", sorted(REGRESSIONS.iterdir()), ids=lambda p: p.name)
def test_saved_finding_is_refused_cleanly(path):
    """Each input a fuzz run once failed on now gives an ``MnnpyError`` (or runs): the harness
    lets anything else through, and the loader's memory limit keeps it from taking memory."""
    fuzz.replay(path.name.split("-", 1)[0], path)


@pytest.mark.parametrize("kind", sorted(fuzz.TARGETS))
def test_bounded_fuzz_run_finds_nothing(kind, tmp_path):
    """A short coverage-guided run from the seed corpus (fixed libFuzzer seed): no exception
    outside ``MnnpyError``, no crash, no input over the time or memory limit."""
    pytest.importorskip("atheris", reason="atheris (the fuzz extra) is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    flags = f"--runs {BOUNDED_RUNS} --seed 12345 --timeout 20 --rss-mb 3072 --corpus {tmp_path / 'corpus'}"
    cmd = [sys.executable, "-m", "mnnpy.tools.fuzz", kind, *flags.split(), f"-artifact_prefix={tmp_path}/"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    artifacts = sorted(p.name for p in tmp_path.iterdir() if p.name.split("-")[0] in ("crash", "oom", "timeout", "leak"))
    assert done.returncode == 0 and not artifacts, (artifacts, done.stderr[-4000:])
    assert f"Done {BOUNDED_RUNS} runs" in done.stderr


def test_replay_refuses_what_is_not_a_saved_input(tmp_path, capsys):
    """``--replay`` reads regular files only (a FIFO blocked it, ``/dev/zero`` was read until the
    memory ran out) and reports a missing file as a usage error, not as a finding; an unknown
    ``--backend`` is one line, exit 2."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path / "missing", tmp_path):
        assert fuzz.main(["loader", "--replay", str(path)]) == 2
        assert "cannot read it" in capsys.readouterr().err
    assert fuzz.main(["loader", "--backend", "bogus", "--runs", "5"]) == 2
    assert "bogus" in capsys.readouterr().err

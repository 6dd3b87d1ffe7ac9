"""The voice-activity app (``mnnpy.apps.vad``, ``mnnpy vad``): silero's segment rules on synthetic
probabilities (no model), streaming, WAV reading, bad input, and real speech generated with
espeak-ng (skipped, saying so, where it is missing) padded with silence: one segment, within
``TOLERANCE_S`` of where the speech is, measured from the samples' energy.

onnxruntime is the reference backend. On mnnpy backends the exports with ``If`` wait for the
control-flow engine: those cases are expected failures (not strict) until it lands.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import wave

import numpy as np
import pytest
from scipy.io import wavfile
from scipy.signal import resample_poly

from mnnpy import BackendUnavailableError, InputError, MnnpyError, UnsupportedOperatorError
from mnnpy.apps import vad
from mnnpy.cli import main as cli_main
from tests.backend_compare import backends

pytest.importorskip("onnxruntime")

TOLERANCE_S = 0.2  # a segment's start and end against where the speech is
SILENCE_BEFORE_S, SILENCE_AFTER_S = 1.5, 2.0
TEXT = "The quick brown fox jumps over the lazy dog"  # no comma: no pause that would split it
W = 512  # window at 16 kHz


def segs(probs, sr=16000, n=None, **kw):
    return [tuple(s) for s in vad.timestamps_from_probabilities(probs, sr, n, **kw)]


# -- silero's rules on synthetic probabilities ------------------------------------------------
def test_speech_starts_at_threshold_and_ends_after_min_silence():
    probs = [0.0] * 10 + [0.9] * 20 + [0.0] * 10
    # starts at window 10; quiet from window 30; 100 ms = 1600 samples of quiet reached at window 34
    assert segs(probs, speech_pad_ms=0) == [(10 * W, 30 * W)]
    assert segs(probs) == [(10 * W - 480, 30 * W + 480)]  # 30 ms = 480 samples of padding each side
    assert segs([0.0] * 10 + [0.5] * 20, speech_pad_ms=0) == [(10 * W, 30 * W)]  # >= threshold is speech
    assert segs([0.49] * 40) == []


def test_neg_threshold_hysteresis():
    """Between neg_threshold (0.35) and threshold (0.5) speech neither starts nor ends."""
    assert segs([0.4] * 40) == []
    assert segs([0.9] * 10 + [0.4] * 20 + [0.9] * 10 + [0.0] * 10, speech_pad_ms=0) == [(0, 40 * W)]
    assert segs([0.9] * 10 + [0.3] * 10, speech_pad_ms=0) == [(0, 10 * W)]
    # threshold 0.1: neg_threshold is max(0.1 - 0.15, 0.01) = 0.01
    assert segs([0.5] * 10 + [0.02] * 10, threshold=0.1, speech_pad_ms=0) == [(0, 20 * W)]
    assert segs([0.5] * 10 + [0.005] * 10, threshold=0.1, speech_pad_ms=0) == [(0, 10 * W)]
    assert segs([0.9] * 10 + [0.4] * 10, neg_threshold=0.45, speech_pad_ms=0) == [(0, 10 * W)]


def test_short_silences_merge():
    probs = [0.9] * 10 + [0.0] * 3 + [0.9] * 10 + [0.0] * 10
    # 3 quiet windows last 1024 samples before speech resumes: < 1600 (100 ms), one segment
    assert segs(probs, speech_pad_ms=0) == [(0, 23 * W)]
    # 50 ms = 800 samples: the pause ends the first segment; 1536 samples apart, each padded by 480
    assert segs(probs, min_silence_duration_ms=50) == [(0, 10 * W + 480), (13 * W - 480, 23 * W + 480)]


def test_close_segments_share_the_gap():
    """Two segments closer than 2 x 480 samples: each takes half the gap instead of its padding."""
    probs = [0.9] * 10 + [0.0] + [0.9] * 10 + [0.0] * 5
    assert segs(probs, min_silence_duration_ms=0) == [(0, 10 * W + 256), (10 * W + 256, 21 * W + 480)]


def test_min_speech_duration_drops_short_segments():
    """256 ms = 4096 samples = 8 windows: a segment must be longer."""
    for n, kept in ((8, False), (9, True)):
        probs = [0.0] * 5 + [0.9] * n + [0.0] * 10
        assert segs(probs, min_speech_duration_ms=256, speech_pad_ms=0) == ([(5 * W, (5 + n) * W)] if kept else [])


def test_speech_until_the_end_of_the_audio():
    n = 15 * W - 100
    assert segs([0.0] * 5 + [0.9] * 10, n=n) == [(5 * W - 480, n)]
    assert segs([0.0] * 12 + [0.9] * 3, n=n) == []  # 3 windows - 100 samples: shorter than 250 ms


def test_max_speech_duration_cuts_at_the_longest_pause():
    """1 s: a segment may last 16000 - 512 samples (no padding). The first is cut at its 5-window
    pause (longer than 98 ms), the next starting where speech resumed; the second, with no
    pause, is cut where it grew too long."""
    probs = [0.9] * 10 + [0.0] * 5 + [0.9] * 20 + [0.0] * 40
    kw = dict(max_speech_duration_s=1, min_silence_duration_ms=1000, speech_pad_ms=0)
    assert segs(probs, **kw) == [(0, 10 * W), (15 * W, 46 * W)]
    assert segs([0.9] * 40, max_speech_duration_s=1, speech_pad_ms=0) == [(0, 31 * W), (32 * W, 40 * W)]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"threshold": 0.0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"neg_threshold": 0.6}, "neg_threshold"),
        ({"min_speech_duration_ms": -1}, "min_speech_duration_ms"),
        ({"min_silence_duration_ms": -1}, "min_silence_duration_ms"),
        ({"speech_pad_ms": -5}, "speech_pad_ms"),
        ({"max_speech_duration_s": 0}, "max_speech_duration_s"),
        ({"min_silence_at_max_speech_ms": -1}, "min_silence_at_max_speech_ms"),
    ],
)
def test_bad_options(kw, match):
    with pytest.raises(InputError, match=match):
        vad.timestamps_from_probabilities([0.9] * 10, 16000, **kw)


def test_unknown_option():
    with pytest.raises(InputError, match=r"unknown segment option\(s\) \['thresh'\]"):
        vad.timestamps_from_probabilities([0.9], 16000, thresh=0.4)
    with pytest.raises(InputError, match="unknown segment option"):
        vad.speech_timestamps(np.zeros(1600, np.float32), 16000, vad=FakeVad(16000), padding=3)


def test_probabilities_at_another_rate():
    with pytest.raises(InputError, match="8000 or 16000"):
        vad.timestamps_from_probabilities([0.9], 44100)
    assert segs([0.9] * 20, sr=8000, speech_pad_ms=0) == [(0, 20 * 256)]


class FakeVad:
    """A ``Vad`` stand-in at ``sr``: probability 1 where a window's mean |sample| exceeds 0.1."""

    def __init__(self, sr):
        self.sr, self.window = sr, vad.WINDOW[sr]

    def probabilities(self, audio):
        n = -(-len(audio) // self.window)
        x = np.zeros(n * self.window, np.float32)
        x[: len(audio)] = audio
        return (np.abs(x).reshape(n, self.window).mean(axis=1) > 0.1).astype(np.float32)


@pytest.mark.parametrize("sr", [16000, 48000, 11025])
def test_segments_in_input_samples_and_seconds(sr):
    """Audio at ``sr`` is resampled to the model's rate; segments come back in samples at ``sr``."""
    audio = np.zeros(3 * sr, np.float32)
    audio[sr : 2 * sr] = 0.5
    fake = FakeVad(16000)
    (got,) = vad.speech_timestamps(audio, sr, vad=fake, speech_pad_ms=0)
    assert abs(got.start - sr) <= sr * 0.04 and abs(got.end - 2 * sr) <= sr * 0.04 and isinstance(got.start, int)
    (sec,) = vad.speech_timestamps(audio, sr, vad=fake, return_seconds=True)
    assert sec == (1.0, 2.0)  # rounded to 0.1 s, as silero does


# -- bad input -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "audio, sr, match",
    [
        (np.zeros(0, np.float32), 16000, "empty"),
        (np.zeros((100, 2), np.float32), 16000, "mono"),
        (np.array([0.0, np.nan] * 800, np.float32), 16000, "NaN"),
        (np.zeros(1600, np.float32), 4000, "sample rate"),
        (np.zeros(1600, np.float32), 16000.5, "sample rate"),
        (np.zeros(1600, np.float32), 10**6, "sample rate"),
        ("speech", 16000, "array of samples"),
    ],
)
def test_bad_audio(audio, sr, match):
    with pytest.raises(InputError, match=match):
        vad.speech_timestamps(audio, sr, vad=FakeVad(16000))


def test_bad_model_choices():
    with pytest.raises(InputError, match="unknown silero-vad export"):
        vad.Vad(16000, "nope.onnx", backend="onnxruntime")
    with pytest.raises(InputError, match="runs at 16000 Hz, not 8000 Hz"):
        vad.Vad(8000, "silero_vad_16k_sequence.onnx", backend="onnxruntime")
    detector = vad.Vad(16000, backend="onnxruntime")
    with pytest.raises(InputError, match=r"\(512,\) samples"):
        detector(np.zeros(256, np.float32))


def test_onnxruntime_missing_is_backend_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(BackendUnavailableError, match="onnxruntime"):
        vad.Vad(16000, backend="onnxruntime")


def test_if_exports_on_mnnpy_convert_or_say_what_runs():
    """Where the converter does not take If yet, the error names the exports that need none."""
    try:
        vad.Vad(16000, "silero_vad.onnx", backend="cpu")
    except UnsupportedOperatorError as e:
        assert "If" in e.missing and "silero_vad_16k_sequence.onnx" in str(e) and "onnxruntime" in str(e)


# -- WAV files -------------------------------------------------------------------------------------
def test_read_wav_formats(tmp_path):
    t = np.arange(1600) / 16000
    tone = 0.5 * np.sin(2 * np.pi * 440 * t)
    wavfile.write(tmp_path / "s16.wav", 16000, (tone * 32767).astype(np.int16))
    wavfile.write(tmp_path / "stereo.wav", 8000, np.stack([tone, -tone / 2], axis=1).astype(np.float32))
    wavfile.write(tmp_path / "u8.wav", 22050, (tone * 127 + 128).astype(np.uint8))
    x, sr = vad.read_wav(tmp_path / "s16.wav")
    assert sr == 16000 and x.dtype == np.float32 and x.shape == (1600,) and np.abs(x - tone).max() < 1e-4
    x, sr = vad.read_wav(tmp_path / "stereo.wav")
    assert sr == 8000 and x.shape == (1600,) and np.abs(x - tone / 4).max() < 1e-6  # the mean of the channels
    x, sr = vad.read_wav(tmp_path / "u8.wav")
    assert sr == 22050 and np.abs(x - tone).max() < 2e-2  # 8 bits


def test_read_wav_errors(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        vad.read_wav(tmp_path / "missing.wav")
    (tmp_path / "text.wav").write_text("not audio at all")
    with pytest.raises(InputError, match="not a WAV"):
        vad.read_wav(tmp_path / "text.wav")
    with wave.open(str(tmp_path / "empty.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
    with pytest.raises(InputError, match="no samples"):
        vad.read_wav(tmp_path / "empty.wav")


@pytest.mark.parametrize("offset,byte", [(22, 0), (22, 205), (36, 53), (16, 157)])
def test_read_wav_damaged_header(tmp_path, offset, byte):
    """One byte of a valid header changed (channel count, data tag, fmt size): scipy's parser
    fails in several ways, each an ``InputError`` naming the file."""
    path = tmp_path / "speech.wav"
    wavfile.write(path, 16000, np.zeros(1600, np.int16))
    data = bytearray(path.read_bytes())
    data[offset] = byte
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="not a WAV file scipy can read"):
        vad.read_wav(path)


# -- streaming ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sr", [16000, 8000])
def test_streaming_chunks_equal_whole_audio(sr):
    """Chunk by chunk with ``Vad.__call__`` gives what ``probabilities`` gives for the whole audio."""
    audio = (np.random.default_rng(5).standard_normal(30 * vad.WINDOW[sr] - 77) * 0.2).astype(np.float32)
    detector = vad.Vad(sr, backend="onnxruntime")
    whole = detector.probabilities(audio)
    detector.reset()
    padded = np.zeros(len(whole) * detector.window, np.float32)
    padded[: len(audio)] = audio
    chunked = [detector(c) for c in padded.reshape(-1, detector.window)]
    np.testing.assert_allclose(chunked, whole, atol=1e-6, rtol=0)


def test_sequence_export_in_blocks(monkeypatch):
    """The sequence export runs blocks of chunks; its state carries across blocks."""
    audio = (np.random.default_rng(6).standard_normal(23 * W) * 0.2).astype(np.float32)
    ref = vad.Vad(16000, "silero_vad_16k_op15.onnx", backend="onnxruntime").probabilities(audio)
    monkeypatch.setattr(vad, "SEQUENCE_BLOCK", 5)
    got = vad.Vad(16000, "silero_vad_16k_sequence.onnx", backend="onnxruntime").probabilities(audio)
    np.testing.assert_allclose(got, ref, atol=1e-6, rtol=0)


# -- real speech -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spoken(tmp_path_factory):
    """``rate -> (samples float32 at rate, (start s, end s) of the speech)``: TEXT spoken by espeak-ng
    (22050 Hz), resampled, with silence around it; the speech's extent is where 10 ms frames carry
    more than 1% of the loudest frame's RMS."""
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (Debian: apt-get install espeak-ng)")
    path = tmp_path_factory.mktemp("speech") / "espeak.wav"
    subprocess.run(["espeak-ng", "-w", str(path), TEXT], check=True, capture_output=True, timeout=60)
    native, voice = wavfile.read(path)
    voice = voice.astype(np.float32) / 32768

    def at(rate):
        x = resample_poly(voice, rate, native).astype(np.float32) if rate != native else voice
        x = np.concatenate(
            [np.zeros(int(SILENCE_BEFORE_S * rate), np.float32), x, np.zeros(int(SILENCE_AFTER_S * rate), np.float32)]
        )
        frame = rate // 100
        rms = np.sqrt((x[: len(x) // frame * frame].reshape(-1, frame) ** 2).mean(axis=1))
        loud = np.flatnonzero(rms > 0.01 * rms.max())
        return x, (loud[0] * frame / rate, (loud[-1] + 1) * frame / rate)

    return at


def _one_segment_at_the_speech(segments, sr, where):
    assert len(segments) == 1, segments
    start, end = segments[0].start / sr, segments[0].end / sr
    assert abs(start - where[0]) <= TOLERANCE_S and abs(end - where[1]) <= TOLERANCE_S, ((start, end), where)


@pytest.mark.parametrize("sr", [16000, 8000, 22050])
def test_real_speech_one_segment(spoken, tmp_path, sr):
    """From a 16-bit WAV file, on onnxruntime: 8 and 16 kHz run as they are, 22050 Hz resampled."""
    audio, where = spoken(sr)
    assert where[0] >= SILENCE_BEFORE_S - 0.05 and where[1] - where[0] > 1.5  # the speech is there
    path = tmp_path / f"speech{sr}.wav"
    wavfile.write(path, sr, np.round(audio * 32767).astype(np.int16))
    x, rate = vad.read_wav(path)
    assert rate == sr
    _one_segment_at_the_speech(vad.speech_timestamps(x, rate, backend="onnxruntime"), sr, where)


def _backend_cases():
    out = []
    for p in backends():
        for name in vad.MODEL_RATES:
            out.append(pytest.param(p.values[0], name, id=f"{p.id}-{name}", marks=list(p.marks)))
    return out


@pytest.mark.parametrize("backend, name", _backend_cases())
def test_mnnpy_backend_matches_onnxruntime(spoken, backend, name):
    """Each export on each mnnpy backend: probabilities within 1e-4 of onnxruntime's on the
    same real speech (8 kHz too where the export has it), and the same one segment."""
    for sr in vad.MODEL_RATES[name]:
        audio, where = spoken(sr)
        got = vad.Vad(sr, name, backend=backend)
        want = vad.Vad(sr, name, backend="onnxruntime")
        np.testing.assert_allclose(got.probabilities(audio), want.probabilities(audio), atol=1e-4, rtol=0)
        segments = vad.speech_timestamps(audio, sr, vad=got)
        assert segments == vad.speech_timestamps(audio, sr, vad=want)
        _one_segment_at_the_speech(segments, sr, where)


# -- the command ---------------------------------------------------------------------------------------
def test_cli_prints_segments_and_summary(spoken, tmp_path, capsys):
    audio, where = spoken(16000)
    path = tmp_path / "speech.wav"
    wavfile.write(path, 16000, np.round(audio * 32767).astype(np.int16))
    assert cli_main(["vad", str(path), "--backend", "onnxruntime"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "1 speech segment," in lines[1] and "silero_vad.onnx on onnxruntime" in lines[1]
    start, end = map(float, lines[0].split())
    assert abs(start - where[0]) <= TOLERANCE_S and abs(end - where[1]) <= TOLERANCE_S
    assert cli_main(["vad", str(path), "--backend", "cpu", "--model", "silero_vad_16k_sequence.onnx"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == lines[0]


@pytest.mark.parametrize(
    "args, match",
    [
        (["missing.wav"], "cannot read"),
        (["{bad}", "--threshold", "2"], "--threshold must be in (0, 1], got 2.0"),
        (["{bad}", "--neg-threshold", "0.9"], "--neg-threshold must be in [0, --threshold = 0.5], got 0.9"),
        (["{bad}", "--min-speech-ms", "-1"], "--min-speech-ms must be >= 0"),
        (["{bad}", "--threads", "0"], "--threads"),
    ],
)
def test_cli_errors(tmp_path, capsys, args, match):
    bad = tmp_path / "bad.wav"
    wavfile.write(bad, 16000, np.zeros(16000, np.int16))
    argv = ["vad", *(a.replace("{bad}", str(bad)) for a in args), "--backend", "onnxruntime"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err and "Traceback" not in err


def test_cli_lists_vad(capsys):
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    assert "vad" in capsys.readouterr().out
    assert issubclass(InputError, MnnpyError)

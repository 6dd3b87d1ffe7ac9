"""``mnnpy vad DIR --out FILE``: every WAV file of a folder, one sorted result each, the segments
``vad.speech_timestamps`` finds, errors per file, bad options. The Ray run: tests/test_ray.py."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
from scipy.io import wavfile
from scipy.signal import resample_poly

import mnnpy
from mnnpy.apps import vad
from mnnpy.cli import main


def write_wavs(folder) -> None:
    """A spoken sentence (espeak-ng, where installed; else a tone in bursts) at 16 and 8 kHz
    with silence around it, a second of noise at 22050 Hz, and a file that is not a WAV."""
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    if shutil.which("espeak-ng"):
        subprocess.run(["espeak-ng", "-w", str(folder / "raw.tmp"), "one two three"], check=True, capture_output=True)
        native, voice = wavfile.read(folder / "raw.tmp")
        voice = resample_poly(voice.astype(np.float32) / 32768, 16000, native).astype(np.float32)
        (folder / "raw.tmp").unlink()
    else:
        t = np.arange(32000) / 16000
        voice = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 2 * t) > 0)).astype(np.float32)
    speech = np.concatenate([np.zeros(16000, np.float32), voice, np.zeros(16000, np.float32)])
    wavfile.write(folder / "a16k.wav", 16000, np.round(speech * 32767).astype(np.int16))
    wavfile.write(folder / "b8k.wav", 8000, np.round(speech[::2] * 32767).astype(np.int16))
    wavfile.write(folder / "c_noise.wav", 22050, (0.01 * rng.standard_normal(22050)).astype(np.float32))
    (folder / "d_bad.wav").write_bytes(b"RIFF\x00\x00")


@pytest.fixture(scope="module")
def wav_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wavs")
    write_wavs(folder)
    return folder


def test_vad_folder_one_sorted_line_per_file(wav_dir, tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    assert main(["vad", str(wav_dir), "--out", str(out), "--min-speech-ms", "100"]) == 1  # 1: d_bad.wav failed
    assert "4 files in" in capsys.readouterr().out
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [g["path"] for g in got] == ["a16k.wav", "b8k.wav", "c_noise.wav", "d_bad.wav"]
    for g in got[:3]:
        audio, sr = vad.read_wav(wav_dir / g["path"])
        want = vad.speech_timestamps(audio, sr, min_speech_duration_ms=100)
        assert g["error"] is None and g["rate"] == sr and g["seconds"] == round(len(audio) / sr, 3)
        assert g["segments"] == [[round(s / sr, 3), round(e / sr, 3)] for s, e in want]
    assert got[0]["segments"], "the spoken file has speech"
    assert got[3]["error"].startswith("InputError") and got[3]["segments"] == [] and got[3]["rate"] is None


@pytest.mark.parametrize(
    "argv, words",
    [
        (["{file}", "--out", "{out}"], "is not a folder"),
        (["{dir}"], "give --out"),
        (["{dir}", "--out", "{out}", "--backend", "onnxruntime"], "one mnnpy backend"),
        (["{dir}", "--out", "{out}", "--threshold", "2"], "--threshold"),
    ],
)
def test_vad_folder_bad_options_exit_2(wav_dir, tmp_path, capsys, argv, words):
    names = {"file": wav_dir / "a16k.wav", "dir": wav_dir, "out": tmp_path / "v.jsonl"}
    assert main(["vad", *(a.format(**names) for a in argv)]) == 2
    assert words in capsys.readouterr().err


def test_a_truncated_or_nan_wav_is_an_error_naming_the_file(wav_dir, tmp_path):
    folder = tmp_path / "damaged"
    folder.mkdir()
    whole = (wav_dir / "a16k.wav").read_bytes()
    (folder / "cut.wav").write_bytes(whole[: len(whole) // 2])  # the header still claims every sample
    wavfile.write(folder / "nan.wav", 16000, np.array([0.1, np.nan, 0.2] * 1000, np.float32))
    (folder / "ok.wav").write_bytes(whole)
    out = tmp_path / "v.jsonl"
    assert main(["vad", str(folder), "--out", str(out)]) == 1
    cut, nan, ok = (json.loads(line) for line in out.read_text().splitlines())
    assert cut["error"].startswith("InputError") and f"{folder / 'cut.wav'}: truncated" in cut["error"]
    assert nan["error"] == f"InputError: {folder / 'nan.wav'}: the WAV file holds NaN or infinite samples"
    assert ok["error"] is None and ok["segments"]
    with pytest.raises(mnnpy.InputError, match="truncated: its header claims"):
        vad.read_wav(folder / "cut.wav")


def test_parquet_columns_have_one_type_whether_or_not_a_file_failed(wav_dir, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    for name in ("good", "bad"):
        (tmp_path / name).mkdir()
    (tmp_path / "good" / "a16k.wav").write_bytes((wav_dir / "a16k.wav").read_bytes())
    (tmp_path / "bad" / "d_bad.wav").write_bytes((wav_dir / "d_bad.wav").read_bytes())
    assert main(["vad", str(tmp_path / "good"), "--out", str(tmp_path / "good.parquet")]) == 0
    assert main(["vad", str(wav_dir), "--out", str(tmp_path / "mixed.parquet")]) == 1
    assert main(["vad", str(tmp_path / "bad"), "--out", str(tmp_path / "bad.parquet")]) == 1
    schemas = [pq.read_schema(tmp_path / f"{name}.parquet") for name in ("good", "mixed", "bad")]
    assert schemas[0].equals(schemas[1]) and schemas[0].equals(schemas[2]), schemas
    assert str(schemas[0].field("error").type) == "string" and str(schemas[0].field("rate").type) == "int64"


def test_every_per_file_error_starts_with_the_path_and_keeps_what_was_read(wav_dir, tmp_path):
    folder = tmp_path / "rates"
    folder.mkdir()
    wavfile.write(folder / "low.wav", 4000, np.zeros(4000, np.int16))  # a WAV, at a rate the app refuses
    (folder / "not.wav").write_bytes((wav_dir / "d_bad.wav").read_bytes())
    out = tmp_path / "v.jsonl"
    assert main(["vad", str(folder), "--out", str(out)]) == 1
    low, bad = (json.loads(line) for line in out.read_text().splitlines())
    assert low["error"] == f"InputError: {folder / 'low.wav'}: sample rate must be an integer from 8000 to 384000 Hz, got 4000"
    assert low["rate"] == 4000 and low["seconds"] == 1.0 and low["segments"] == []
    assert bad["error"].startswith(f"InputError: {folder / 'not.wav'}: not a WAV") and bad["rate"] is None

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

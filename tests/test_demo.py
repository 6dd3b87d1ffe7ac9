"""The OCR demo (``mnnpy.apps``) reads rendered lines back exactly, on mnnpy's CPU backend (and
on onnxruntime, which checks the pre/post-processing on its own); plus the pipeline's NumPy
pieces. The demo runs as ``python -m mnnpy.demo`` (``demo_main``) and ``mnnpy demo``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mnnpy import InputError
from mnnpy.apps import demo, ocr
from mnnpy.cli import main as cli_main
from mnnpy.demo import main as demo_main

TEXTS = [demo.DEFAULT_TEXT, "The quick brown fox jumps over the lazy dog"]
BACKENDS = ["cpu", "onnxruntime"]


@pytest.fixture(scope="module")
def pipelines():
    cache = {}

    def get(backend):
        if backend == "onnxruntime":
            pytest.importorskip("onnxruntime")
        if backend not in cache:
            cache[backend] = demo.load_pipeline(backend)
        return cache[backend]

    return get


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("text", TEXTS)
def test_reads_rendered_line(pipelines, backend, text):
    det, rec, cls, alphabet = pipelines(backend)
    result = ocr.read_text(ocr.render_text(text), det, rec, alphabet, cls)
    assert result.text == text
    assert len(result.lines) == 1 and result.lines[0][1] > 0.9
    assert set(result.ms) == {"det", "cls", "rec", "total"}


def test_reads_upside_down_line(pipelines):
    """The direction classifier turns a 180-degree-rotated line back."""
    det, rec, cls, alphabet = pipelines("cpu")
    img = np.ascontiguousarray(ocr.render_text(demo.DEFAULT_TEXT)[::-1, ::-1])
    assert ocr.read_text(img, det, rec, alphabet, cls).text == demo.DEFAULT_TEXT


def test_demo_main_prints_text_and_latency(capsys, tmp_path):
    png = tmp_path / "line.png"
    assert demo_main(["--save", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"read: {demo.DEFAULT_TEXT!r}" in out and "MATCH" in out
    assert "latency ms, first run: det" in out and "warm (best of 1)" in out
    assert demo_main(["--image", str(png), "--no-cls"]) == 0
    assert f"read: {demo.DEFAULT_TEXT!r}" in capsys.readouterr().out


def test_ctc_greedy_merges_repeats_and_drops_blanks():
    alphabet = ["<blank>", "a", "b", " "]
    seq = [1, 1, 0, 1, 2, 2, 3, 0, 0]
    probs = np.full((1, len(seq), 4), 0.1, np.float32)
    probs[0, np.arange(len(seq)), seq] = 0.7
    assert ocr.ctc_greedy(probs, alphabet) == [("aab ", pytest.approx(0.7))]
    assert ocr.ctc_greedy(np.eye(4, dtype=np.float32)[None, [0, 0]], alphabet) == [("", 0.0)]


def test_db_boxes_finds_rectangles_in_order():
    prob = np.zeros((64, 128), np.float32)
    prob[40:50, 10:60] = 0.9  # second line
    prob[10:20, 70:120] = 0.8  # first line
    prob[10:20, 5:30] = 0.2  # below the threshold
    boxes = ocr.db_boxes(prob, (128, 256))  # original image twice the map's size
    assert len(boxes) == 2
    (x0, y0, x1, y1), second = boxes
    assert y1 < second[1] and 2 * (70 - 8) < x0 < 2 * 70 and 2 * 119 < x1 <= 256 and y0 < 2 * 10
    assert ocr.db_boxes(np.zeros((32, 32), np.float32), (32, 32)) == []


# -- bad options and files: "error: ...", exit 2, before any model is loaded ------------------
@pytest.fixture
def no_pipeline(monkeypatch):
    """Fail the test if the demo gets as far as loading the models."""

    def fail(*a, **k):
        raise AssertionError("the pipeline was loaded before the options were checked")

    monkeypatch.setattr(demo, "load_pipeline", fail)


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--image", "DIR/nonexist.png"], "cannot read image DIR/nonexist.png: no such file"),
        (["--image", "DIR/notimg.txt"], "cannot read image DIR/notimg.txt: not an image file"),
        (["--image", "DIR"], "cannot read image DIR: it is a directory"),
        (["--image", "DIR/trunc.png"], "cannot read image DIR/trunc.png"),
        (["--save", "/nonexistent/dir/x.png"], "--save /nonexistent/dir/x.png: directory /nonexistent/dir does not exist"),
        (["--save", "DIR"], "--save DIR: is a directory"),
        (["--save", "DIR/x.nosuchformat"], "unknown image file extension '.nosuchformat'"),
        (["--save", "DIR/x.png", "--image", "DIR/line.png"], "--save saves the rendered line"),
        (["--repeat", "0"], "--repeat must be >= 1, got 0"),
        (["--repeat", "-1"], "--repeat must be >= 1, got -1"),
        (["--threads", "1000"], "--threads must be between 1 and 256"),
        (["--text", " \n "], "--text is empty"),
    ],
)
def test_demo_rejects_bad_input(tmp_path, capsys, no_pipeline, argv, match):
    (tmp_path / "notimg.txt").write_text("not an image\n")
    png = tmp_path / "trunc.png"
    ocr.Image.fromarray(ocr.render_text("abc")).save(png)
    png.write_bytes(png.read_bytes()[:60])
    argv = [a.replace("DIR", str(tmp_path)) for a in argv]
    match = match.replace("DIR", str(tmp_path))
    for run in (demo_main, lambda argv: cli_main(["demo", *argv])):  # python -m mnnpy.demo, mnnpy demo
        assert run(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and match in err and "Traceback" not in err, err
    assert not (tmp_path / "x.png").exists()


def test_load_image_errors_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        ocr.load_image(tmp_path / "missing.png")
    with pytest.raises(InputError, match="it is a directory"):
        ocr.load_image(tmp_path)


# -- several lines, non-ASCII text ---------------------------------------------------------
MULTILINE = "first line\nThe second line is longer\nthird 2026"


def test_reads_several_lines_top_to_bottom(pipelines):
    det, rec, cls, alphabet = pipelines("cpu")
    result = ocr.read_text(ocr.render_text(MULTILINE), det, rec, alphabet, cls)
    assert result.text == MULTILINE
    tops = [box[1] for _, _, box in result.lines]
    assert len(tops) == 3 and tops == sorted(tops)


def test_demo_multiline_text(capsys):
    assert demo_main(["--text", MULTILINE, "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "MATCH" in out and out.count("read: ") == 3


def test_default_font_lacks_non_ascii_glyphs():
    default = ocr.ImageFont.load_default(size=40)
    assert ocr.missing_glyphs(default, "abc ÄÖÜ é") == "ÄÖÜé"
    assert ocr.missing_glyphs(default, "abc 2026\n") == ""
    font, missing = ocr.text_font("abc")
    assert missing == "" and font.getname() == default.getname()


def test_non_ascii_text_uses_a_font_that_has_it(capsys):
    font, missing = ocr.text_font("ÄÖÜ é ñ")
    if missing:
        pytest.skip(f"no installed TrueType font has {missing!r}")
    assert ocr.missing_glyphs(font, "ÄÖÜ é ñ") == ""
    assert demo_main(["--text", "mnnpy café", "--repeat", "1"]) == 0
    assert "read: 'mnnpy café'" in capsys.readouterr().out


def test_warns_when_no_font_draws_the_text(monkeypatch, capsys):
    monkeypatch.setattr(ocr, "FALLBACK_FONTS", ())
    monkeypatch.setattr(ocr, "_fc_match", lambda chars: None)
    assert ocr.text_font("é")[1] == "é"
    demo_main(["--text", "é", "--repeat", "1"])
    err = capsys.readouterr().err
    assert "warning: no installed font draws 'é'; the text cannot be rendered faithfully" in err


def test_warns_about_characters_the_recogniser_lacks(capsys):
    if ocr.text_font("ß")[1]:
        pytest.skip("no installed TrueType font has 'ß'")
    assert demo_main(["--text", "Straße", "--repeat", "1"]) == 1
    assert "warning: the recogniser's alphabet lacks 'ß'" in capsys.readouterr().err


def test_python_m_mnnpy_demo_is_the_mnnpy_demo_command():
    """``python -m mnnpy.demo`` starts the app through the ``mnnpy`` command: same options, same errors."""

    def python_m_demo(*argv):
        return subprocess.run([sys.executable, "-m", "mnnpy.demo", *argv], capture_output=True, text=True, timeout=120)

    shown = python_m_demo("--help")
    assert shown.returncode == 0 and "mnnpy demo" in shown.stdout
    for flag in ("--text", "--image", "--backend", "--precision", "--threads", "--no-cls", "--save", "--repeat"):
        assert flag in shown.stdout
    refused = python_m_demo("--repeat", "0")  # checked before any model is loaded
    assert refused.returncode == 2 and refused.stderr == "error: --repeat must be >= 1, got 0\n"

"""The OCR demo reads rendered lines back exactly, on mnnpy's CPU backend (and on onnxruntime,
which checks the pre/post-processing on its own); plus the pipeline's NumPy pieces."""

from __future__ import annotations

import numpy as np
import pytest

from mnnpy import demo, ocr

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
    assert demo.main(["--save", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"read: {demo.DEFAULT_TEXT!r}" in out and "MATCH" in out
    assert "latency ms, first run: det" in out and "warm (best of 1)" in out
    assert demo.main(["--image", str(png), "--no-cls"]) == 0
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

"""PP-OCR text reading in NumPy + Pillow: detection (DB), direction classification, recognition (CTC).

Images are ``(H, W, 3) uint8`` RGB arrays; the PP-OCR models were trained on BGR
(OpenCV) input, so the pipeline flips channels before normalising. Model runners
are plain callables ``ndarray -> ndarray`` (``make_runner`` builds one for an mnnpy
backend or for onnxruntime), so the same pipeline checks the engine against the
reference. Constants follow rapidocr-onnxruntime 1.4.4's ``config.yaml``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage

Runner = Callable[[np.ndarray], np.ndarray]

DET_MEAN = DET_STD = 0.5  # det normalisation: (x / 255 - 0.5) / 0.5, per channel
DET_MAX_SIDE = 960  # larger images are scaled down so that the longer side fits
DET_THRESH = 0.3  # probability -> text bitmap
DET_BOX_THRESH = 0.5  # mean probability inside a box to keep it
DET_UNCLIP_RATIO = 1.6  # grow a box by area * ratio / perimeter pixels on each side
DET_MIN_SIZE = 3  # boxes whose short side is smaller are dropped (pixels)
CLS_SHAPE = (3, 48, 192)  # (C, H, W) of the direction classifier's input
CLS_THRESH = 0.9  # rotate a crop by 180 degrees when "180" scores above this
REC_HEIGHT, REC_MIN_WIDTH = 48, 320  # recogniser input height; batch width is at least this


# -- input ----------------------------------------------------------------------------
def render_text(text: str, font_size: int = 40, margin: int = 24) -> np.ndarray:
    """Black ``text`` on white with Pillow's scalable default font -> ``(H, W, 3) uint8`` RGB."""
    font = ImageFont.load_default(size=font_size)
    left, top, right, bottom = font.getbbox(text)
    img = Image.new("RGB", (right - left + 2 * margin, bottom - top + 2 * margin), "white")
    ImageDraw.Draw(img).text((margin - left, margin - top), text, fill="black", font=font)
    return np.asarray(img)


def load_image(path: str) -> np.ndarray:
    """An image file -> ``(H, W, 3) uint8`` RGB."""
    return np.asarray(Image.open(path).convert("RGB"))


def _resize(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Bilinear resize of ``(H, W, 3) uint8`` to ``(height, width, 3) uint8``."""
    if img.shape[:2] == (height, width):
        return img
    return np.asarray(Image.fromarray(img).resize((width, height), Image.BILINEAR))


def _to_bgr_chw(img: np.ndarray) -> np.ndarray:
    """``(H, W, 3) uint8`` RGB -> ``(3, H, W) float32`` BGR normalised to [-1, 1]."""
    x = img[:, :, ::-1].transpose(2, 0, 1).astype(np.float32)
    return (x * (1 / 255) - DET_MEAN) / DET_STD


# -- detection ------------------------------------------------------------------------
def det_preprocess(img: np.ndarray) -> np.ndarray:
    """``(H, W, 3) uint8`` RGB -> ``(1, 3, H', W') float32``, H' and W' multiples of 32 (>= 32)."""
    h, w = img.shape[:2]
    scale = min(1.0, DET_MAX_SIDE / max(h, w))
    rh, rw = (max(32, round(s * scale / 32) * 32) for s in (h, w))
    return _to_bgr_chw(_resize(img, rw, rh))[None]


def db_boxes(prob: np.ndarray, out_hw: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    """DB post-processing, axis-aligned: ``prob (H, W) float32`` -> boxes ``(x0, y0, x1, y1)``.

    Threshold, 2x2 dilation, 8-connected components; a component is kept when its
    short side is at least ``DET_MIN_SIZE`` and its box's mean probability is at least
    ``DET_BOX_THRESH``; it is then grown by ``area * DET_UNCLIP_RATIO / perimeter`` and
    scaled to ``out_hw`` (the original image's (H, W)). Sorted top-to-bottom, left-to-right.
    """
    h, w = prob.shape
    bitmap = ndimage.binary_dilation(prob > DET_THRESH, structure=np.ones((2, 2), bool))
    labels, _ = ndimage.label(bitmap, structure=np.ones((3, 3), int))
    sy, sx = out_hw[0] / h, out_hw[1] / w
    boxes = []
    for sl in ndimage.find_objects(labels):
        y0, y1, x0, x1 = sl[0].start, sl[0].stop - 1, sl[1].start, sl[1].stop - 1
        bw, bh = x1 - x0, y1 - y0
        if min(bw, bh) < DET_MIN_SIZE or prob[sl].mean() < DET_BOX_THRESH:
            continue
        d = bw * bh * DET_UNCLIP_RATIO / (2 * (bw + bh))
        x0, x1, y0, y1 = x0 - d, x1 + d, y0 - d, y1 + d
        if min(x1 - x0, y1 - y0) < DET_MIN_SIZE + 2:
            continue
        box = (round(x0 * sx), round(y0 * sy), round(x1 * sx), round(y1 * sy))
        box = (max(box[0], 0), max(box[1], 0), min(box[2], out_hw[1]), min(box[3], out_hw[0]))
        if box[2] - box[0] > DET_MIN_SIZE and box[3] - box[1] > DET_MIN_SIZE:
            boxes.append(box)
    return sorted(boxes, key=lambda b: (b[1] // 10, b[0]))


def crop(img: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """Cut ``box`` out of ``img``; tall crops (H >= 1.5 W) are turned to lie horizontally."""
    x0, y0, x1, y1 = box
    c = img[y0:y1, x0:x1]
    return np.rot90(c) if c.shape[0] >= 1.5 * c.shape[1] else c


# -- classification and recognition ---------------------------------------------------
def _fit_height(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize to ``height`` keeping the aspect ratio (width at most ``width``), normalise,
    zero-pad on the right -> ``(3, height, width) float32``."""
    h, w = img.shape[:2]
    rw = max(1, min(width, math.ceil(height * w / h)))
    out = np.zeros((3, height, width), np.float32)
    out[:, :, :rw] = _to_bgr_chw(_resize(img, rw, height))
    return out


def cls_preprocess(crops: list[np.ndarray]) -> np.ndarray:
    """Crops -> ``(N, 3, 48, 192) float32`` for the direction classifier."""
    return np.stack([_fit_height(c, CLS_SHAPE[1], CLS_SHAPE[2]) for c in crops])


def rec_preprocess(crops: list[np.ndarray]) -> np.ndarray:
    """Crops -> ``(N, 3, 48, W) float32``, W = 48 * the widest aspect ratio (at least 320)."""
    ratio = max([REC_MIN_WIDTH / REC_HEIGHT] + [c.shape[1] / c.shape[0] for c in crops])
    width = int(REC_HEIGHT * ratio)
    return np.stack([_fit_height(c, REC_HEIGHT, width) for c in crops])


def ctc_alphabet(character_metadata: str) -> list[str]:
    """The recogniser's class list: blank (index 0), the metadata's lines, then a space."""
    return ["<blank>"] + character_metadata.splitlines() + [" "]


def ctc_greedy(probs: np.ndarray, alphabet: list[str]) -> list[tuple[str, float]]:
    """Greedy CTC: ``probs (N, T, C) float32`` -> [(text, mean probability of its characters)]."""
    best, score = probs.argmax(axis=2), probs.max(axis=2)
    out = []
    for idx, p in zip(best, score):
        keep = np.ones(len(idx), bool)
        keep[1:] = idx[1:] != idx[:-1]
        keep &= idx != 0
        text = "".join(alphabet[i] for i in idx[keep])
        out.append((text, float(p[keep].mean()) if keep.any() else 0.0))
    return out


# -- the pipeline ---------------------------------------------------------------------
@dataclass
class OcrResult:
    """What was read: one ``(text, score, box)`` per line and each stage's latency (ms)."""

    lines: list[tuple[str, float, tuple[int, int, int, int]]] = field(default_factory=list)
    ms: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """The lines read, joined with newlines."""
        return "\n".join(t for t, _, _ in self.lines)


def read_text(img: np.ndarray, det: Runner, rec: Runner, alphabet: list[str], cls: Runner | None = None) -> OcrResult:
    """Detect, (optionally) orient and recognise the text in ``img (H, W, 3) uint8`` RGB.

    ``det``: ``(1, 3, H, W) -> (1, 1, H, W)`` probabilities; ``cls``: ``(N, 3, 48, 192) -> (N, 2)``;
    ``rec``: ``(N, 3, 48, W) -> (N, W / 8, len(alphabet))``. Latencies in ``result.ms``.
    """
    res = OcrResult()
    t0 = time.perf_counter()
    prob = det(det_preprocess(img))[0, 0]
    boxes = db_boxes(prob, img.shape[:2])
    crops = [crop(img, b) for b in boxes]
    t1 = time.perf_counter()
    if cls is not None and crops:
        scores = cls(cls_preprocess(crops))
        crops = [np.rot90(c, 2) if s.argmax() == 1 and s.max() > CLS_THRESH else c for c, s in zip(crops, scores)]
    t2 = time.perf_counter()
    texts = ctc_greedy(rec(rec_preprocess(crops)), alphabet) if crops else []
    t3 = time.perf_counter()
    res.lines = [(t, s, b) for (t, s), b in zip(texts, boxes)]
    res.ms = {"det": (t1 - t0) * 1e3, "cls": (t2 - t1) * 1e3, "rec": (t3 - t2) * 1e3, "total": (t3 - t0) * 1e3}
    return res


def make_runner(model_path: str, backend: str = "cpu", num_threads: int | None = None) -> tuple[Runner, dict[str, str]]:
    """A runner for one single-input, single-output model and the model's metadata.

    ``backend``: an mnnpy backend name (``model_path`` is then a ``.mnnpy`` file) or
    ``"onnxruntime"`` (``model_path`` an ONNX file), the reference.
    """
    if backend == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if num_threads:
            opts.intra_op_num_threads = num_threads
        sess = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        meta = dict(sess.get_modelmeta().custom_metadata_map)
        return (lambda x: sess.run(None, {name: x})[0]), meta
    import mnnpy

    interp = mnnpy.Interpreter(str(model_path))
    session = interp.create_session(backend=backend, num_threads=num_threads)
    name, out = interp.inputs[0].name, interp.outputs[0].name
    return (lambda x: session.run({name: x})[out]), interp.metadata

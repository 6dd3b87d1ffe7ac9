"""PP-OCR text reading in NumPy + Pillow: detection (DB), direction classification, recognition (CTC).

Images are ``(H, W, 3) uint8`` RGB arrays; the PP-OCR models were trained on BGR
(OpenCV) input, so the pipeline flips channels before normalising. Model runners
are plain callables ``ndarray -> ndarray`` (``make_runner`` builds one for an mnnpy
backend or for onnxruntime), so the same pipeline checks the engine against the
reference. Constants follow rapidocr-onnxruntime 1.4.4's ``config.yaml``.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw, ImageFont, UnidentifiedImageError
from scipy import ndimage

import mnnpy
from mnnpy import InputError
from mnnpy.apps.reference import onnxruntime_session
from mnnpy.files import NotRegularFileError, open_regular

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
#: TrueType fonts tried, after ``fc-match``, when Pillow's default font lacks a glyph of the text
FALLBACK_FONTS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/System/Library/Fonts/Supplemental/Arial Unicode.ttf",
    "/Library/Fonts/Arial Unicode.ttf",
    "C:/Windows/Fonts/arial.ttf",
)
_NOT_A_CHAR = "\U0010fffd"  # a private-use code point: no font draws it, so it shows the font's .notdef glyph


def missing_glyphs(font: ImageFont.FreeTypeFont, text: str) -> str:
    """The characters of ``text`` that ``font`` draws as its .notdef glyph (a box or nothing).

    Spaces, control and format characters (Unicode categories Z* and C*) are not checked.
    """

    def mask(ch):
        m = font.getmask(ch)
        return m.size, bytes(m)

    notdef = mask(_NOT_A_CHAR)
    seen = dict.fromkeys(c for c in text if unicodedata.category(c)[0] not in "ZC")
    return "".join(c for c in seen if mask(c) == notdef)


@functools.cache
def _fc_match(chars: str) -> str | None:
    """The file of fontconfig's best sans-serif font for ``chars`` (``None`` without ``fc-match``)."""
    charset = " ".join(f"{ord(c):x}" for c in chars)
    try:
        r = subprocess.run(
            ["fc-match", "-f", "%{file}", f"sans-serif:charset={charset}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (r.stdout.strip() or None) if r.returncode == 0 else None


def text_font(text: str, font_size: int = 40) -> tuple[ImageFont.FreeTypeFont, str]:
    """The font to render ``text`` with, and the characters of ``text`` it cannot draw ('' if none).

    Pillow's scalable default font when it has every glyph; else the first TrueType font
    that has them all, of ``fc-match``'s pick and ``FALLBACK_FONTS``; else the font that
    lacks the fewest characters.
    """
    best = ImageFont.load_default(size=font_size)
    best_missing = missing_glyphs(best, text)
    if not best_missing:
        return best, ""
    tried = set()
    for path in (_fc_match(best_missing), *FALLBACK_FONTS):
        if not path or path in tried or not os.path.isfile(path):
            continue
        tried.add(path)
        try:
            font = ImageFont.truetype(path, font_size)
        except OSError:
            continue
        missing = missing_glyphs(font, text)
        if len(missing) < len(best_missing):
            best, best_missing = font, missing
        if not missing:
            break
    return best, best_missing


def render_text(text: str, font_size: int = 40, margin: int = 24) -> np.ndarray:
    """Black ``text`` on white -> ``(H, W, 3) uint8`` RGB, in the font ``text_font`` picks.

    Each line of a multi-line ``text`` is drawn below the previous one, left-aligned,
    with half a line of space between lines (so the detector finds one box per line).
    """
    font, _ = text_font(text, font_size)
    draw = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    spacing = font_size // 2
    left, top, right, bottom = draw.multiline_textbbox((0, 0), text, font=font, spacing=spacing)
    img = Image.new("RGB", (right - left + 2 * margin, bottom - top + 2 * margin), "white")
    ImageDraw.Draw(img).multiline_text((margin - left, margin - top), text, fill="black", font=font, spacing=spacing)
    return np.asarray(img)


def load_image(path: str | os.PathLike) -> np.ndarray:
    """An image file -> ``(H, W, 3) uint8`` RGB; ``InputError`` when it cannot be read as an image."""
    try:
        with open_regular(path) as f, Image.open(f) as im:  # a named pipe: refused, never a blocked read
            return np.asarray(im.convert("RGB"))
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "it is a directory"
    except NotRegularFileError as e:
        reason = "it is a directory" if os.path.isdir(path) else str(e)
    except UnidentifiedImageError:
        reason = "not an image file Pillow can read"
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
    raise InputError(f"cannot read image {os.fspath(path)}: {reason}")


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


def make_runner(
    model_path: str, backend: str = "cpu", num_threads: int | None = None, precision: str = "normal"
) -> tuple[Runner, dict[str, str]]:
    """A runner for one single-input, single-output model and the model's metadata. ``backend``: an
    mnnpy backend name (``model_path`` a ``.mnnpy`` file; the runner's ``session`` attribute is its
    Session) or ``"onnxruntime"`` (an ONNX file), the reference. ``precision``: the mnnpy session's."""
    if backend == "onnxruntime":
        sess = onnxruntime_session(model_path, num_threads)
        name = sess.get_inputs()[0].name
        meta = dict(sess.get_modelmeta().custom_metadata_map)
        return (lambda x: sess.run(None, {name: x})[0]), meta
    interp = mnnpy.Interpreter(str(model_path))
    session = interp.create_session(backend=backend, num_threads=num_threads, precision=precision)
    name, out = interp.inputs[0].name, interp.outputs[0].name
    run = lambda x: session.run({name: x})[out]  # noqa: E731
    run.session = session  # the demo reports what backend="auto" chose
    return run, interp.metadata

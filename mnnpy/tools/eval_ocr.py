"""``mnnpy eval ocr``: the OCR app's accuracy and latency per backend and precision.

A seeded dataset of ``--lines`` one-line images (``make_dataset``): random words of ASCII
letters and digits (``LETTERS``: no look-alike glyphs), rendered in the TrueType fonts found here (``find_fonts``: regular and
bold faces that fontconfig lists, else ``ocr.FALLBACK_FONTS``; the fonts used are printed),
at sizes ``SIZES`` px, black on white, then a light Gaussian blur (radius 0-``MAX_BLUR``) and
Gaussian noise (sigma ``NOISE``). Each image goes through the PP-OCR pipeline of
``mnnpy.apps.ocr`` (detection, direction classifier, recognition; ``demo.load_pipeline``) on
every ``--backend`` at every ``--precision`` (the CPU backend computes in fp32 whatever the
precision: it is run once), and on onnxruntime, the same pipeline on the reference engine.
Reported: exact-line accuracy (the boxes read, joined by spaces, equal the line with
whitespace runs collapsed), character error rate (Levenshtein edit distance over the
reference's length, summed over lines) and the pipeline's latency per line (ms: mean and
p50, after one untimed warm-up line; new input shapes re-plan the sessions, which counts).
A PNG (matplotlib) plots accuracy against latency per backend and precision. The precision
column: ``evaluate.precision_label`` (fp32 on the CPU and onnxruntime; fp32/high,
fp32/normal, fp16/low on GPU backends).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from mnnpy.tools.eval_plot import plot_accuracy_latency
from mnnpy.tools.table import format_table

SIZES = (28, 36, 44)  # font sizes, px
NOISE = 6.0  # sigma of the Gaussian noise, in 0..255 grey levels
MAX_BLUR = 0.8  # largest Gaussian blur radius, px
WORDS = (1, 4)  # words per line, inclusive
# glyphs that look alike in some fonts (I l 1 | O o 0 | c s v w x z k p u against their capitals)
# are left out, so that a line misread is the engine's doing rather than the font's
LETTERS = "abcdefghijkmnpqrstuvwxyzABDEFGHJLMNQRTY23456789"
MARGIN = 16  # white border around the text, px


def find_fonts() -> list[str]:
    """TrueType files of upright (regular or bold) faces that fontconfig lists, sorted; where
    ``fc-list`` is missing or lists none, the ``ocr.FALLBACK_FONTS`` that exist."""
    found = []
    try:
        out = subprocess.run(["fc-list", ":", "file", "style"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        path, _, style = line.partition(":")
        bad = ("italic", "oblique", "light", "condensed", "math")
        if path.endswith(".ttf") and not any(b in (style + path).lower() for b in bad):
            found.append(path.strip())
    if not found:
        from mnnpy.apps.ocr import FALLBACK_FONTS

        found = [p for p in FALLBACK_FONTS if os.path.isfile(p)]
    return sorted(set(found))


def random_line(rng: np.random.Generator) -> str:
    """1-4 words of 2-8 characters of ``LETTERS``, separated by single spaces."""
    words = []
    for _ in range(rng.integers(WORDS[0], WORDS[1] + 1)):
        words.append("".join(rng.choice(list(LETTERS), rng.integers(2, 9))))
    return " ".join(words)


def render_line(text: str, font: ImageFont.FreeTypeFont, rng: np.random.Generator) -> np.ndarray:
    """``text`` black on white in ``font``, blurred and noised -> ``(H, W, 3) uint8`` RGB."""
    left, top, right, bottom = ImageDraw.Draw(Image.new("L", (1, 1))).textbbox((0, 0), text, font=font)
    img = Image.new("L", (right - left + 2 * MARGIN, bottom - top + 2 * MARGIN), 255)
    ImageDraw.Draw(img).text((MARGIN - left, MARGIN - top), text, fill=0, font=font)
    img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0, MAX_BLUR))))
    grey = np.asarray(img, np.float32) + rng.normal(0, NOISE, (img.height, img.width))
    return np.repeat(np.clip(grey, 0, 255).astype(np.uint8)[:, :, None], 3, axis=2)


def make_dataset(lines: int, seed: int, fonts: list[str]) -> list[tuple[np.ndarray, str, str]]:
    """``lines`` seeded ``(image (H, W, 3) uint8, text, font file)``; the fonts in turn, sizes
    drawn from ``SIZES``; Pillow's default font when ``fonts`` is empty."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(lines):
        size = int(rng.choice(SIZES))
        path = fonts[i % len(fonts)] if fonts else ""
        font = ImageFont.truetype(path, size) if path else ImageFont.load_default(size=size)
        text = random_line(rng)
        out.append((render_line(text, font, rng), text, os.path.basename(path) or "Pillow default"))
    return out


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest insertions, deletions and substitutions from a to b."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def normalise(text: str) -> str:
    """Whitespace runs collapsed to one space, ends stripped."""
    return " ".join(text.split())


def evaluate(dataset, backend: str, precision: str, threads: int | None) -> dict:
    """Read every line of ``dataset`` on ``backend``: ``{"accuracy" %, "cer" %, "mean_ms",
    "p50_ms", "lines", "errors": [(want, got)] (the first few), "failed": [(want, error)]}``.
    A line whose run raises a ``MnnpyError`` (a device time-out, say) counts as read as
    nothing, its error kept in ``failed``: one bad line does not end the evaluation."""
    from mnnpy.apps import demo, ocr
    from mnnpy.errors import MnnpyError

    det, rec, cls, alphabet = demo.load_pipeline(backend, True, threads, precision)
    ocr.read_text(dataset[0][0], det, rec, alphabet, cls)  # warm-up: the first resize
    exact, dist, chars, times, errors, failed = 0, 0, 0, [], [], []
    for img, want, _ in dataset:
        try:
            res = ocr.read_text(img, det, rec, alphabet, cls)
        except MnnpyError as e:
            failed.append((want, f"{type(e).__name__}: {e}"))
            dist += len(normalise(want))
            chars += len(normalise(want))
            continue
        got = normalise(" ".join(t for t, _, _ in res.lines))
        times.append(res.ms["total"])
        exact += got == normalise(want)
        dist += edit_distance(got, normalise(want))
        chars += len(normalise(want))
        if got != normalise(want) and len(errors) < 5:
            errors.append((want, got))
    n = len(dataset)
    return {
        "accuracy": 100 * exact / n,
        "cer": 100 * dist / max(chars, 1),
        "mean_ms": statistics.fmean(times) if times else float("nan"),
        "p50_ms": statistics.median(times) if times else float("nan"),
        "lines": n,
        "errors": errors,
        "failed": failed,
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mnnpy eval ocr``'s options."""
    from mnnpy.tools.evaluate import add_common_arguments

    add_common_arguments(p, "eval_ocr.png")
    p.add_argument("--lines", type=int, default=200, help="generated lines (default 200)")
    p.add_argument("--no-reference", action="store_true", help="skip onnxruntime")
    p.add_argument(
        "--save-images",
        metavar="DIR",
        help="write the generated lines to DIR as PNG files, with their texts in DIR/texts.jsonl, instead of evaluating",
    )


def save_dataset(dataset, folder: str | os.PathLike) -> list[str]:
    """Write ``make_dataset``'s lines to ``folder`` (created): ``line_0000.png``, ... (lossless,
    so reading a file back gives the image) and ``texts.jsonl`` (``{"path", "text", "font"}``
    per line, in order). Returns the image files' names; ``InputError`` where it cannot write."""
    import json

    from mnnpy.errors import InputError

    names = [f"line_{i:04d}.png" for i in range(len(dataset))]
    try:
        os.makedirs(folder, exist_ok=True)
        for name, (img, _, _) in zip(names, dataset):
            Image.fromarray(img).save(os.path.join(folder, name))
        with open(os.path.join(folder, "texts.jsonl"), "w") as f:
            for name, (_, text, font) in zip(names, dataset):
                f.write(json.dumps({"path": name, "text": text, "font": font}) + "\n")
    except OSError as e:
        raise InputError(f"--save-images {folder}: cannot write: {e.strerror or e}") from None
    return names


def run(args: argparse.Namespace) -> int:
    """``mnnpy eval ocr``: prints the table, writes the plot; 0. With ``--save-images``: writes
    the lines (``save_dataset``) and evaluates nothing."""
    from mnnpy.tools.evaluate import checked_runs, precision_label

    runs = checked_runs(args, args.lines, "--lines")
    fonts = find_fonts()
    dataset = make_dataset(args.lines, args.seed, fonts)
    used = sorted({f for _, _, f in dataset})
    print(f"{args.lines} generated lines (seed {args.seed}); fonts: {', '.join(used)}; sizes {SIZES} px")
    if args.save_images:
        save_dataset(dataset, args.save_images)
        print(f"wrote {args.lines} PNG files and texts.jsonl to {args.save_images}")
        return 0
    if not args.no_reference:
        runs.append(("onnxruntime", "fp32"))
    results = {}
    for b, p in runs:
        results[(b, precision_label(b, p))] = evaluate(dataset, b, p, args.threads)
    rows = [
        [b, p, f"{r['accuracy']:.1f}", f"{r['cer']:.2f}", f"{r['mean_ms']:.1f}", f"{r['p50_ms']:.1f}", len(r["failed"])]
        for (b, p), r in results.items()
    ]
    print(format_table(["backend", "precision", "exact lines %", "CER %", "mean ms", "p50 ms", "failed runs"], rows))
    for (b, p), r in results.items():
        for want, got in r["errors"][:3]:
            print(f"  {b} {p}: {want!r} read as {got!r}")
        for want, error in r["failed"][:3]:
            print(f"  {b} {p}: {want!r} failed: {error}")
    points = [(f"{b} {p}", r["mean_ms"], r["accuracy"]) for (b, p), r in results.items()]
    if args.plot:
        plot_accuracy_latency(points, args.plot, f"PP-OCRv4 on {args.lines} generated lines", "exact-line accuracy, %")
        print(f"wrote {args.plot}")
    return 0

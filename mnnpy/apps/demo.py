"""The main job on real input: read a line of text with PP-OCRv4 on an mnnpy backend.

    python -m mnnpy.demo                            # render DEFAULT_TEXT, read it back on the CPU
    python -m mnnpy.demo --text "Hello, world 2026" # another line
    python -m mnnpy.demo --image photo.png          # an image file instead
    python -m mnnpy.demo --backend onnxruntime      # the same pipeline on the reference engine

(``mnnpy demo`` takes the same options.)

The first call fetches the models (``mnnpy.models``: the rapidocr-onnxruntime wheel
from PyPI into the cache) and converts them to ``.mnnpy`` (cached). Prints the text
read and each stage's latency in ms (det, cls, rec, total) for the first run (which
includes each session's resize) and the fastest of the ``--repeat`` - 1 later runs.
A ``--text`` with several lines is rendered one line below the other and read back
top to bottom. Exit status 1 when the rendered text (its non-blank lines) is not read
back exactly; 2 on bad options or input (``error: ...``).

The ``mnnpy`` command imports this module for its ``demo`` subcommand and calls
``add_arguments(parser)`` and ``run(args)``; it uses only mnnpy's public API.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from mnnpy import MAX_THREADS, InputError, models
from mnnpy.apps import ocr

DEFAULT_TEXT = "mnnpy reads this line 2026"


def load_pipeline(backend: str = "cpu", use_cls: bool = True, num_threads: int | None = None, precision: str = "normal"):
    """``(det, rec, cls or None, alphabet)`` runners for ``backend`` (models fetched/converted)."""

    def path(kind: str):
        return models.ocr_model_path(kind) if backend == "onnxruntime" else models.ocr_mnnpy_path(kind)

    det, _ = ocr.make_runner(path("det"), backend, num_threads, precision)
    rec, meta = ocr.make_runner(path("rec"), backend, num_threads, precision)
    cls = ocr.make_runner(path("cls"), backend, num_threads, precision)[0] if use_cls else None
    if "character" not in meta:
        raise models.ModelFetchError("the recognition model has no 'character' metadata")
    return det, rec, cls, ocr.ctc_alphabet(meta["character"])


def read(
    image, backend: str = "cpu", use_cls: bool = True, num_threads: int | None = None, precision: str = "normal"
) -> ocr.OcrResult:
    """Read the text in ``image (H, W, 3) uint8`` RGB on ``backend``; see ``ocr.read_text``."""
    det, rec, cls, alphabet = load_pipeline(backend, use_cls, num_threads, precision)
    return ocr.read_text(image, det, rec, alphabet, cls)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The demo's options (shared by ``python -m mnnpy.demo`` and ``mnnpy demo``)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--image", help="read this image file instead of a rendered line")
    src.add_argument("--text", default=DEFAULT_TEXT, help=f"line to render and read (default: {DEFAULT_TEXT!r})")
    p.add_argument("--backend", default="cpu", help="mnnpy backend name, or 'onnxruntime' for the reference (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help=f"CPU threads (1..{MAX_THREADS})")
    p.add_argument(
        "--precision", default="normal", choices=("high", "normal", "low"), help="session precision (low: fp16 storage on GPUs)"
    )
    p.add_argument("--no-cls", action="store_true", help="skip the text direction classifier")
    p.add_argument("--save", metavar="PNG", help="also save the rendered image here")
    p.add_argument(
        "--repeat", type=int, default=2, help="runs (>= 1); after the first, the fastest is shown as 'warm' (default 2)"
    )


def _check_save_path(path: str) -> None:
    """``InputError`` unless a PNG (or another format Pillow writes) can be saved at ``path``."""
    from PIL import Image

    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(f"--save {path}: is a directory; give a file name such as line.png")
    if not os.path.isdir(parent):
        raise InputError(f"--save {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise InputError(f"--save {path}: directory {parent} is not writable")
    ext = os.path.splitext(path)[1].lower()
    if ext not in Image.registered_extensions():
        raise InputError(f"--save {path}: unknown image file extension {ext!r}; use .png")


def _check_counts(args: argparse.Namespace) -> None:
    """``InputError`` unless ``--repeat`` >= 1 and ``--threads`` (when given) is in 1..``MAX_THREADS``."""
    if args.repeat < 1:
        raise InputError(f"--repeat must be >= 1, got {args.repeat}")
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise InputError(f"--threads must be between 1 and {MAX_THREADS}, got {args.threads}")


def run(args: argparse.Namespace) -> int:
    """Run the demo for parsed ``args``; returns the exit status (1: the text read differs).

    Raises ``InputError`` for bad options or an unreadable image, before any model is
    loaded; ``models.ModelFetchError`` when the models cannot be fetched or converted;
    ``BackendUnavailableError`` for a backend that cannot run here.
    """
    from PIL import Image

    _check_counts(args)
    if args.image:
        if args.save:
            raise InputError("--save saves the rendered line; it cannot be used with --image")
        image, expected = ocr.load_image(args.image), None
    else:
        text = "\n".join(args.text.splitlines())
        expected = "\n".join(line for line in text.split("\n") if line.strip())
        if not expected:
            raise InputError("--text is empty; give some text to render")
        if args.save:
            _check_save_path(args.save)
        _, missing = ocr.text_font(text)
        if missing:
            print(f"warning: no installed font draws {missing!r}; the text cannot be rendered faithfully", file=sys.stderr)
        image = ocr.render_text(text)
        if args.save:
            try:
                Image.fromarray(image).save(args.save)
            except (OSError, ValueError) as e:
                raise InputError(f"--save {args.save}: cannot write the image: {e}") from None
    t0 = time.perf_counter()
    pipeline = load_pipeline(args.backend, not args.no_cls, args.threads, args.precision)
    prep_ms = (time.perf_counter() - t0) * 1e3
    known = set(pipeline[3])
    unknown = "".join(dict.fromkeys(c for c in expected or "" if not c.isspace() and c not in known))
    if unknown:
        print(f"warning: the recogniser's alphabet lacks {unknown!r}; those characters cannot be read back", file=sys.stderr)
    result = ocr.read_text(image, *pipeline[:2], pipeline[3], pipeline[2])
    warm = [ocr.read_text(image, *pipeline[:2], pipeline[3], pipeline[2]) for _ in range(args.repeat - 1)]
    h, w = image.shape[:2]
    print(f"image: {args.image or 'rendered text'} ({w}x{h}), backend: {args.backend}, precision: {args.precision}")
    for text, score, box in result.lines:
        print(f"read: {text!r}  (score {score:.3f}, box {box})")
    if not result.lines:
        print("read: nothing (no text box detected)")
    if args.backend == "auto":
        chosen = {k: r.session.placement.backends for k, r in zip(("det", "rec", "cls"), pipeline[:3]) if r is not None}
        print("auto chose: " + "; ".join(f"{k} on {', '.join(b)}" for k, b in chosen.items()))
    print(f"models ready in {prep_ms:.0f} ms (fetch/convert/load; cached after the first call)")
    print("latency ms, first run: " + ", ".join(f"{k} {v:.1f}" for k, v in result.ms.items()))
    if warm:
        best = min(warm, key=lambda r: r.ms["total"])
        print(f"latency ms, warm (best of {len(warm)}): " + ", ".join(f"{k} {v:.1f}" for k, v in best.ms.items()))
    if expected is not None:
        ok = result.text == expected
        print(f"expected: {expected!r} -> {'MATCH' if ok else 'MISMATCH'}")
        return 0 if ok else 1
    return 0

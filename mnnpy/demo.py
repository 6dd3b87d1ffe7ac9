"""The main job on real input: read a line of text with PP-OCRv4 on an mnnpy backend.

    python -m mnnpy.demo                       # render DEFAULT_TEXT, read it back on the CPU
    python -m mnnpy.demo --text "Hello 2026"   # another line
    python -m mnnpy.demo --image photo.png     # an image file instead
    python -m mnnpy.demo --backend onnxruntime # the same pipeline on the reference engine

The first call fetches the models (``mnnpy.models``: the rapidocr-onnxruntime wheel
from PyPI into the cache) and converts them to ``.mnnpy`` (cached). Prints the text
read and each stage's latency in ms (det, cls, rec, total) for the first run (which
includes each session's resize) and the fastest of the ``--repeat`` - 1 later runs.
Exit status 1 when a rendered line is not read back exactly.
"""

from __future__ import annotations

import argparse
import sys
import time

from mnnpy import models, ocr

DEFAULT_TEXT = "mnnpy reads this line 2026"


def load_pipeline(backend: str = "cpu", use_cls: bool = True, num_threads: int | None = None):
    """``(det, rec, cls or None, alphabet)`` runners for ``backend`` (models fetched/converted)."""

    def path(kind: str):
        return models.ocr_model_path(kind) if backend == "onnxruntime" else models.ocr_mnnpy_path(kind)

    det, _ = ocr.make_runner(path("det"), backend, num_threads)
    rec, meta = ocr.make_runner(path("rec"), backend, num_threads)
    cls = ocr.make_runner(path("cls"), backend, num_threads)[0] if use_cls else None
    if "character" not in meta:
        raise models.ModelFetchError("the recognition model has no 'character' metadata")
    return det, rec, cls, ocr.ctc_alphabet(meta["character"])


def read(image, backend: str = "cpu", use_cls: bool = True, num_threads: int | None = None) -> ocr.OcrResult:
    """Read the text in ``image (H, W, 3) uint8`` RGB on ``backend``; see ``ocr.read_text``."""
    det, rec, cls, alphabet = load_pipeline(backend, use_cls, num_threads)
    return ocr.read_text(image, det, rec, alphabet, cls)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The demo's options (shared by ``python -m mnnpy.demo`` and ``mnnpy demo``)."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--image", help="read this image file instead of a rendered line")
    src.add_argument("--text", default=DEFAULT_TEXT, help=f"line to render and read (default: {DEFAULT_TEXT!r})")
    p.add_argument("--backend", default="cpu", help="mnnpy backend name, or 'onnxruntime' for the reference (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads")
    p.add_argument("--no-cls", action="store_true", help="skip the text direction classifier")
    p.add_argument("--save", metavar="PNG", help="also save the rendered image here")
    p.add_argument("--repeat", type=int, default=2, help="runs; after the first, the fastest is shown as 'warm' (default 2)")


def run(args: argparse.Namespace) -> int:
    """Run the demo for parsed ``args``; returns the exit status."""
    from PIL import Image

    if args.image:
        image, expected = ocr.load_image(args.image), None
    else:
        image, expected = ocr.render_text(args.text), args.text
        if args.save:
            Image.fromarray(image).save(args.save)
    t0 = time.perf_counter()
    pipeline = load_pipeline(args.backend, not args.no_cls, args.threads)
    prep_ms = (time.perf_counter() - t0) * 1e3
    result = ocr.read_text(image, *pipeline[:2], pipeline[3], pipeline[2])
    warm = [ocr.read_text(image, *pipeline[:2], pipeline[3], pipeline[2]) for _ in range(args.repeat - 1)]
    h, w = image.shape[:2]
    print(f"image: {args.image or 'rendered line'} ({w}x{h}), backend: {args.backend}")
    for text, score, box in result.lines:
        print(f"read: {text!r}  (score {score:.3f}, box {box})")
    if not result.lines:
        print("read: nothing (no text box detected)")
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


def main(argv: list[str] | None = None) -> int:
    """``python -m mnnpy.demo [--image path] [--text "..."] [--backend cpu]``."""
    p = argparse.ArgumentParser(prog="python -m mnnpy.demo", description=__doc__.split("\n")[0])
    add_arguments(p)
    args = p.parse_args(argv)
    from mnnpy.errors import MnnpyError

    try:
        return run(args)
    except MnnpyError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

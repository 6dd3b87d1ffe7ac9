"""``mnnpy eval classify MODEL.onnx``: a classifier's agreement with onnxruntime per backend.

Images: the files of ``--images DIR`` (any Pillow can read), else ``--count`` seeded
generated ones (``generated_images``: random ellipses and rectangles in random colours on a
random background, lightly noised). Each is resized to the model's input size (bilinear),
scaled to [0, 1], normalised with ImageNet's mean and std (``MEAN``, ``STD``) and fed as
``(1, 3, H, W) float32``. The reference is onnxruntime's CPU provider on the ONNX model;
per ``--backend`` and ``--precision``: top-1 agreement (the backend's highest-scoring class
is onnxruntime's) and top-5 agreement (onnxruntime's top class is among the backend's five
highest), in %, and the latency per image (ms: mean and p50 of ``session.run``, after one
untimed run). The model's first input must be a float ``(N, 3, H, W)`` with H and W fixed (or,
where dynamic, given by ``--size``; a ``--size`` other than fixed dims is refused), and its
first output ``(N, classes)``. The images' inputs together are held to the tools' input size
limit (``inputs.check_input_bytes``), checked before any image is made. A PNG plots agreement
against latency. The precision column: ``evaluate.precision_label``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from PIL import Image, ImageDraw

from mnnpy.errors import InputError
from mnnpy.tools.eval_plot import plot_accuracy_latency
from mnnpy.tools.inputs import check_input_bytes, load_model, onnx_reference
from mnnpy.tools.table import format_table

MEAN = np.array([0.485, 0.456, 0.406], np.float32)  # ImageNet, RGB
STD = np.array([0.229, 0.224, 0.225], np.float32)


def generated_images(count: int, seed: int, size: tuple[int, int]) -> list[np.ndarray]:
    """``count`` seeded ``(H, W, 3) uint8`` RGB images of ``size`` (H, W): 3-8 filled shapes."""
    rng = np.random.default_rng(seed)
    h, w = size
    out = []
    for _ in range(count):
        img = Image.new("RGB", (w, h), tuple(int(c) for c in rng.integers(0, 256, 3)))
        draw = ImageDraw.Draw(img)
        for _ in range(rng.integers(3, 9)):
            x0, x1 = sorted(rng.integers(0, w, 2))
            y0, y1 = sorted(rng.integers(0, h, 2))
            fill = tuple(int(c) for c in rng.integers(0, 256, 3))
            (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1 + 1, y1 + 1), fill=fill)
        noisy = np.asarray(img, np.float32) + rng.normal(0, 8, (h, w, 3))
        out.append(np.clip(noisy, 0, 255).astype(np.uint8))
    return out


def folder_images(folder: str) -> list[np.ndarray]:
    """Every image file of ``folder`` (sorted by name) as RGB; ``InputError`` when none."""
    from mnnpy.apps.ocr import load_image

    if not os.path.isdir(folder):
        raise InputError(f"--images {folder}: not a folder")
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith((".png", ".jpg", ".jpeg", ".bmp", ".webp")))
    if not names:
        raise InputError(f"--images {folder}: no .png/.jpg/.jpeg/.bmp/.webp files")
    return [load_image(os.path.join(folder, n)) for n in names]


def preprocess(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``(H, W, 3) uint8`` RGB -> ``(1, 3, size) float32``, ImageNet-normalised."""
    resized = np.asarray(Image.fromarray(img).resize((size[1], size[0]), Image.BILINEAR), np.float32) / 255
    return ((resized - MEAN) / STD).transpose(2, 0, 1)[None].astype(np.float32)


def input_size(interp, given: str | None) -> tuple[int, int]:
    """(H, W) of the model's first input, ``--size HxW`` (positive) where the model leaves it
    open; ``InputError`` for a non-float or non-image input, or a ``--size`` the model's fixed
    dims refuse."""
    d = interp.inputs[0]
    if d.shape is None or len(d.shape) != 4 or (isinstance(d.shape[1], int) and d.shape[1] != 3):
        raise InputError(f"input '{d.name}' is {d.shape}: eval classify takes a (N, 3, H, W) image input")
    if d.dtype.kind != "f":
        raise InputError(f"input '{d.name}' is {d.dtype}: eval classify takes a float image input")
    fixed = [v if isinstance(v, int) and v > 0 else None for v in d.shape[2:]]
    if given:
        try:
            h, w = (int(v) for v in given.lower().split("x"))
            if h < 1 or w < 1:
                raise ValueError
        except ValueError:
            raise InputError(f"--size {given!r}: give HxW, e.g. 224x224") from None
        if any(f is not None and f != v for f, v in zip(fixed, (h, w))):
            shown = "x".join(str(f) if f is not None else "?" for f in fixed)
            raise InputError(f"--size {given}: input '{d.name}' has H and W fixed at {shown}; leave --size out")
        return h, w
    if None in fixed:
        raise InputError(f"input '{d.name}' has dynamic H, W {d.shape[2:]}: give --size HxW")
    return d.shape[2], d.shape[3]


def evaluate(run, xs: list[np.ndarray], ref_top: list[int]) -> dict:
    """``run(x) -> (1, classes)`` over ``xs``: top-1/top-5 agreement with ``ref_top`` (%), latency ms."""
    run(xs[0])
    top1 = top5 = 0
    times = []
    for x, want in zip(xs, ref_top):
        t0 = time.perf_counter()
        scores = np.asarray(run(x)).reshape(-1)
        times.append((time.perf_counter() - t0) * 1e3)
        best = np.argsort(-scores, kind="stable")[:5]
        top1 += int(best[0]) == want
        top5 += want in best
    n = len(xs)
    return {
        "top1": 100 * top1 / n,
        "top5": 100 * top5 / n,
        "mean_ms": statistics.fmean(times),
        "p50_ms": statistics.median(times),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mnnpy eval classify``'s options."""
    p.add_argument("model", help="the classifier's .onnx file (converted in memory; onnxruntime runs it as the reference)")
    from mnnpy.tools.evaluate import add_common_arguments

    add_common_arguments(p, "eval_classify.png")
    p.add_argument("--images", help="a folder of images (default: generated ones)")
    p.add_argument("--count", type=int, default=50, help="generated images (default 50)")
    p.add_argument("--size", help="HxW input size, where the model leaves it open")


def run(args: argparse.Namespace) -> int:
    """``mnnpy eval classify``: prints the table, writes the plot; 0."""
    from mnnpy.tools.evaluate import checked_runs, precision_label

    runs = checked_runs(args, args.count, "--count")
    if not str(args.model).lower().endswith(".onnx"):
        raise InputError(f"model {args.model}: eval classify takes the .onnx file (onnxruntime is its reference)")
    interp, _ = load_model(args.model)
    size = input_size(interp, args.size)
    if not args.images:
        check_input_bytes(
            f"--count {args.count} at {size[0]}x{size[1]}: the images' {interp.inputs[0].dtype} inputs",
            interp.inputs[0].dtype,
            (args.count, 3, *size),
            "give a smaller --size or --count",
        )
    images = folder_images(args.images) if args.images else generated_images(args.count, args.seed, size)
    check_input_bytes(
        f"{len(images)} images at {size[0]}x{size[1]}: their {interp.inputs[0].dtype} inputs",
        interp.inputs[0].dtype,
        (len(images), 3, *size),
        "give a smaller --size",
    )
    xs = [preprocess(img, size).astype(interp.inputs[0].dtype) for img in images]
    ort = onnx_reference(args.model, interp, args.threads, "model")
    name = ort.get_inputs()[0].name
    ort_run = lambda x: ort.run(None, {name: x})[0]  # noqa: E731
    scores = np.shape(ort_run(xs[0]))
    if len(scores) != 2 or scores[0] != 1 or scores[1] < 2:
        raise InputError(f"model {args.model}: its first output is {scores}, not a classifier's (N, classes) scores")
    ref_top = [int(np.argmax(ort_run(x))) for x in xs]
    results = {("onnxruntime", precision_label("onnxruntime", "")): evaluate(ort_run, xs, ref_top)}
    out = interp.outputs[0].name
    for b, p in runs:
        session = interp.create_session(backend=b, precision=p, num_threads=args.threads)
        results[(b, precision_label(b, p))] = evaluate(lambda x: session.run({interp.inputs[0].name: x})[out], xs, ref_top)
    print(f"{len(xs)} {'images from ' + args.images if args.images else 'generated images'} at {size[0]}x{size[1]}")
    rows = [
        [b, p, f"{r['top1']:.1f}", f"{r['top5']:.1f}", f"{r['mean_ms']:.2f}", f"{r['p50_ms']:.2f}"]
        for (b, p), r in results.items()
    ]
    print(format_table(["backend", "precision", "top-1 agree %", "top-5 agree %", "mean ms", "p50 ms"], rows))
    if args.plot:
        points = [(f"{b} {p}", r["mean_ms"], r["top1"]) for (b, p), r in results.items()]
        plot_accuracy_latency(
            points, args.plot, f"{os.path.basename(args.model)}: agreement with onnxruntime", "top-1 agreement, %"
        )
        print(f"wrote {args.plot}")
    return 0

"""``mnnpy ocr DIR --out results.jsonl``: every image of a folder read by PP-OCR, here or on Ray.

    mnnpy ocr scans/ --out text.jsonl                   # here, one process, 1 CPU thread
    mnnpy ocr scans/ --out text.jsonl --workers 2       # here, 2 processes (spawn)
    mnnpy ocr scans/ --out text.parquet --ray           # a local Ray cluster, one actor per CPU
    mnnpy ocr scans/ --out text.jsonl --ray-address auto --backend vulkan   # a cluster; a GPU per actor

Images: ``.png .jpg .jpeg .bmp .tif .tiff .webp`` under DIR, recursively. One result per
image (``mnnpy.apps.ocr_rows.result_json``: path relative to DIR, text, lines with score and
box, error), sorted by path: the same inputs, backend and ``--threads`` give the same file
byte for byte, here or on Ray. An image that cannot be read or run is reported in its line
(``error``); the exit status is then 1. A tqdm progress bar on stderr where tqdm is installed.
Bad options: ``error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from mnnpy import MAX_THREADS, InputError
from mnnpy.apps import folder_job
from mnnpy.apps.ocr_rows import OcrRows, ocr_specs

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
GPU_BACKENDS = ("opencl", "vulkan")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mnnpy ocr``'s options."""
    p.add_argument("folder", help="folder of images (searched recursively)")
    p.add_argument("--out", required=True, help="results: .jsonl (one JSON object per image) or .parquet")
    p.add_argument("--backend", default="cpu", help="mnnpy backend of every worker: cpu, opencl, vulkan (default cpu)")
    p.add_argument("--precision", default="normal", choices=("high", "normal", "low"), help="session precision")
    p.add_argument("--threads", type=int, default=1, help=f"CPU threads per worker (1..{MAX_THREADS}, default 1)")
    p.add_argument("--no-cls", action="store_true", help="skip the text direction classifier")
    p.add_argument("--batch-size", type=int, default=4, help="images per batch handed to a worker (default 4)")
    p.add_argument(
        "--workers", type=int, default=None, help="worker processes or Ray actors (default: 1 here; on Ray a GPU or CPUs each)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--ray", action="store_true", help="run on a local Ray cluster started for the job")
    where.add_argument("--ray-address", metavar="ADDR", help="run on the Ray cluster at ADDR ('auto', 'ray://host:10001')")


def _progress(total: int):
    """``(step(n), close())`` of a tqdm bar on stderr, or of nothing where tqdm is missing."""
    try:
        from tqdm import tqdm
    except ImportError:
        return (lambda n: None), (lambda: None)
    bar = tqdm(total=total, unit="image", file=sys.stderr, leave=False)
    return bar.update, bar.close


def _check(args) -> None:
    from mnnpy.cli import check_int

    check_int(args.threads, "--threads", 1, MAX_THREADS)
    check_int(args.batch_size, "--batch-size", 1, 10_000)
    check_int(args.workers, "--workers", 1, 1024)
    if not str(args.out).lower().endswith((".jsonl", ".json", ".parquet")):
        raise InputError(f"--out {args.out}: give a .jsonl or .parquet file")


def _on_ray(args, paths, step) -> tuple[dict, str]:
    """The job on Ray: ``(results, where it ran)``; a GPU per actor for a GPU backend where the cluster has GPUs."""
    from mnnpy import ray as mnnpy_ray

    mnnpy_ray.connect(args.ray_address)
    gpus = mnnpy_ray.gpus_in_cluster() if args.backend in GPU_BACKENDS else 0
    workers = args.workers or (gpus if gpus else max(1, mnnpy_ray.cpus_in_cluster() // args.threads))
    specs = ocr_specs(args.backend, args.precision, args.threads, not args.no_cls)
    results = folder_job.run_ray(
        OcrRows, (specs, args.root), {}, paths, args.batch_size, workers, 1 if gpus else 0, step, args.ray_address
    )
    return results, f"Ray, {workers} actor(s)" + (", 1 GPU each" if gpus else f", {args.threads} thread(s) each")


def run(args: argparse.Namespace) -> int:
    """Read every image of ``args.folder`` and write ``args.out``; 0, or 1 where an image failed."""
    _check(args)
    paths = folder_job.list_inputs(args.folder, IMAGE_SUFFIXES)
    args.root = str(args.folder)
    step, close = _progress(len(paths))
    t0 = time.perf_counter()
    try:
        if args.ray or args.ray_address:
            results, where = _on_ray(args, paths, step)
        else:
            workers = args.workers or 1
            specs = ocr_specs(args.backend, args.precision, args.threads, not args.no_cls)
            results = folder_job.run_local(OcrRows, (specs, args.root), {}, paths, args.batch_size, workers, step)
            where = f"here, {workers} process(es), {args.threads} thread(s) each"
    finally:
        close()
    seconds = time.perf_counter() - t0
    lines = folder_job.checked_results(paths, results)
    folder_job.write_results(lines, args.out)
    failed = sum(1 for line in lines if json.loads(line)["error"] is not None)
    print(f"read {len(paths)} images in {seconds:.1f} s ({len(paths) / seconds:.2f} images/s; {where}); {failed} failed")
    print(f"wrote {args.out}")
    return 1 if failed else 0

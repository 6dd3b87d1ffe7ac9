"""``mnnpy ocr DIR --out results.jsonl``: every image of a folder read by PP-OCR, here or on Ray.

    mnnpy ocr scans/ --out text.jsonl                   # here, one process, 1 CPU thread
    mnnpy ocr scans/ --out text.jsonl --workers 2       # here, 2 processes (spawn)
    mnnpy ocr scans/ --out text.parquet --ray           # a new local Ray cluster, one actor per CPU
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

from mnnpy import MAX_THREADS
from mnnpy.apps import folder_cli, folder_job
from mnnpy.apps.ocr_rows import OcrRows, ocr_specs

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mnnpy ocr``'s options."""
    p.add_argument("folder", help="folder of images (searched recursively)")
    p.add_argument("--backend", default="cpu", help="mnnpy backend of every worker: cpu, opencl, vulkan (default cpu)")
    p.add_argument("--precision", default="normal", choices=("high", "normal", "low"), help="session precision")
    p.add_argument("--threads", type=int, default=1, help=f"CPU threads per worker (1..{MAX_THREADS}, default 1)")
    p.add_argument("--no-cls", action="store_true", help="skip the text direction classifier")
    folder_cli.add_job_arguments(p, "image")


def run(args: argparse.Namespace) -> int:
    """Read every image of ``args.folder`` and write ``args.out``; 0, or 1 where an image failed."""
    folder_cli.check_job_arguments(args)
    paths = folder_job.list_inputs(args.folder, IMAGE_SUFFIXES)
    specs = ocr_specs(args.backend, args.precision, args.threads, not args.no_cls)
    return folder_cli.run_job(args, OcrRows, (specs, str(args.folder)), paths, "image", specs["det"])

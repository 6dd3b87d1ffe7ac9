"""The command-line side of a folder job (``mnnpy ocr DIR``, ``mnnpy vad DIR``): the options
where it runs and where results go, a progress bar, the summary and the exit status.

The job itself is ``mnnpy.apps.folder_job``'s: a row class over the folder's files, here (one
process, or ``--workers`` spawned processes) or on Ray (``--ray``: a local cluster started for
the job; ``--ray-address``: a running one; ``--workers`` actors, by default one per GPU for a
GPU backend on a cluster with GPUs, else one per ``--threads`` CPUs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

from mnnpy import MAX_THREADS, InputError
from mnnpy.apps import folder_job

GPU_BACKENDS = ("opencl", "vulkan")  # backends whose Ray actors reserve a GPU each where the cluster has GPUs


def add_job_arguments(p: argparse.ArgumentParser, unit: str, required_out: bool = True) -> None:
    """``--out``, ``--batch-size``, ``--workers``, ``--ray`` / ``--ray-address``."""
    p.add_argument("--out", required=required_out, help=f"results: .jsonl (one JSON object per {unit}) or .parquet")
    p.add_argument("--batch-size", type=int, default=4, help=f"{unit}s per batch handed to a worker (default 4)")
    p.add_argument(
        "--workers", type=int, default=None, help="worker processes or Ray actors (default: 1 here; on Ray a GPU or CPUs each)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--ray", action="store_true", help="run on a local Ray cluster started for the job")
    where.add_argument("--ray-address", metavar="ADDR", help="run on the Ray cluster at ADDR ('auto', 'ray://host:10001')")


def check_job_arguments(args: argparse.Namespace) -> None:
    """``InputError`` for a count out of range or an output file of another kind (before any work)."""
    for option, value, high in (("--threads", args.threads, MAX_THREADS), ("--batch-size", args.batch_size, 10_000)):
        if not 1 <= value <= high:
            raise InputError(f"{option} must be between 1 and {high}, got {value}")
    if args.workers is not None and not 1 <= args.workers <= 1024:
        raise InputError(f"--workers must be between 1 and 1024, got {args.workers}")
    if not str(args.out).lower().endswith((".jsonl", ".json", ".parquet")):
        raise InputError(f"--out {args.out}: give a .jsonl or .parquet file")
    from mnnpy.tools.eval_plot import check_writable

    check_writable("--out", str(args.out))
    if args.ray_address is not None and not args.ray_address.strip():
        raise InputError("--ray-address is empty: give host:port, ray://host:port or auto")


def _progress(total: int, unit: str):
    """``(step(n), close())`` of a tqdm bar on stderr, or of nothing where tqdm is missing."""
    try:
        from tqdm import tqdm
    except ImportError:
        return (lambda n: None), (lambda: None)
    bar = tqdm(total=total, unit=unit, file=sys.stderr, leave=False)
    return bar.update, bar.close


def _on_ray(args, cls, cls_args: tuple, paths: list[str], step) -> tuple[dict, str]:
    """The job on Ray: ``(results, where it ran)``; ``InputError`` where Ray is not installed."""
    try:
        mnnpy_ray = importlib.import_module("mnnpy.ray")
    except ImportError as e:
        raise InputError(f"--ray: {e}") from None
    mnnpy_ray.connect(args.ray_address)
    gpus = mnnpy_ray.gpus_in_cluster() if args.backend in GPU_BACKENDS else 0
    workers = args.workers or (gpus if gpus else max(1, mnnpy_ray.cpus_in_cluster() // args.threads))
    cpus = 1 if gpus else args.threads
    results = folder_job.run_ray(
        cls, cls_args, {}, paths, args.batch_size, workers, 1 if gpus else 0, step, args.ray_address, cpus
    )
    return results, f"Ray, {workers} actor(s)" + (", 1 GPU each" if gpus else f", {args.threads} thread(s) each")


def run_job(args: argparse.Namespace, cls, cls_args: tuple, paths: list[str], unit: str) -> int:
    """``cls(*cls_args)`` over ``paths`` where ``args`` say, results written to ``args.out``;
    prints how long it took and how many failed. 0, or 1 where an input failed."""
    step, close = _progress(len(paths), unit)
    t0 = time.perf_counter()
    try:
        if args.ray or args.ray_address:
            results, where = _on_ray(args, cls, cls_args, paths, step)
        else:
            workers = args.workers or 1
            results = folder_job.run_local(cls, cls_args, {}, paths, args.batch_size, workers, step)
            where = f"here, {workers} process(es), {args.threads} thread(s) each"
    finally:
        close()
    seconds = time.perf_counter() - t0
    lines = folder_job.checked_results(paths, results)
    folder_job.write_results(lines, args.out)
    failed = sum(1 for line in lines if json.loads(line)["error"] is not None)
    print(f"{len(paths)} {unit}s in {seconds:.1f} s ({len(paths) / seconds:.2f} {unit}s/s; {where}); {failed} failed")
    print(f"wrote {args.out}")
    return 1 if failed else 0

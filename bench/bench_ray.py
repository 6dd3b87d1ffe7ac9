"""OCR throughput over a folder here and on Ray Data, with 1 and 2 workers (issue 17).

Generates ``--lines`` OCR lines (``mnnpy.tools.eval_ocr``: seeded, the fonts found here) into a
temporary folder, then, interleaved for ``--rounds`` rounds, runs the OCR app over it
(``mnnpy.apps.folder_job`` with ``mnnpy.apps.ocr_rows.OcrRows``, what ``mnnpy ocr DIR`` runs):

- here: in this process (1 worker) and in ``N`` spawned processes (``--workers``);
- on Ray: a local cluster started once (``ray.init``; or ``--ray-address``), ``N`` actors.

Ray starts its workers at niceness 15 (``RAY_worker_niceness``), so that on a machine shared
with other work they yield to it; the local workers run at 0. For a like-for-like comparison the
local cluster started here runs its workers at ``--worker-niceness`` (default 0).

Each job's time runs from its start (workers started and their sessions prepared included) to
its last result; images/s = lines / time. Every job's output file is compared, byte for byte,
with the first job's (the first local run's, unless --only ray). Prints a table (each round's images/s, the median) and the
ratio of 2 workers to 1 (the median of the rounds' ratios).

    python bench/bench_ray.py                                 # CPU: 1 and 2 workers, 200 lines, 2 rounds
    python bench/bench_ray.py --backend vulkan --gpu-actors 1 # a GPU machine: 1 actor with 1 GPU

Needs ray (``pip install "mnnpy[ray]"``), numpy and mnnpy.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
import ray.data

from mnnpy.apps import folder_job
from mnnpy.apps.ocr_rows import OcrRows, ocr_specs
from mnnpy.tools.eval_ocr import find_fonts, make_dataset, save_dataset


def job(where: str, workers: int, args, specs, paths: list[str], folder: Path, out: Path) -> float:
    """One job over ``paths``, its results written to ``out``; seconds from start to the last result."""
    t0 = time.perf_counter()
    kw = {"cls": OcrRows, "args": (specs, str(folder)), "kwargs": {}, "paths": paths, "batch_size": args.batch_size}
    if where == "here":
        results = folder_job.run_local(**kw, workers=workers, step=lambda n: None)
    else:
        gpus = 1 if args.gpu_actors else 0
        results = folder_job.run_ray(**kw, workers=workers, gpus_per_worker=gpus, step=lambda n: None, address=args.ray_address)
    seconds = time.perf_counter() - t0
    folder_job.write_results(folder_job.checked_results(paths, results), out)
    return seconds


PREPARE = """
import pickle, sys, time
t0 = time.perf_counter()
from mnnpy.apps.ocr_rows import OcrRows
t1 = time.perf_counter()
OcrRows(pickle.loads(sys.stdin.buffer.read()), sys.argv[1])
print(t1 - t0, time.perf_counter() - t1)
"""


def prepare_times(specs, root: str) -> tuple[float, float]:
    """A new worker process's seconds to import mnnpy's OCR rows and to prepare det/cls/rec
    (caches as they are now: warm after the jobs above)."""
    done = subprocess.run([sys.executable, "-c", PREPARE, root], input=pickle.dumps(specs), capture_output=True, check=True)
    imported, prepared = map(float, done.stdout.split())
    return imported, prepared


def configs(args) -> list[tuple[str, int]]:
    """``(where, workers)`` per row: here and on Ray, each worker count (GPU: ``--gpu-actors``)."""
    counts = [int(n) for n in args.workers.split(",")]
    ray_counts = [args.gpu_actors] if args.gpu_actors else counts
    here_counts = counts if args.backend == "cpu" else [1]
    rows = [("here", n) for n in here_counts] + [("ray", n) for n in ray_counts]
    return [r for r in rows if args.only in (None, r[0])]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=200, help="generated OCR lines (default 200)")
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    p.add_argument("--backend", default="cpu", help="every worker's backend (default cpu)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per worker (default 1)")
    p.add_argument("--workers", default="1,2", help="worker counts to compare (default 1,2)")
    p.add_argument("--gpu-actors", type=int, default=0, help="Ray actors with one GPU each (GPU machines)")
    p.add_argument("--batch-size", type=int, default=4, help="images per batch (default 4)")
    p.add_argument("--only", choices=("here", "ray"), default=None, help="run only here or only on Ray")
    p.add_argument("--ray-address", default=None, help="a running Ray cluster (default: start a local one)")
    p.add_argument(
        "--worker-niceness", default="0", help="RAY_worker_niceness of a local cluster's workers (Ray's default: 15; here 0)"
    )
    args = p.parse_args(argv)
    os.environ.setdefault("RAY_worker_niceness", args.worker_niceness)  # read by the raylet ray.init starts
    if not ray.is_initialized():
        address = args.ray_address or "local"  # "local": a new cluster, never one already running here
        ray.init(address=address, num_gpus=args.gpu_actors or None, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    specs = ocr_specs(args.backend, "normal", args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_ray_"))
    save_dataset(make_dataset(args.lines, 0, find_fonts()), tmp / "lines")
    paths = folder_job.list_inputs(tmp / "lines", (".png",))
    rows = configs(args)
    rates: dict[tuple[str, int], list[float]] = {c: [] for c in rows}
    identical = {c: True for c in rows}
    reference = tmp / "reference.jsonl"
    for r in range(args.rounds):
        for where, n in rows if r % 2 == 0 else rows[::-1]:
            out = tmp / f"{where}{n}.jsonl"
            seconds = job(where, n, args, specs, paths, tmp / "lines", out)
            if not reference.exists():
                out.rename(reference)
            else:
                identical[(where, n)] &= out.read_bytes() == reference.read_bytes()
            rates[(where, n)].append(len(paths) / seconds)
            print(f"round {r + 1}: {where} x{n}: {len(paths) / seconds:.2f} images/s", file=sys.stderr, flush=True)
    report(args, rows, rates, identical)
    imported, prepared = prepare_times(specs, str(tmp / "lines"))
    print(f"a new worker process (caches warm): imports in {imported:.2f} s, prepares det/cls/rec in {prepared:.2f} s")
    return 0


def report(args, rows, rates, identical) -> None:
    """The table, and each place's ratio of its largest worker count to 1."""
    where_gpu = f", {args.gpu_actors} GPU actor(s)" if args.gpu_actors else ""
    print(f"\nOCR (PP-OCRv4 det+cls+rec), {args.lines} lines, backend {args.backend}, {args.threads} thread(s)/worker{where_gpu}")
    print("| where | workers | images/s per round | median | output bytes = the first job's |")
    print("| --- | --- | --- | --- | --- |")
    for c in rows:
        each = ", ".join(f"{x:.2f}" for x in rates[c])
        print(f"| {c[0]} | {c[1]} | {each} | {statistics.median(rates[c]):.2f} | {'yes' if identical[c] else 'NO'} |")
    for where in ("here", "ray"):
        ones, many = rates.get((where, 1)), [c for c in rows if c[0] == where and c[1] > 1]
        for c in many if ones else []:
            ratios = [b / a for a, b in zip(ones, rates[c])]
            each = ", ".join(f"{x:.2f}" for x in ratios)
            print(f"{where}: {c[1]} workers / 1 = {statistics.median(ratios):.2f}x (rounds: {each})")


if __name__ == "__main__":
    sys.exit(main())

"""The command-line side of a folder job (``mnnpy ocr DIR``, ``mnnpy vad DIR``): the options
where it runs and where results go, a progress bar, the summary and the exit status.

The job itself is ``mnnpy.apps.folder_job``'s: a row class over the folder's files, here (one
process, or ``--workers`` spawned processes) or on Ray (``--ray``: a new local cluster started
for the job, never one already running; ``--ray-address``: a running one; ``--workers``
actors, by default one per GPU for a GPU backend on a cluster with GPUs, else one per
``--threads`` CPUs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

from mnnpy import MAX_THREADS, InputError
from mnnpy.apps import folder_job
from mnnpy.limits import available_bytes
from mnnpy.session_spec import GPU_APIS  # backends whose Ray actors reserve a GPU each where the cluster has GPUs

# Bytes one more worker takes (the estimate --workers is checked against): measured on this
# project's 2-core test machine as the sum of the workers' proportional set sizes (Pss,
# /proc/<pid>/smaps_rollup) after each ran one batch of 4 generated OCR lines or 3 WAV files
# (tests/test_vad_folder.py), 1 thread each. Spawned processes: 173, 264 and 353 MiB for 1, 2
# and 3 workers, alike for OCR and silero-vad: 88-91 MiB a worker (the libraries, ~85 MiB,
# are shared). Ray actors (OCR): 216 and 346 MiB for 1 and 2: 130 MiB an actor. Larger images
# take more (the activations grow with the pixels): a lower bound there.
PROCESS_BYTES = 90 << 20
RAY_ACTOR_BYTES = 130 << 20


def add_job_arguments(p: argparse.ArgumentParser, unit: str, required_out: bool = True) -> None:
    """``--out``, ``--batch-size``, ``--workers``, ``--ray`` / ``--ray-address``."""
    p.add_argument("--out", required=required_out, help=f"results: .jsonl (one JSON object per {unit}) or .parquet")
    p.add_argument("--batch-size", type=int, default=4, help=f"{unit}s per batch handed to a worker (default 4)")
    p.add_argument(
        "--workers", type=int, default=None, help="worker processes or Ray actors (default: 1 here; on Ray a GPU or CPUs each)"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--ray", action="store_true", help="run on a new local Ray cluster started for the job")
    where.add_argument(
        "--ray-address", metavar="ADDR", help="run on the running Ray cluster at ADDR (host:6379, 'auto', 'ray://host:10001')"
    )


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
        raise InputError("--ray-address is empty: give host:6379, ray://host:10001 or auto")


def _progress(total: int, unit: str):
    """``(step(n), close())`` of a tqdm bar on stderr, or of nothing where tqdm is missing."""
    try:
        from tqdm import tqdm
    except ImportError:
        return (lambda n: None), (lambda: None)
    bar = tqdm(total=total, unit=unit, file=sys.stderr, leave=False)
    return bar.update, bar.close


def _here(args, spec, inputs: int) -> tuple[dict, str]:
    """``(run_local's options, where it runs)`` of a job here, checked before any worker
    starts: the backend (``SessionSpec.check_backend``) and the memory of the workers."""
    spec.check_backend()
    workers = folder_job.workers_used(args.workers or 1, inputs, args.batch_size)
    if workers > 1:
        check_memory(workers, PROCESS_BYTES, "worker process")
    return {"workers": workers}, f"here, {workers} process(es), {args.threads} thread(s) each"


def _on_ray(args, spec, inputs: int) -> tuple[dict, str]:
    """``(run_ray's options, where it runs)`` of a job on Ray, checked before any actor starts
    (``mnnpy.ray.check_backend``; the memory of the actors of a local cluster); ``InputError``
    where Ray is not installed."""
    try:
        mnnpy_ray = importlib.import_module("mnnpy.ray")
    except ImportError as e:
        raise InputError(f"--ray: {e}") from None
    mnnpy_ray.connect(args.ray_address)
    gpus = mnnpy_ray.gpus_in_cluster() if args.backend in GPU_APIS else 0
    workers = args.workers or (gpus if gpus else max(1, mnnpy_ray.cpus_in_cluster() // args.threads))
    workers = folder_job.workers_used(workers, inputs, args.batch_size)
    cpus = 1 if gpus else args.threads
    mnnpy_ray.check_backend(spec, cpus, 1 if gpus else 0)
    if not args.ray_address:  # a cluster started here: its actors share this machine's memory
        check_memory(workers, RAY_ACTOR_BYTES, "Ray actor")
    options = {"workers": workers, "gpus_per_worker": 1 if gpus else 0, "address": args.ray_address, "cpus_per_worker": cpus}
    return options, f"Ray, {workers} actor(s)" + (", 1 GPU each" if gpus else f", {args.threads} thread(s) each")


def check_memory(workers: int, per_worker: int, kind: str) -> None:
    """``InputError`` where ``workers`` of ``per_worker`` bytes each need more than the memory
    available now (``MemAvailable``, ``mnnpy.limits.available_bytes``)."""
    need, have = workers * per_worker, available_bytes()
    if need > have:
        raise InputError(
            f"--workers {workers}: {workers} x {kind} of about {per_worker >> 20} MiB need {need / 2**30:.1f} GiB,"
            f" {have / 2**30:.1f} GiB is available; give at most {max(1, have // per_worker)}"
        )


def run_job(args: argparse.Namespace, cls, cls_args: tuple, paths: list[str], unit: str, spec) -> int:
    """``cls(*cls_args)`` over ``paths`` where ``args`` say, results written to ``args.out``
    (Parquet columns of the types ``cls.COLUMNS`` names); prints how long it took, where it ran
    (the workers it started) and how many failed. 0, or 1 where an input failed. ``spec``: a
    ``SessionSpec`` of the job's backend, checked before any worker starts
    (``BackendUnavailableError``), as the workers' memory is (``InputError``)."""
    on_ray = bool(args.ray or args.ray_address)
    options, where = (_on_ray if on_ray else _here)(args, spec, len(paths))
    step, close = _progress(len(paths), unit)
    t0 = time.perf_counter()
    try:
        if on_ray:
            results = folder_job.run_ray(cls, cls_args, {}, paths, args.batch_size, step=step, **options)
        else:
            results = folder_job.run_local(cls, cls_args, {}, paths, args.batch_size, step=step, **options)
    finally:
        close()
    seconds = time.perf_counter() - t0
    lines = folder_job.checked_results(paths, results)
    folder_job.write_results(lines, args.out, getattr(cls, "COLUMNS", None))
    failed = sum(1 for line in lines if json.loads(line)["error"] is not None)
    print(f"{len(paths)} {unit}s in {seconds:.1f} s ({len(paths) / seconds:.2f} {unit}s/s; {where}); {failed} failed")
    print(f"wrote {args.out}")
    return 1 if failed else 0

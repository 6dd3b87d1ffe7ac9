"""``mnnpy bench MODEL``: latency of a model on one or more backends, side by side.

After TensorFlow Lite's ``benchmark_model`` tool. The model (a ``.mnnpy`` file, or an ONNX
file converted in memory: the load time includes the conversion) gets seeded random inputs
(``mnnpy.tools.inputs``: ``--shape``, ``--input``; a dynamic dim without ``--shape`` is 1,
the first, or 64, said on stderr). Per engine (each ``--backend``, and
onnxruntime's CPU provider with ``--compare onnxruntime``): session creation (resized for
the input shapes), the first run, ``--warmup`` runs, then ``--runs`` timed runs (or as many
as fit in ``--duration`` seconds, at least one block), the engines taking turns in blocks of ``BLOCK`` runs whose
order rotates every block, so that the machine's noise hits all alike. Reported (ms): avg,
std, min, max, p50, p90, p99 (TFLite's names, ``profile.latency_stats``); the ratio of each
engine's avg to the first engine's; GFLOP/s (the op schemas' FLOPs rules over the plan,
a multiply-add counting two); the device time of a run (p50 of NNAPI's ``Timing.on_device_us``
over ``TIMING_RUNS`` extra runs with ``measure_timing=True``); the activation arenas per
backend (MiB); device memory per GPU backend (MiB: arena, weights and constants uploaded,
scratch and staging, ``profile.device_mib``) and the process's peak RSS (``VmHWM``, MiB:
every engine together).
``--profile``: per op and per op type (``profile.op_profile``; on Vulkan, GPU timestamps per
dispatch, on OpenCL, profiling events per kernel: ``profile.device_op_profile``). A
backend that cannot run here gets a row saying why.
Output: a table, or ``--json`` / ``--csv``. A tqdm progress bar (when tqdm is installed and
stderr is a terminal) on runs expected to take longer than ``PROGRESS_S``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mnnpy.backend import registered_backends, split_device_name
from mnnpy.errors import BackendUnavailableError, InputError
from mnnpy.tools import profile
from mnnpy.tools.inputs import feeds_from_options, load_model, note_assumed_dims, onnx_reference, resized_session
from mnnpy.tools.table import backend_list

BLOCK = 5  # runs per engine before the next engine's turn
SETTLE_S = 0.05  # pause at each switch between engines: onnxruntime's threads spin-wait after a run
TIMING_RUNS = 10  # runs with measure_timing=True, after the timed runs
DEVICE_PROFILES = {  # --profile from the backend's own device times: (how, how when the device has none)
    "vulkan": ("GPU timestamps per dispatch", "no GPU timestamps on this device"),
    "opencl": ("OpenCL profiling events per kernel", "no OpenCL profiling queue on this device"),
}
PROGRESS_S = 3.0  # show a progress bar when the timed runs are expected to take longer (s)


@dataclass
class Engine:
    """One engine being measured: ``run(feeds)``, its mnnpy ``session`` (``None`` for
    onnxruntime), creation and first-run ms, the timed runs' ms, the process CPU time and
    wall time of its blocks (s: ``cpu_s / wall_s`` is the cores it kept busy), or
    ``missing``: why not."""

    name: str
    run: Callable | None = None
    session: Any = None
    create_ms: float = 0.0
    first_ms: float = 0.0
    times: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    missing: str = ""
    result: dict = field(default_factory=dict)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def prepare(name: str, interp, onnx_path: str | None, feeds: dict, args) -> Engine:
    """An ``Engine`` of mnnpy backend ``name`` (or ``"onnxruntime"``), created, resized for
    ``feeds``' shapes and run once; ``missing`` says why where the backend is unavailable.
    onnxruntime's ONNX file is checked against the model (``inputs.onnx_reference``)."""
    e = Engine(name)
    t0 = time.perf_counter()
    try:
        if name == "onnxruntime":
            if onnx_path is None:
                raise InputError("--compare onnxruntime needs the ONNX model: give MODEL as a .onnx file, or --onnx FILE")
            sess = onnx_reference(onnx_path, interp, args.threads, "--onnx" if args.onnx else "model")
            e.run = lambda f: sess.run(None, f)
        else:
            e.session = resized_session(interp, feeds, backend=name, precision=args.precision, num_threads=args.threads)
            e.run = e.session.run
    except BackendUnavailableError as ex:
        e.missing = f"unavailable: {ex}"
        return e
    e.create_ms = _ms(t0)
    t0 = time.perf_counter()
    e.run(feeds)
    e.first_ms = _ms(t0)
    return e


def _progress(total: float, unit: str, expected_s: float):
    """A tqdm bar of ``total`` (None without tqdm, or when quicker than ``PROGRESS_S``)."""
    if expected_s < PROGRESS_S:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit=unit, disable=None, leave=False)


def timed_runs(engines: list[Engine], feeds: dict, runs: int, duration: float | None, settle_s: float = SETTLE_S) -> None:
    """``runs`` timed runs per engine (or until ``duration`` s have passed, after at least one
    round: every engine gets ``BLOCK`` runs however short ``duration`` is), interleaved in
    rotating blocks of ``BLOCK``, ``settle_s`` apart (with more than one engine); appends each run's ms to ``engine.times``
    and adds each block's process CPU and wall time to ``cpu_s``, ``wall_s``. The one timing
    loop of ``mnnpy bench`` and ``bench/bench.py``."""
    n = len(engines)
    per_round_s = sum(e.first_ms for e in engines) / 1e3
    bar = _progress(duration, "s", duration) if duration else _progress(runs * n, "run", per_round_s * runs)
    start, b = time.perf_counter(), 0
    try:
        while True:
            if duration is None and all(len(e.times) >= runs for e in engines):
                break
            if duration is not None and b > 0 and time.perf_counter() - start >= duration:
                break
            for e in engines[b % n :] + engines[: b % n]:
                if n > 1:
                    time.sleep(settle_s)
                count = BLOCK if duration is not None else min(BLOCK, runs - len(e.times))
                c0, w0 = time.process_time(), time.perf_counter()
                for _ in range(count):
                    t0 = time.perf_counter()
                    e.run(feeds)
                    e.times.append(_ms(t0))
                e.cpu_s += time.process_time() - c0
                e.wall_s += time.perf_counter() - w0
                if bar is not None:
                    bar.update(count if duration is None else 0)
            if bar is not None and duration is not None:
                bar.n = min(duration, round(time.perf_counter() - start, 1))
                bar.refresh()
            b += 1
    finally:
        if bar is not None:
            bar.close()


def _device_ms(session, feeds: dict) -> float | None:
    """p50 of ``Timing.on_device_us`` over ``TIMING_RUNS`` runs, in ms (None: not measured)."""
    got = [session.run(feeds, measure_timing=True).timing for _ in range(TIMING_RUNS)]
    dev = sorted(t.on_device_us for t in got if t is not None and t.on_device_us is not None)
    return dev[len(dev) // 2] / 1e3 if dev else None


def summarise(engines: list[Engine], feeds: dict, mflops: float | None) -> None:
    """Fill each engine's ``result``: creation, first run, statistics, ratio to the first
    engine, GFLOP/s, device ms, arenas."""
    base = None
    for e in engines:
        if e.missing:
            e.result = {"missing": e.missing}
            continue
        r = {"create_ms": e.create_ms, "first_ms": e.first_ms, "runs": len(e.times), **profile.latency_stats(e.times)}
        base = base or r["avg"]
        r["ratio"] = r["avg"] / base
        r["gflops_per_s"] = mflops / r["avg"] if mflops else None  # MFLOP per ms = GFLOP/s
        if e.session is not None:
            r["device_ms"] = _device_ms(e.session, feeds)
            r["arena_mib"] = profile.arena_mib(e.session)
            r["device_mib"] = profile.device_mib(e.session)
        e.result = r


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``mnnpy bench``'s options."""
    p.add_argument("model", help=".mnnpy file or .onnx file (converted in memory)")
    p.add_argument("--backend", action="append", default=[], help="backend(s), e.g. cpu,opencl,vulkan (default cpu)")
    p.add_argument("--compare", choices=("onnxruntime",), help="also time onnxruntime's CPU provider (needs the ONNX model)")
    p.add_argument("--onnx", help="the ONNX file of a .mnnpy MODEL, for --compare onnxruntime")
    p.add_argument("--precision", default="normal", choices=("high", "normal", "low"), help="low: fp16 storage on GPUs")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (mnnpy's CPU backend and onnxruntime)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...", help="shape of a random input")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input from a .npy file")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (>= 0)")
    p.add_argument("--warmup", type=int, default=3, help="runs per engine after the first, not timed (default 3)")
    p.add_argument("--runs", type=int, default=50, help="timed runs per engine (default 50)")
    p.add_argument("--duration", type=float, default=None, metavar="S", help="time runs for S seconds instead of --runs")
    p.add_argument("--profile", action="store_true", help="time per op and per op type")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the results as JSON")
    out.add_argument("--csv", action="store_true", help="print the table as CSV")


def run(args: argparse.Namespace) -> int:
    """``mnnpy bench``: 0 when every engine ran, 1 when one was unavailable."""
    from mnnpy.cli import MAX_THREADS, check_int

    check_int(args.runs, "--runs", 1, 10**6)
    check_int(args.warmup, "--warmup", 0, 10**6)
    check_int(args.threads, "--threads", 1, MAX_THREADS)
    check_int(args.seed, "--seed", 0)
    if args.duration is not None and not 0 < args.duration <= 3600:
        raise InputError(f"--duration must be between 0 and 3600 s, got {args.duration:g}")
    t0 = time.perf_counter()
    interp, _ = load_model(args.model)
    load_ms = _ms(t0)
    if args.onnx and not args.compare:
        raise InputError("--onnx is the ONNX file for --compare onnxruntime: give both, or neither")
    onnx_path = args.onnx or (args.model if str(args.model).lower().endswith(".onnx") else None)
    feeds = feeds_from_options(interp, args.input, args.shape, args.seed)
    note_assumed_dims(interp, args.input, args.shape)
    names = backend_list(args.backend) + (["onnxruntime"] if args.compare else [])
    known = registered_backends()
    for n in names[: len(names) - bool(args.compare)]:  # an unknown name is bad input; an unavailable one a row
        if split_device_name(n)[0] not in known:
            raise InputError(f"--backend {n!r}: unknown backend; known: {sorted(known)}")
    names = names[-1:] + names[:-1] if args.compare else names  # onnxruntime first: its ONNX file is checked before any work
    engines = [prepare(n, interp, onnx_path, feeds, args) for n in names]
    engines = engines[1:] + engines[:1] if args.compare else engines
    live = [e for e in engines if not e.missing]
    for e in live:
        for _ in range(args.warmup):
            e.run(feeds)
    timed_runs(live, feeds, args.runs, args.duration)
    first = next((e.session for e in live if e.session is not None), None)
    mflops = profile.plan_mflops(first) if first is not None else None
    summarise(engines, feeds, mflops)
    report = {
        "model": str(args.model),
        "inputs": {k: [str(v.dtype), list(v.shape)] for k, v in feeds.items()},
        "load_ms": load_ms,
        "gflops": None if mflops is None else mflops / 1e3,
        "peak_rss_mib": profile.peak_rss_mib(),
        "engines": {e.name: e.result for e in engines},
    }
    if args.profile:
        report["profile"] = {e.name: _profile(e, interp, feeds, args) for e in live if e.session is not None}
    from mnnpy.tools.bench_report import print_report

    print_report(report, args)
    return 1 if any(e.missing for e in engines) else 0


def _profile(e: Engine, interp, feeds: dict, args) -> dict:
    """``{"ops": [[name, type, ms]], "types": [[type, count, ms]], "run_ms", "how"}`` of one engine."""
    runs = min(args.runs, 10)
    if e.name in DEVICE_PROFILES:
        rows = profile.device_op_profile(interp, e.name, args.precision, feeds, runs, 3)
        how = DEVICE_PROFILES[e.name][0 if rows else 1]
        return {"ops": [list(r) for r in rows], "types": [list(t) for t in profile.by_type(rows)], "run_ms": None, "how": how}
    rows, whole = profile.op_profile(e.session, feeds, runs)
    how = "each Execution timed" + (", followed by a queue finish" if e.name != "cpu" else "")
    return {"ops": [list(r) for r in rows], "types": [list(t) for t in profile.by_type(rows)], "run_ms": whole, "how": how}

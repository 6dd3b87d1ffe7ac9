"""Latency of mnnpy's CPU backend against onnxruntime, MNN and OpenVINO on the CPU, same process,
interleaved.

Run it with OpenBLAS's overrides unset (this machine sets them, and they slow NumPy):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench.py [--output bench/RESULTS.md]
        [--models ...] [--threads 2] [--runs 20] [--profile] [--no-rss]

Engines (``pip install -e .[bench]`` installs the optional ones; a missing one gives a row
saying so, never a failure):

- ``onnxruntime``: CPU provider, ``intra_op_num_threads=T, inter_op_num_threads=1``.
- ``mnnpy``: ``backend="cpu", num_threads=T``; the converted file is loaded, the session
  created and resized for the input shapes.
- ``MNN`` (Alibaba's ``mnn`` wheel): the model converted by the wheel's ``mnnconvert``,
  loaded with ``MNN.nn.load_module_from_file`` through a runtime manager
  (``MNN.nn.create_runtime_manager``: CPU, ``numThread=T``, ``precision="high"``; a
  ``numThread`` given to the module alone does not take effect). The setting recorded is the
  one given to the runtime manager, which MNN does not report back; the CPU-utilisation column
  shows what it did.
- ``OpenVINO``: CPU plugin, ``INFERENCE_NUM_THREADS=T``, ``INFERENCE_PRECISION_HINT=f32``
  (its default lowers precision), the model reshaped to the static input shapes; the settings
  recorded are those the compiled model reports back.

Models: MobileNetV2 and ResNet-18 (``bench/make_models.py``, 1x3x224x224), PP-OCRv4 det
(1x3x640x640), rec (1x3x48x320) and cls (1x3x48x192) (``mnnpy.models``), the silero VAD
model (its OpenVINO export, ``input`` 1x576 and ``state`` 2x1x128: one 36 ms chunk at 16 kHz).

After a warm-up, the engines take turns in blocks of ``BLOCK`` runs (the order rotates every
block) on the same seeded inputs, so machine noise hits all alike. Reported, in ms: median and
min latency of each, the ratio to onnxruntime's median, session creation and first run in this
process (mnnpy: load the converted model, create the session and resize it; converting the
ONNX model, done once per model, is reported in the settings column; MNN: mnnconvert and load),
and in a fresh process the engine's import and its first session's creation (for mnnpy this
includes loading its compiled kernels' machine code, or, when this machine has none yet,
numba compiling and exporting them; ``bench/bench_fresh.py`` repeats it); the
model's work per run in GFLOPs (the op schemas' FLOPs rules over mnnpy's plan,
``Session.op_mflops``; a multiply-add counts two) and each engine's rate at its median in
GFLOP/s; CPU utilisation (process CPU time / wall time over the engine's timed runs, in cores:
first with the engine alone in a child process, then in the shared process, where other
engines' spinning threads count too);
peak RSS (each engine measured alone in a child process: ``VmHWM`` after import, session
creation and 3 runs, and the import alone, in MiB); max |difference| of the first output from
onnxruntime's. ``--profile`` prints mnnpy's time per op type (each Execution's ``on_execute``
timed over ``--runs`` extra runs; the rest of a run is the session's own cost: input checks,
copies, Python).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mnnpy.tools.bench import BLOCK, Engine, timed_runs
from mnnpy.tools.inputs import resized_session
from mnnpy.tools.profile import by_type, latency_stats, op_profile, peak_rss_mib, plan_mflops

HERE = Path(__file__).resolve().parent
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
SETTLE_S = 0.2  # pause at each switch: the engines' worker threads spin-wait after a run,
# and would otherwise steal the cores from the next engine's runs
RSS_RUNS = 3  # runs in the peak-RSS child after creation
ALONE_RUNS, ALONE_S = 20, 1.0  # then runs there (at least these many and seconds), for the cores busy alone
ENGINES = ("onnxruntime", "mnnpy", "MNN", "OpenVINO")
MODELS = ("mobilenet_v2", "resnet18", "ppocr_det", "ppocr_rec", "ppocr_cls", "silero_vad")


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def _image(shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {"": np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)}


def load_models(names: list[str]) -> dict[str, tuple[bytes, dict[str, np.ndarray]]]:
    """name -> (ONNX bytes, feeds: input name -> seeded float32 array) for the requested models;
    an image model's single input is keyed ``""`` (its name is read from the model)."""
    spec = importlib.util.spec_from_file_location("make_models", HERE / "make_models.py")
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    from mnnpy import models

    def silero() -> dict[str, np.ndarray]:
        rng = np.random.default_rng(0)
        return {
            "input": (0.1 * rng.standard_normal((1, 576))).astype(np.float32),
            "state": np.zeros((2, 1, 128), np.float32),
        }

    table = {
        "mobilenet_v2": (lambda: mm.mobilenet_v2().SerializeToString(), lambda: _image((1, 3, 224, 224))),
        "resnet18": (lambda: mm.resnet18().SerializeToString(), lambda: _image((1, 3, 224, 224))),
        "ppocr_det": (lambda: models.ocr_model_path("det").read_bytes(), lambda: _image((1, 3, 640, 640))),
        "ppocr_rec": (lambda: models.ocr_model_path("rec").read_bytes(), lambda: _image((1, 3, 48, 320))),
        "ppocr_cls": (lambda: models.ocr_model_path("cls").read_bytes(), lambda: _image((1, 3, 48, 192))),
        "silero_vad": (lambda: models.silero_model_path("silero_vad_openvino_16k.onnx").read_bytes(), silero),
    }
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; choose from {sorted(table)}")
    out = {}
    for n in names:
        data = table[n][0]()
        feeds = table[n][1]()
        if "" in feeds:
            import onnx

            first = onnx.load_from_string(data).graph.input[0].name
            feeds = {first: feeds[""]}
        out[n] = (data, feeds)
    return out


# -- engines: each prepares a model and returns (run, info); run(feeds) -> list of arrays ---------
class EngineMissing(Exception):
    """The engine is not installed or cannot take this model; the message says why."""


def _ort(onnx_bytes: bytes, feeds: dict, threads: int, workdir: Path) -> tuple[Callable, str]:
    from mnnpy import BackendUnavailableError
    from mnnpy.apps.reference import onnxruntime_session

    try:
        s = onnxruntime_session(onnx_bytes, threads)
    except BackendUnavailableError as e:
        raise EngineMissing(f"not installed ({e})") from None
    import onnxruntime as ort

    return (lambda f: s.run(None, f)), f"onnxruntime {ort.__version__}, intra_op={threads}"


def _mnnpy(onnx_bytes: bytes, feeds: dict, threads: int, workdir: Path) -> tuple[Callable, str]:
    import mnnpy
    from mnnpy.converter import convert

    t0 = time.perf_counter()
    data = convert(onnx_bytes)  # once per model (mnnpy convert); not part of creating a session
    converted_ms = _ms(t0)
    s = resized_session(mnnpy.Interpreter(data), feeds, backend="cpu", num_threads=threads)  # MNN: resizeSession
    names = [d.name for d in s.outputs]

    def run(f):
        out = s.run(f)
        return [out[n] for n in names]

    run.session = s  # for the FLOPs and the profile
    run.convert_ms = converted_ms  # taken out of the creation time
    return run, f"mnnpy {mnnpy.__version__}, num_threads={threads}; convert {converted_ms:.0f} ms"


def _mnn(onnx_bytes: bytes, feeds: dict, threads: int, workdir: Path) -> tuple[Callable, str]:
    try:
        import MNN
        import MNN.expr as F
        import MNN.nn as nn
    except ImportError as e:
        raise EngineMissing(f"not installed ({e})") from None
    exe = shutil.which("mnnconvert") or str(Path(sys.executable).with_name("mnnconvert"))
    src, dst = workdir / "model.onnx", workdir / "model.mnn"
    src.write_bytes(onnx_bytes)
    cmd = [exe, "-f", "ONNX", "--modelFile", str(src), "--MNNModel", str(dst), "--bizCode", "bench"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not dst.exists():
        raise EngineMissing(f"mnnconvert failed: {(done.stdout + done.stderr).strip().splitlines()[-1:]}")
    rt = nn.create_runtime_manager(({"backend": "CPU", "numThread": threads, "precision": "high"},))
    module = nn.load_module_from_file(str(dst), [], [], runtime_manager=rt)
    names = module.get_info()["inputNames"]
    if set(names) != set(feeds):
        raise EngineMissing(f"inputs {names} after conversion, expected {sorted(feeds)}")

    def run(f):
        xs = [F.const(f[n], list(f[n].shape), F.NCHW) for n in names]
        return [np.array(y.read()) for y in module.forward(xs)]

    return run, f"MNN {MNN.version()}, runtime manager numThread={threads} precision=high"


def _openvino(onnx_bytes: bytes, feeds: dict, threads: int, workdir: Path) -> tuple[Callable, str]:
    try:
        import openvino as ov
    except ImportError as e:
        raise EngineMissing(f"not installed ({e})") from None
    core = ov.Core()
    src = workdir / "model_ov.onnx"
    src.write_bytes(onnx_bytes)
    model = core.read_model(str(src))
    model.reshape({k: list(v.shape) for k, v in feeds.items()})
    cm = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32"})
    req = cm.create_infer_request()
    took = f"INFERENCE_NUM_THREADS={cm.get_property('INFERENCE_NUM_THREADS')}"
    took += f" precision={getattr(cm.get_property('INFERENCE_PRECISION_HINT'), 'type_name', '?')}"

    def run(f):
        res = req.infer(f)
        return [np.array(res[o]) for o in cm.outputs]

    return run, f"OpenVINO {ov.__version__.split('-')[0]}, {took}"


IMPORT_NAME = {"onnxruntime": "onnxruntime", "mnnpy": "mnnpy", "MNN": "MNN", "OpenVINO": "openvino"}
PREPARE = {"onnxruntime": _ort, "mnnpy": _mnnpy, "MNN": _mnn, "OpenVINO": _openvino}


def peak_rss_child(engine: str, model: str, threads: int) -> tuple[float, float, float, float, float]:
    """(peak RSS after importing ``engine`` and loading the model, peak RSS after creation and
    ``RSS_RUNS`` runs) in MiB, then (the engine's import, its first session's creation) in ms,
    then the cores it keeps busy over ``ALONE_RUNS`` more runs and ``ALONE_S`` seconds at least
    (process CPU time / wall time),
    of ``engine`` alone on ``model`` (a name of ``MODELS``), measured in a fresh process
    (``_RSS_BOOT``: the engine imported and timed first, then this file's ``_rss_child_main``;
    ``VmHWM``, ``mnnpy.tools.profile.peak_rss_mib``): what a process that starts,
    loads one model and runs it pays; no other engine's threads count in its CPU time (in the
    shared process, MNN's spinning workers add theirs to everyone's). Raises
    ``RuntimeError`` with the child's last line when it fails."""
    here = str(Path(__file__).resolve().parent)
    cmd = [sys.executable, "-c", _RSS_BOOT, IMPORT_NAME[engine], here, engine, model, str(threads)]
    # as on a user's machine: modules imported from their cached bytecode (this VM sets
    # PYTHONDONTWRITEBYTECODE, which makes every process compile mnnpy's sources: about 0.1 s)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode != 0 or not last.startswith("rss "):
        tail = (done.stderr.strip().splitlines() or [last])[-1]
        raise RuntimeError(f"rss child for {engine} on {model} failed: {tail[:200]}")
    _, base, peak, imported, created, cores = last.split()
    return float(base), float(peak), float(imported), float(created), float(cores)


# the child's start: the engine's import timed before anything else is imported (this file
# imports mnnpy's tools, which would make mnnpy's import look free)
_RSS_BOOT = (
    "import importlib, sys, time\n"
    "t0 = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "imported = (time.perf_counter() - t0) * 1e3\n"
    "sys.path.insert(0, sys.argv[2])\n"
    "import bench\n"
    "sys.exit(bench._rss_child_main(sys.argv[3], sys.argv[4], int(sys.argv[5]), imported))\n"
)


def _rss_child_main(engine: str, model: str, threads: int, imported: float) -> int:
    """The child of ``peak_rss_child`` (the engine imported already, in ``imported`` ms):
    prints ``rss <base MiB> <peak MiB> <import ms> <create ms> <cores>``."""
    data, feeds = load_models([model])[model]
    base = peak_rss_mib()
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        run, _ = PREPARE[engine](data, feeds, threads, Path(d))
        created = _ms(t0) - getattr(run, "convert_ms", 0.0)
        for _ in range(RSS_RUNS):
            run(feeds)
        peak = peak_rss_mib()
        c0, w0, done = time.process_time(), time.perf_counter(), 0
        while done < ALONE_RUNS or time.perf_counter() - w0 < ALONE_S:
            run(feeds)
            done += 1
        cores = (time.process_time() - c0) / (time.perf_counter() - w0)
    print(f"rss {base:.1f} {peak:.1f} {imported:.1f} {created:.1f} {cores:.2f}", flush=True)
    return 0


def bench_model(
    onnx_bytes: bytes,
    feeds: dict,
    threads: int,
    runs: int,
    warmup: int,
    engines: tuple[str, ...] = ENGINES,
    profile: bool = False,
    rss_model: str | None = None,
) -> dict[str, dict]:
    """One model on every engine: create, first run, then ``runs`` timed runs each, interleaved
    in rotating blocks. Returns engine -> results (times in ms; ``"missing"`` or ``"error"``
    with the reason where the engine could not run it); ``"_model"`` -> {mflops, profile}."""
    out: dict[str, dict] = {"_model": {}}
    live: dict[str, Callable] = {}
    ref = None
    with tempfile.TemporaryDirectory() as d:
        for eng in engines:
            r = out[eng] = {}
            try:
                t0 = time.perf_counter()
                run, r["info"] = PREPARE[eng](onnx_bytes, feeds, threads, Path(d))
                r["create"] = _ms(t0) - getattr(run, "convert_ms", 0.0)
                t0 = time.perf_counter()
                y = run(feeds)
                r["first"] = _ms(t0)
            except EngineMissing as e:
                r["missing"] = str(e)
                continue
            except Exception as e:  # noqa: BLE001 - one failing engine must not hide the others
                r["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
                continue
            if ref is None:
                ref = y[0]
            r["max_diff"] = float(np.max(np.abs(np.asarray(y[0], np.float64) - ref))) if y[0].shape == ref.shape else None
            live[eng] = run
            if eng == "mnnpy":
                out["_model"]["mflops"] = plan_mflops(run.session)
        names = list(live)
        for _ in range(warmup):
            for e in names:
                live[e](feeds)
        timed = [Engine(e, run=live[e], first_ms=out[e]["first"]) for e in names]
        timed_runs(timed, feeds, runs, None, SETTLE_S)  # mnnpy.tools.bench: rotating blocks of BLOCK
        for t in timed:
            r = out[t.name]
            stats = latency_stats(t.times)
            r["median"], r["min"] = stats["p50"], stats["min"]
            r["cores"] = t.cpu_s / t.wall_s if t.wall_s > 0 else float("nan")
        if profile and "mnnpy" in live:
            out["_model"]["profile"] = profile_ops(live["mnnpy"], feeds, runs)
    if rss_model is not None:  # a name of MODELS: peak RSS of each engine that ran, in a child each
        for e in names:
            try:
                m = peak_rss_child(e, rss_model, threads)
                out[e]["rss_base"], out[e]["rss_peak"], out[e]["fresh_import"], out[e]["fresh_create"], out[e]["cores_alone"] = m
            except Exception as ex:  # noqa: BLE001 - a failed measurement is reported, not fatal
                out[e]["rss_error"] = type(ex).__name__
    return out


def profile_ops(run: Callable, feeds: dict, runs: int) -> tuple[list[tuple[str, int, float]], float]:
    """mnnpy's time per op type over ``runs`` runs: ([(op type, ops of that type, ms per run)],
    whole run's mean ms), from ``mnnpy.tools.profile.op_profile`` (each Execution's
    ``on_execute`` timed; the whole run minus the ops is the session's own cost)."""
    rows, whole = op_profile(run.session, feeds, runs, run)
    return by_type(rows), whole


HEADER = (
    "| model | input | GFLOPs | engine | median | min | x ORT | GFLOP/s | cores busy | create / first "
    "| fresh process: import + create | peak RSS (import) MiB | max diff vs ORT | settings |"
)
COLUMNS = HEADER.count("|") - 1


def _shape(feeds: dict) -> str:
    return " + ".join("x".join(map(str, v.shape)) for v in feeds.values())


def table_rows(name: str, feeds: dict, res: dict[str, dict]) -> list[str]:
    """Markdown rows of one model, one per engine; a missing or failing engine gets a row that
    says why."""
    mflops = res["_model"].get("mflops")
    ort = res.get("onnxruntime", {}).get("median")
    head = f"| {name} | {_shape(feeds)} | {'' if mflops is None else f'{mflops / 1e3:.3g}'} "
    rows = []
    for eng, r in res.items():
        if eng == "_model":
            continue
        if "median" not in r:
            why = r.get("missing") or f"failed: {r.get('error', 'no runs')}"
            rows.append(head + f"| {eng} | {why} |" + " |" * (COLUMNS - 5))
            continue
        rate = "" if mflops is None else f"{mflops / r['median']:.1f}"  # MFLOP per ms = GFLOP/s
        ratio = "" if ort is None else f"**{r['median'] / ort:.2f}**"
        if "rss_peak" in r:
            rss = f"{r['rss_peak']:.0f} ({r['rss_base']:.0f})"
        else:
            rss = r.get("rss_error", "not measured")
        diff = "" if r.get("max_diff") is None else f"{r['max_diff']:.1e}"
        fresh = f"{r['fresh_import']:.0f} + {r['fresh_create']:.0f}" if "fresh_create" in r else "not measured"
        cores = f"{r['cores_alone']:.2f} alone ({r['cores']:.2f})" if "cores_alone" in r else f"{r['cores']:.2f}"
        rows.append(
            head + f"| {eng} | {r['median']:.2f} | {r['min']:.2f} | {ratio} | {rate} | {cores} "
            f"| {r['create']:.0f} / {r['first']:.1f} | {fresh} | {rss} | {diff} | {r['info']} |"
        )
    return rows


SUMMARY_HEADER = "| model | " + " | ".join(ENGINES) + " | mnnpy/ORT | mnnpy/fastest |"


def summary_row(name: str, res: dict[str, dict]) -> str:
    """One row of medians (ms) per engine, '-' where an engine has none, and mnnpy's ratios."""
    med = {e: res.get(e, {}).get("median") for e in ENGINES}
    cells = " | ".join("-" if m is None else f"{m:.2f}" for m in med.values())
    got = [m for m in med.values() if m is not None]
    if med["mnnpy"] is None or med["onnxruntime"] is None:
        return f"| {name} | {cells} | - | - |"
    return f"| {name} | {cells} | {med['mnnpy'] / med['onnxruntime']:.2f} | {med['mnnpy'] / min(got):.2f} |"


def format_profile(name: str, prof: tuple[list[tuple[str, int, float]], float]) -> list[str]:
    """The per-op-type profile of one model as lines of text."""
    rows, whole = prof
    ops = sum(ms for _, _, ms in rows)
    count = sum(n for _, n, _ in rows)
    per_op = 1e3 * (whole - ops) / max(count, 1)  # the session's own cost per op, µs
    lines = [
        f"mnnpy profile, {name}: run mean {whole:.2f} ms, ops {ops:.2f} ms, rest {whole - ops:.2f} ms "
        f"({per_op:.1f} µs per op over {count} ops)"
    ]
    lines += [f"  {kind:<24} {n:>4} ops {ms:9.3f} ms {100 * ms / max(ops, 1e-9):5.1f}%" for kind, n, ms in rows]
    return lines


def machine_info(threads: int) -> list[str]:
    """CPU model, cores, Python/NumPy/onnxruntime/mnnpy versions, BLAS (threadpoolctl)."""
    import onnxruntime
    from threadpoolctl import threadpool_info

    import mnnpy

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    blas = "; ".join(
        f"{b.get('internal_api')} {b.get('version')} ({b.get('threading_layer', '?')}, {b.get('architecture', '?')})"
        for b in threadpool_info()
        if b.get("user_api") == "blas"
    )
    env = ", ".join(f"{k}={os.environ[k]}" for k in BLAS_ENV if k in os.environ) or "unset (as intended)"
    return [
        f"- CPU: {cpu}; {os.cpu_count()} logical cores; {platform.system()} {platform.release()}",
        (
            f"- Python {platform.python_version()}, NumPy {np.__version__}, "
            f"onnxruntime {onnxruntime.__version__}, mnnpy {mnnpy.__version__}"
        ),
        f"- BLAS: {blas or 'none found'}",
        f"- threads: {threads} for every engine; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: {env}",
        (
            f"- load average (1/5/15 min) at the end: {' / '.join(f'{v:.2f}' for v in os.getloadavg())} "
            "(other processes on the machine; numbers are noisy when it exceeds the core count)"
        ),
    ]


def write_section(path: Path, text: str) -> None:
    """Write ``text`` (a markdown section starting with a top-level ``# `` heading) to ``path``,
    replacing only the file's first section (up to its next top-level heading) when the file
    exists and starts with the same heading line: the other sections (GPU runs) are kept."""
    if path.exists():
        old = path.read_text().splitlines()
        if old and old[0] == text.splitlines()[0]:
            rest = next((i for i, line in enumerate(old[1:], 1) if line.startswith("# ")), len(old))
            text = text.rstrip("\n") + "\n\n" + "\n".join(old[rest:]) + ("\n" if rest < len(old) else "")
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=20, help="timed runs per engine (default 20)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="print mnnpy's time per op type")
    p.add_argument("--no-rss", action="store_true", help="skip the peak-RSS child processes")
    p.add_argument("--output", help="also write the tables and machine info here (markdown)")
    args = p.parse_args(argv)
    if any(k in os.environ for k in BLAS_ENV):
        print(f"warning: {' / '.join(BLAS_ENV)} set; run with `env -u ...` (see docstring)", file=sys.stderr)
    rows = [HEADER, "|" + " --- |" * COLUMNS]
    summary = [SUMMARY_HEADER, "|" + " --- |" * (SUMMARY_HEADER.count("|") - 1)]
    profiles: list[str] = []
    print(rows[0], rows[1], sep="\n", flush=True)
    for name, (data, feeds) in load_models(args.models).items():
        res = bench_model(
            data, feeds, args.threads, args.runs, args.warmup, tuple(args.engines), args.profile, None if args.no_rss else name
        )
        rows += table_rows(name, feeds, res)
        summary.append(summary_row(name, res))
        print("\n".join(table_rows(name, feeds, res)), flush=True)
        if "profile" in res["_model"]:
            profiles += format_profile(name, res["_model"]["profile"])
            print("\n".join(format_profile(name, res["_model"]["profile"])), flush=True)
    print("", *summary, sep="\n")
    if args.output:
        text = [
            "# Benchmark: mnnpy CPU vs onnxruntime CPU",
            "",
            (
                "Generated by `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench.py "
                f"--runs {args.runs} --output {args.output}` (OpenBLAS overrides unset: they slow NumPy on this "
                f"machine). Latencies in ms, {args.runs} runs per engine after {args.warmup} warm-up runs, the "
                f"engines taking turns in blocks of {BLOCK} (order rotating every block) with a {SETTLE_S:.1f} s "
                "pause at each switch; x ORT = the engine's median / onnxruntime's. create: session creation "
                "(mnnpy: load the converted model, create and resize; its conversion is in the settings; "
                "MNN: mnnconvert and load); "
                "fresh process: the engine's import and first creation in a new process "
                "(mnnpy: its kernels' machine code loaded); "
                "first: the first run "
                "after that. GFLOPs: one run's work by the op schemas' FLOPs rules (`Session.op_mflops`, a "
                "multiply-add counts two); GFLOP/s: that work over the engine's median. cores busy: process "
                "CPU time / wall time over the engine's timed runs, first alone in a child process "
                f"(at least {ALONE_RUNS} runs and {ALONE_S:.0f} s; then, in brackets, in the shared process, "
                "where other engines' spinning threads count too). peak RSS: `VmHWM` of the engine alone "
                f"in a child process after import, creation and {RSS_RUNS} runs (in brackets: after the import "
                "alone). max diff: max |difference| of the first output from onnxruntime's."
            ),
            "",
            "Engines beside onnxruntime (MNN, OpenVINO on the CPU), each optional. "
            "The settings column says what each engine was given or reported back.",
            "",
            *machine_info(args.threads),
            "",
            "Medians (ms):",
            "",
            *summary,
            "",
            *rows,
            "",
        ]
        if profiles:
            text += ["```", *profiles, "```", ""]
        write_section(Path(args.output), "\n".join(text))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Latency of mnnpy's CPU backend against onnxruntime's CPU provider, same process, interleaved.

Run it with OpenBLAS's overrides unset (this machine sets them, and they slow NumPy):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench.py [--output bench/RESULTS.md]

Models: MobileNetV2 and ResNet-18 (``bench/make_models.py``, 1x3x224x224), PP-OCRv4
det (1x3x640x640) and rec (1x3x48x320) (``mnnpy.models``). Both engines get the same
thread count (default 2: onnxruntime ``intra_op_num_threads=2, inter_op_num_threads=1``,
mnnpy ``num_threads=2``). After a warm-up, the two engines alternate in blocks of
``BLOCK`` runs (the order flips every block) on the same seeded input, so machine noise
hits both alike.
Reported, in ms: median and min latency of each, the ratio mnnpy/onnxruntime (of the
medians), the time to create a session (mnnpy: load the converted file, create the session and
resize it for the input shape; conversion is listed apart) and the first run. Beside them the
model's work per run in GFLOPs (the op schemas' FLOPs rules summed over the plan,
``mnnpy.ops.flops``; a multiply-add counts two) and the rate each engine's median gives, in
GFLOP/s.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
BLOCK = 5  # runs per engine before switching engines
SETTLE_S = 0.2  # pause at each switch: both engines' worker threads spin-wait after a run,
# and would otherwise steal the cores from the other engine's next runs


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def load_models(names: list[str]) -> dict[str, tuple[bytes, tuple[int, ...], float]]:
    """name -> (ONNX bytes, input shape NCHW, input scale) for the requested models."""
    spec = importlib.util.spec_from_file_location("make_models", HERE / "make_models.py")
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    from mnnpy import models

    table = {
        "mobilenet_v2": (lambda: mm.mobilenet_v2().SerializeToString(), (1, 3, 224, 224)),
        "resnet18": (lambda: mm.resnet18().SerializeToString(), (1, 3, 224, 224)),
        "ppocr_det": (lambda: models.ocr_model_path("det").read_bytes(), (1, 3, 640, 640)),
        "ppocr_rec": (lambda: models.ocr_model_path("rec").read_bytes(), (1, 3, 48, 320)),
    }
    return {n: (table[n][0](), table[n][1]) for n in names}


def bench_model(onnx_bytes: bytes, shape: tuple[int, ...], threads: int, runs: int, warmup: int) -> dict:
    """One model: create both sessions, first runs, then ``runs`` interleaved pairs. Times in ms."""
    import onnxruntime as ort

    import mnnpy
    from mnnpy.converter import convert

    x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    r: dict = {}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    t0 = time.perf_counter()
    so = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
    r["ort_create"] = _ms(t0)
    name = so.get_inputs()[0].name
    t0 = time.perf_counter()
    so.run(None, {name: x})
    r["ort_first"] = _ms(t0)

    t0 = time.perf_counter()
    data = convert(onnx_bytes)
    r["convert"] = _ms(t0)
    t0 = time.perf_counter()
    sm = mnnpy.Interpreter(data).create_session(backend="cpu", num_threads=threads)
    sm.resize({name: shape})  # prepare for this input shape (MNN: resizeSession)
    r["mnn_create"] = _ms(t0)
    r["mflops"] = plan_mflops(sm)
    t0 = time.perf_counter()
    sm.run({name: x})
    r["mnn_first"] = _ms(t0)

    engines = [lambda: so.run(None, {name: x}), lambda: sm.run({name: x})]
    times: list[list[float]] = [[], []]
    for _ in range(warmup):
        engines[0](), engines[1]()
    for i in range(0, runs, BLOCK):
        for k in (0, 1) if (i // BLOCK) % 2 == 0 else (1, 0):
            time.sleep(SETTLE_S)
            for _ in range(min(BLOCK, runs - i)):
                t0 = time.perf_counter()
                engines[k]()
                times[k].append(_ms(t0))
    for key, t in zip(("ort", "mnn"), times):
        r[f"{key}_median"], r[f"{key}_min"] = statistics.median(t), min(t)
    r["ratio"] = r["mnn_median"] / r["ort_median"]
    return r


def plan_mflops(session) -> float:
    """MFLOPs of one run of ``session`` for the shapes of its last resize (the schemas' FLOPs
    rules, ``Session.op_mflops``)."""
    return sum(v for _, _, v in session.op_mflops())


HEADER = (
    "| model | input | GFLOPs | ORT median | ORT min | mnnpy median | mnnpy min | ratio mnnpy/ORT "
    "| GFLOP/s ORT / mnnpy | ORT create / first | mnnpy convert / create / first | mnnpy first / median |"
)
COLUMNS = HEADER.count("|") - 1


def table_row(name: str, shape, r: dict) -> str:
    """One markdown row; an engine failure is written in place of the numbers."""
    shp = "x".join(map(str, shape))
    if "error" in r:
        return f"| {name} | {shp} | {r['error']} |" + " |" * (COLUMNS - 3)
    gflops = r["mflops"] / 1e3
    rates = f"{r['mflops'] / r['ort_median']:.1f} / {r['mflops'] / r['mnn_median']:.1f}"  # MFLOP per ms = GFLOP/s
    return (
        f"| {name} | {shp} | {gflops:.2f} | {r['ort_median']:.1f} | {r['ort_min']:.1f} | {r['mnn_median']:.1f} "
        f"| {r['mnn_min']:.1f} | **{r['ratio']:.2f}** | {rates} | {r['ort_create']:.0f} / {r['ort_first']:.1f} "
        f"| {r['convert']:.0f} / {r['mnn_create']:.0f} / {r['mnn_first']:.1f} "
        f"| {r['mnn_first'] / r['mnn_median']:.2f} |"
    )


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
        f"- threads: {threads} for both engines; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: {env}",
        (
            f"- load average (1/5/15 min) at the end: {' / '.join(f'{v:.2f}' for v in os.getloadavg())} "
            "(other processes on the machine; numbers are noisy when it exceeds the core count)"
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet18", "ppocr_det", "ppocr_rec"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=20, help="timed runs per engine (default 20)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--output", help="also write the table and machine info here (markdown)")
    args = p.parse_args(argv)
    if any(k in os.environ for k in BLAS_ENV):
        print(f"warning: {' / '.join(BLAS_ENV)} set; run with `env -u ...` (see docstring)", file=sys.stderr)
    rows = [HEADER, "|" + " --- |" * COLUMNS]
    print(rows[0], rows[1], sep="\n", flush=True)
    for name, (data, shape) in load_models(args.models).items():
        try:
            r = bench_model(data, shape, args.threads, args.runs, args.warmup)
        except Exception as e:  # noqa: BLE001 - one failing model must not hide the others' numbers
            r = {"error": f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        rows.append(table_row(name, shape, r))
        print(rows[-1], flush=True)
    if args.output:
        text = [
            "# Benchmark: mnnpy CPU vs onnxruntime CPU",
            "",
            (
                "Generated by `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench.py "
                f"--output {args.output}` (OpenBLAS overrides unset: they slow NumPy on this machine). "
                f"Latencies in ms, {args.runs} runs per engine after {args.warmup} warm-up runs, the engines "
                f"alternating in blocks of {BLOCK} with a {SETTLE_S:.1f} s pause at each switch; "
                "ratio = mnnpy median / onnxruntime median (lower is better for mnnpy). "
                "create: session creation (mnnpy: load the converted file, create the session and resize it "
                "for the input shape: shapes, schedule, memory plan, prepared weights and buffers); "
                "first: the first run after that. GFLOPs: the work of one run by the op schemas' FLOPs rules "
                "(`mnnpy.ops.flops`, a multiply-add counts two); GFLOP/s: that work over each engine's median."
            ),
            "",
            *machine_info(args.threads),
            "",
            *rows,
            "",
        ]
        Path(args.output).write_text("\n".join(text))
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Latency of mnnpy on a GPU backend against onnxruntime CPU and PyTorch CUDA eager, one process.

    python bench/bench_gpu.py --backend opencl [--ort-threads 16] [--output FILE] [--profile]

Models (batch 1): MobileNetV2 and ResNet-18 (``bench/make_models.py``, 1x3x224x224),
PP-OCRv4 det (1x3x640x640), rec (1x3x48x320) and cls (1x3x48x192) (``mnnpy.models``).
Each engine's latency is the median of ``--runs`` whole runs after ``--warmup`` runs,
host array in and host array out: mnnpy ``session.run`` (upload, every kernel, download),
onnxruntime's CPU provider with ``--ort-threads`` intra-op threads, and PyTorch CUDA eager
fp32 (torchvision's architectures with random weights, TF32 off; input copied to the GPU
and output back inside the timed region, synchronised) where torchvision has the model.
``--profile``: per op type, the wall time of the mnnpy backend's Executions, each followed
by a queue finish (OpenCL; a diagnostic: it serialises the GPU, so its sum exceeds the run
time), or (Vulkan) the GPU time between timestamp queries after each dispatch.
Floors of the issue (ms, H200): see ``FLOORS``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from mnnpy.tools.bench import DEVICE_PROFILES, Engine, timed_runs
from mnnpy.tools.inputs import resized_session
from mnnpy.tools.profile import by_type, device_profile, latency_stats, op_profile
from mnnpy.tools.table import markdown_row

HERE = Path(__file__).resolve().parent
HEADERS = ["model", "input", "ORT CPU", "PyTorch CUDA eager", "mnnpy/ORT", "mnnpy/PyTorch", "floor"]
HEADERS += ["mnnpy create / first", "max abs diff vs ORT", "schedule"]  # after "mnnpy <backend>" at 2
FLOORS = {
    "opencl": {"mobilenet_v2": 2.0, "resnet18": 2.5, "ppocr_det": 10.0},
    "vulkan": {"mobilenet_v2": 1.5, "resnet18": 2.0, "ppocr_det": 8.0},
}
SHAPES = {
    "mobilenet_v2": (1, 3, 224, 224),
    "resnet18": (1, 3, 224, 224),
    "ppocr_det": (1, 3, 640, 640),
    "ppocr_rec": (1, 3, 48, 320),
    "ppocr_cls": (1, 3, 48, 192),
}


def _median_ms(fn, runs: int, warmup: int) -> tuple[float, float]:
    """(first-call ms, median ms of ``runs`` after ``warmup``)."""
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    for _ in range(warmup):
        fn()
    engine = Engine("engine", run=lambda _: fn(), first_ms=first)
    timed_runs([engine], {}, runs, None)  # mnnpy bench's timing loop, one engine
    return first, latency_stats(engine.times)["p50"]


def onnx_bytes(name: str) -> bytes:
    if name.startswith("ppocr_"):
        from mnnpy import models

        return models.ocr_model_path(name.split("_", 1)[1]).read_bytes()
    spec = importlib.util.spec_from_file_location("make_models", HERE / "make_models.py")
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    return mm.MODELS[name]().SerializeToString()


def bench_mnnpy(data: bytes, x: np.ndarray, backend: str, precision: str, runs: int, warmup: int, profile: bool) -> dict:
    import mnnpy
    from mnnpy.converter import convert

    interp = mnnpy.Interpreter(convert(data))
    name = interp.inputs[0].name
    t0 = time.perf_counter()
    s = resized_session(interp, {name: x}, backend=backend, precision=precision)
    create = (time.perf_counter() - t0) * 1e3
    first, median = _median_ms(lambda: s.run({name: x}), runs, warmup)
    head = s.partitions().splitlines()[0]
    r = {"create": create, "first": first, "median": median, "schedule": head, "out": s.run({name: x})}
    if profile:
        gpu = backend in DEVICE_PROFILES  # the backend's own device times, else each op timed
        r["profile"] = device_profile(interp, backend, precision, {name: x}) if gpu else _profile(s, {name: x})
    return r


def _profile(session, feeds) -> dict[str, float]:
    """Per op type: ms per run of its Executions, each followed by a finish of its backend's
    queue (``mnnpy.tools.profile.op_profile``, 10 runs after 3)."""
    for _ in range(3):
        session.run(feeds)
    rows, _ = op_profile(session, feeds, 10)
    return {kind: ms for kind, _, ms in by_type(rows)}


def bench_ort(data: bytes, x: np.ndarray, threads: int, runs: int, warmup: int) -> dict:
    from mnnpy.apps.reference import onnxruntime_session

    s = onnxruntime_session(data, threads)
    name = s.get_inputs()[0].name
    first, median = _median_ms(lambda: s.run(None, {name: x}), runs, warmup)
    return {"first": first, "median": median, "out": s.run(None, {name: x})[0]}


def bench_torch(name: str, x: np.ndarray, runs: int, warmup: int) -> dict | None:
    try:
        import torch
        import torchvision
    except ImportError:
        return None
    if not torch.cuda.is_available() or name not in ("mobilenet_v2", "resnet18"):
        return None
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = getattr(torchvision.models, name)(weights=None).eval().cuda()
    host = torch.from_numpy(x)

    def run():
        with torch.no_grad():
            y = model(host.cuda())
            return y.cpu()

    first, median = _median_ms(run, runs, warmup)
    return {"first": first, "median": median}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="opencl")
    p.add_argument("--precision", default="high")
    p.add_argument("--models", nargs="+", default=list(SHAPES))
    p.add_argument("--ort-threads", type=int, default=16)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--output", help="also write the markdown here")
    args = p.parse_args(argv)
    import mnnpy
    from mnnpy.backend import get_runtime

    rt = get_runtime(args.backend)
    lines = [
        f"mnnpy {mnnpy.__version__} on {args.backend} ({rt.describe() if hasattr(rt, 'describe') else ''}), "
        f"precision {args.precision}; onnxruntime CPU {args.ort_threads} threads; batch 1; "
        f"median of {args.runs} runs after {args.warmup} warm-up runs, ms",
        "",
        markdown_row(HEADERS[:2] + [f"mnnpy {args.backend}"] + HEADERS[2:]),
        markdown_row(["---"] * (len(HEADERS) + 1)),
    ]
    print(*lines, sep="\n", flush=True)
    profiles = []
    floors = FLOORS.get(args.backend, {}) if args.precision != "low" else {}  # the floors are for fp32
    for name in args.models:
        shape = SHAPES[name]
        x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
        data = onnx_bytes(name)
        try:
            m = bench_mnnpy(data, x, args.backend, args.precision, args.runs, args.warmup, args.profile)
        except Exception as e:  # noqa: BLE001 - report and go on with the other models
            row = f"| {name} | {'x'.join(map(str, shape))} | failed: {type(e).__name__}: {str(e)[:150]} |" + " |" * 8
            lines.append(row)
            print(row, flush=True)
            continue
        o = bench_ort(data, x, args.ort_threads, args.runs, args.warmup)
        t = bench_torch(name, x, args.runs, args.warmup)
        diff = float(np.abs(next(iter(m["out"].values())) - o["out"]).max())
        floor = floors.get(name)
        verdict = "" if floor is None else f"{floor:g} ({'met' if m['median'] <= floor else 'MISSED'})"
        torch_ms, ratio = (f"{t['median']:.2f}", f"{m['median'] / t['median']:.2f}") if t else ("—", "—")
        row = markdown_row(
            [name, "x".join(map(str, shape)), f"**{m['median']:.2f}**", f"{o['median']:.2f}", torch_ms]
            + [f"{m['median'] / o['median']:.2f}", ratio, verdict, f"{m['create']:.0f} / {m['first']:.1f}", f"{diff:.2g}"]
            + [m["schedule"]]
        )
        lines.append(row)
        print(row, flush=True)
        if args.profile:
            prof = ", ".join(f"{k} {v:.3f}" for k, v in m["profile"].items())
            profiles.append(f"- {name}: {prof}")
    if profiles:
        how = DEVICE_PROFILES.get(args.backend, ("each Execution followed by a queue finish",))[0]
        lines += ["", f"Per op type, ms per run ({how}):", *profiles]
        print(*lines[-len(profiles) - 2 :], sep="\n")
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

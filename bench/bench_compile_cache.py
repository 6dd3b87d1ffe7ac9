"""Session creation with the compilation cache, cold and warm, each in a fresh process (issue 15).

    python bench/bench_compile_cache.py --models DIR [--backends vulkan opencl] [--repeat 3]
        [--driver-cache fresh|off|keep] [--per-model] [--profile 25] [--output FILE]

``DIR`` holds the ONNX files ``mobilenet_v2.onnx``, ``resnet18.onnx``, ``ppocr_det.onnx``,
``ppocr_rec.onnx``, ``ppocr_cls.onnx`` (PP-OCRv4, from the ``rapidocr-onnxruntime`` wheel):
``python bench/make_models.py --out DIR --ppocr`` writes them all; a missing file is a row
saying so (none of them: an error). Nothing is downloaded: only numpy, onnx, mnnpy and the backend's driver wrapper
(pyopencl, vulkan) are needed (numba is not).

The models are converted once (in this process) into a work folder. Then per backend and
repetition, with a new empty ``cache_dir``: a **cold** child process, then a **warm** one, each
running the five models one after another (input shapes: 1x3x224x224, 640x640, 48x320,
48x192). Each child reports, in ms: ``import`` (mnnpy), ``runtime`` (the backend's Runtime:
instance, device, context, queues, and the CPU's, whose backend every session also has; per
process; before 2026-12-03 the CPU's was made in the first model's create+resize), ``registries`` (importing the op schemas and
the CPU's and the backend's Executions, done once per process by the first session), and per
model ``load`` (``Interpreter``: read and validate the model) and ``create+resize``
(``create_session(backend=..., cache_dir=...)`` then ``resize`` to the input shape: schedule,
memory plan, kernels/pipelines, weight upload, warm-up), plus the SHA-256 of the outputs of one
run on a fixed seeded input: cold and warm must be identical.

``--per-model``: each model gets cold and warm processes of its own (issue 15's floor: "in a
second process ... than in the first (cold) process", per model). By default every model runs in
the same two processes, in the order above; there a model's cold create+resize already finds
the pipelines (Vulkan) or programs (OpenCL) that it shares with the models before it made in
that process: PP-OCRv4 rec, fourth, shares all but 13 of its 30 Vulkan pipelines with them, and
its cold figure counts the creation of those 13 only.

Only the compilation cache carries work from the cold process to the warm one: the backends'
own disk caches are off (``MNNPY_OPENCL_CACHE=0``, ``MNNPY_VULKAN_CACHE=0``). Drivers keep
caches of their own (NVIDIA: ``~/.nv``; PoCL: ``~/.cache/pocl``; Mesa): ``--driver-cache fresh``
(default) points them at a new empty folder per cold/warm pair (the warm process may use what
the cold one left there), ``off`` disables them, ``keep`` leaves them as they are (the cold
process is then not cold for the driver).

``--own-token``: sessions pass ``cache_token=`` (a fixed token per model, as an NNAPI app must)
instead of the default token, the SHA-256 of the model file, which each process computes
(ResNet-18's 46.8 MB: about 35 ms on the H200 machine's CPU, in cold and warm alike).

``--profile N``: after each warm process a third one (the cache as warm) profiles each model's
create+resize (cProfile) and the N functions with the largest cumulative time, then the N with
the largest own time, are printed below the table; the warm figures come from the unprofiled process (cProfile's overhead,
30-100% on Python-heavy code, stays out of them; before 2026-12-03 the warm process itself
was profiled, which inflated warm times).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = {  # name -> input shape (N, C, H, W)
    "mobilenet_v2": (1, 3, 224, 224),
    "resnet18": (1, 3, 224, 224),
    "ppocr_det": (1, 3, 640, 640),
    "ppocr_rec": (1, 3, 48, 320),
    "ppocr_cls": (1, 3, 48, 192),
}
DRIVER_CACHE_FOLDERS = ("POCL_CACHE_DIR", "__GL_SHADER_DISK_CACHE_PATH", "CUDA_CACHE_PATH", "MESA_SHADER_CACHE_DIR")
DRIVER_CACHE_OFF = {"POCL_KERNEL_CACHE": "0", "__GL_SHADER_DISK_CACHE": "0", "CUDA_CACHE_DISABLE": "1"}
DRIVER_CACHE_OFF |= {"MESA_SHADER_CACHE_DISABLE": "true"}


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


# -- the child: one process, every model -------------------------------------------------------
def child(backend: str, cache_dir: str, workdir: str, names: list[str], profile: int) -> dict:
    """One process's figures (module doc): ``{"import", "runtime", "registries", "models": {name:
    {"load", "create_resize", "outputs"}}, "profiles": {name: text}}``, times in ms."""
    t0 = time.perf_counter()
    import numpy as np

    import mnnpy
    from mnnpy.backend import get_runtime

    out: dict = {"import": _ms(t0), "models": {}, "profiles": {}}
    t0 = time.perf_counter()
    get_runtime(backend)
    get_runtime("cpu")  # every session has the CPU backend too: its Runtime is per process as well
    out["runtime"] = _ms(t0)
    t0 = time.perf_counter()
    _load_registries(backend)
    out["registries"] = _ms(t0)
    for name in names:
        out["models"][name], text = _one_model(mnnpy, np, backend, cache_dir, Path(workdir) / f"{name}.mnnpy", name, profile)
        if text:
            out["profiles"][name] = text
    return out


def _load_registries(backend: str) -> None:
    """Import the op schemas and the CPU's and ``backend``'s Executions (what a process's first session would)."""
    import importlib

    from mnnpy.ops.registry import _SCHEMAS

    _SCHEMAS.entries()
    importlib.import_module("mnnpy.backends.cpu.registry")._EXECUTIONS.entries()
    importlib.import_module(f"mnnpy.backends.{backend}.registry").executions()


def _one_model(mnnpy, np, backend: str, cache_dir: str, path: Path, name: str, profile: int) -> tuple[dict, str]:
    """``({"load", "create_resize", "outputs"}, profile text or "")`` of model ``name``."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    interp = mnnpy.Interpreter(str(path))
    load = _ms(t0)
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    token = hashlib.sha256(f"bench {name}".encode()).hexdigest() if os.environ.get(OWN_TOKEN_ENV) == "1" else None
    session = interp.create_session(backend=backend, cache_dir=cache_dir, cache_token=token)
    first = session.inputs[0].name
    session.resize({first: MODELS[name]})
    if prof:
        prof.disable()
    create = _ms(t0)
    x = np.random.default_rng(0).uniform(-1, 1, MODELS[name]).astype(np.float32)
    got = session.run({first: x})
    digest = hashlib.sha256()
    for k in sorted(got):
        digest.update(k.encode() + np.ascontiguousarray(got[k]).tobytes())
    session.close()
    text = ""
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(profile)
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(profile)
        text = buf.getvalue()
    return {"load": load, "create_resize": create, "outputs": digest.hexdigest()[:16]}, text


# -- the parent: conversion, processes, table ---------------------------------------------------
def convert_models(models_dir: Path, workdir: Path) -> dict[str, str]:
    """Convert each model of ``MODELS`` found in ``models_dir`` into ``workdir``; name -> "" or why it is missing."""
    from mnnpy.converter import convert

    status = {}
    for name in MODELS:
        src = models_dir / f"{name}.onnx"
        if not src.is_file():
            status[name] = f"no {src.name} in {models_dir}"
            continue
        convert(str(src), workdir / f"{name}.mnnpy")
        status[name] = ""
    return status


OWN_TOKEN_ENV = "MNNPY_BENCH_OWN_TOKEN"  # "1": the children pass a token per model (--own-token)


def child_env(driver_dir: Path, driver_cache: str) -> dict[str, str]:
    """The children's environment: the backends' own disk caches off, the drivers' as asked."""
    env = dict(os.environ, MNNPY_OPENCL_CACHE="0", MNNPY_VULKAN_CACHE="0", MNNPY_NUMBA_WARMUP="0")
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    if driver_cache == "fresh":
        for var in DRIVER_CACHE_FOLDERS:
            (driver_dir / var.strip("_").lower()).mkdir(parents=True, exist_ok=True)
            env[var] = str(driver_dir / var.strip("_").lower())
    elif driver_cache == "off":
        env.update(DRIVER_CACHE_OFF)
    return env


def run_child(backend: str, cache_dir: Path, workdir: Path, names: list[str], env: dict, profile: int) -> dict:
    """The figures of one child process (``child``); ``{"error": text}`` when it failed."""
    cmd = [sys.executable, __file__, "--child", backend, "--cache", str(cache_dir), "--workdir", str(workdir)]
    cmd += ["--profile", str(profile), *names]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(
    backend: str, names: list[str], workdir: Path, repeat: int, driver_cache: str, profile: int, per_model: bool = False
) -> list[tuple]:
    """``repeat`` (cold, warm) pairs of child figures for ``backend``, each pair on new empty
    caches; ``per_model``: each model's pair in processes of its own (the figures of one
    repetition merged: ``_merge``), else every model in the same two processes."""
    pairs = []
    for _ in range(repeat):
        cold_all: dict = {}
        warm_all: dict = {}
        for group in [[n] for n in names] if per_model else [names]:
            with tempfile.TemporaryDirectory(prefix="mnnpy-ccbench-") as tmp:
                env = child_env(Path(tmp) / "driver", driver_cache)
                cold = run_child(backend, Path(tmp) / "cache", workdir, group, env, 0)
                warm = run_child(backend, Path(tmp) / "cache", workdir, group, env, 0) if "error" not in cold else cold
                if profile and "error" not in warm:  # a third process: cProfile's overhead stays out of the warm figures
                    warm["profiles"] = run_child(backend, Path(tmp) / "cache", workdir, group, env, profile).get("profiles", {})
            _merge(cold_all, cold)
            _merge(warm_all, warm)
        pairs.append((cold_all, warm_all))
    return pairs


def _merge(into: dict, one: dict) -> None:
    """Add the figures of child ``one`` to ``into``: its models and profiles; the per-process
    phases and the first error of the first child that has them."""
    for key, value in one.items():
        if key in ("models", "profiles"):
            into.setdefault(key, {}).update(value)
        else:
            into.setdefault(key, value)


def _span(values: list[float]) -> str:
    """``median (min-max)`` of ``values``, ms rounded; the single value when there is one."""
    if len(values) == 1:
        return f"{values[0]:.0f}"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def table(results: dict[str, list[tuple]], status: dict[str, str]) -> list[str]:
    """Markdown rows: per backend the per-process phases, then per model cold, warm, ratio and outputs."""
    rows = [
        "| backend | what | cold ms | warm ms | cold / warm | outputs cold = warm |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for backend, pairs in results.items():
        errors = [p[k]["error"] for p in pairs for k in (0, 1) if "error" in p[k]]
        if errors:
            rows.append(f"| {backend} | failed | {errors[0]} | | | |")
            continue
        for phase in ("import", "runtime", "registries"):
            cold, warm = [p[0][phase] for p in pairs], [p[1][phase] for p in pairs]
            rows.append(f"| {backend} | process: {phase} | {_span(cold)} | {_span(warm)} | | |")
        for name, why in status.items():
            if why:
                rows.append(f"| {backend} | {name} | {why} | | | |")
                continue
            cold = [p[0]["models"][name]["create_resize"] for p in pairs]
            warm = [p[1]["models"][name]["create_resize"] for p in pairs]
            ratios = [c / w for c, w in zip(cold, warm)]
            same = all(p[0]["models"][name]["outputs"] == p[1]["models"][name]["outputs"] for p in pairs)
            load = _span([p[1]["models"][name]["load"] for p in pairs])
            ratio = f"{statistics.median(ratios):.1f}x" + (f" ({min(ratios):.1f}-{max(ratios):.1f})" if len(ratios) > 1 else "")
            same = "yes" if same else "NO"
            rows.append(f"| {backend} | {name} create+resize (load {load}) | {_span(cold)} | {_span(warm)} | {ratio} | {same} |")
    return rows


def header(args, names: list[str]) -> list[str]:
    return [
        f"compilation-cache bench, {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, Python {platform.python_version()},"
        f" {os.cpu_count()} CPUs; {args.repeat} cold/warm pair(s) per backend; driver caches: {args.driver_cache};"
        f" bytecode writing {'off' if sys.flags.dont_write_bytecode else 'on'};"
        f" cache token: {'one given per model' if args.own_token else 'default (SHA-256 of the model file)'};"
        f" models in order: {', '.join(names)}"
        + (
            "; each model's cold and warm processes its own (per-process phases: the first model's)"
            if args.per_model
            else "; every model in the same cold and warm processes"
        ),
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", type=Path, help="folder with the .onnx files (module doc)")
    p.add_argument("--backends", nargs="+", default=["vulkan", "opencl"], choices=("vulkan", "opencl", "cpu"))
    p.add_argument("--repeat", type=int, default=1, help="cold/warm pairs per backend (default 1)")
    p.add_argument("--driver-cache", choices=("fresh", "off", "keep"), default="fresh")
    p.add_argument("--profile", type=int, default=0, help="print the N top functions of a warm create+resize (own process)")
    p.add_argument(
        "--own-token",
        action="store_true",
        help="sessions pass cache_token= (a fixed token per model, as NNAPI's apps do) instead of the default, "
        "the SHA-256 of the model file computed in each process",
    )
    p.add_argument(
        "--per-model",
        action="store_true",
        help="each model's cold and warm create+resize in processes of its own (default: every model in the same "
        "two processes, where a model's cold process already made the pipelines and kernels it shares with the "
        "models before it)",
    )
    p.add_argument("--output", type=Path, help="also write the table to this file")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--cache", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    p.add_argument("names", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.cache, args.workdir, args.names, args.profile)))
        return 0
    if args.own_token:
        os.environ[OWN_TOKEN_ENV] = "1"  # inherited by child_env's copy of the environment
    if args.models is None or not args.models.is_dir():
        p.error("--models must name a folder with the .onnx files")
    if args.repeat < 1 or args.profile < 0:
        p.error("--repeat must be at least 1 and --profile at least 0")
    if args.output is not None and not args.output.parent.is_dir():
        p.error(f"--output: no folder {args.output.parent}")
    if not any((args.models / f"{name}.onnx").is_file() for name in MODELS):
        p.error(f"--models {args.models} holds none of {', '.join(f'{n}.onnx' for n in MODELS)} (module doc)")
    with tempfile.TemporaryDirectory(prefix="mnnpy-ccbench-models-") as work:
        status = convert_models(args.models, Path(work))
        names = [n for n, why in status.items() if not why]
        results = {
            b: measure(b, names, Path(work), args.repeat, args.driver_cache, args.profile, args.per_model) for b in args.backends
        }
    lines = header(args, names) + table(results, status)
    for backend, pairs in results.items():
        for name, text in pairs[-1][1].get("profiles", {}).items():
            lines += [
                "",
                f"warm create+resize of {name} on {backend}, cProfile (cumulative, then own time):",
                "```",
                text.strip(),
                "```",
            ]
    print("\n".join(lines))
    if args.output:
        args.output.write_text("\n".join(lines) + "\n")
    failed = any("error" in c or "error" in w for pairs in results.values() for c, w in pairs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

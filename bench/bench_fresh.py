"""A process's first session: each engine's import and first session creation in fresh
processes, the engines alternating, ``--rounds`` processes each after one untimed round.

The child (``CHILD``) times ``import`` of the engine, then reading the model file and
creating and resizing the session for the model's input shapes (mnnpy: the converted
``.mnn`` file, converted here beforehand; onnxruntime: the ``.onnx`` file,
``intra_op_num_threads=T``), then runs it once. Children run with Python's bytecode cache on,
as on a user's machine (this VM sets ``PYTHONDONTWRITEBYTECODE``, which makes every process
compile mnnpy's sources: about 0.1 s). Prints, per model, the range and median of each
figure in ms and mnnpy's medians over onnxruntime's.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench_fresh.py [--models ...] [--rounds 5] [--cache-dir]

``--cache-dir``: mnnpy's children create their sessions with a compilation cache that the
untimed round filled (NNAPI's warm start: plans, prepared weights).

mnnpy's kernels are loaded as machine code (``backends/cpu/kernels/native.py``) once this
machine has them (the untimed round makes sure of it); with ``MNNPY_NATIVE_KERNELS=0`` in the
environment, through numba as before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402

CHILD = r"""
import json, sys, time
engine, path, shapes, threads = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
cache = {"cache_dir": sys.argv[5]} if len(sys.argv) > 5 else {}
t0 = time.perf_counter()
if engine == "mnnpy":
    import mnnpy
else:
    import onnxruntime
t1 = time.perf_counter()
import numpy as np
feeds = {k: np.zeros(v[0], v[1]) for k, v in shapes.items()}
if engine == "mnnpy":
    s = mnnpy.Interpreter(open(path, "rb").read()).create_session(backend="cpu", num_threads=threads, **cache)
    s.resize({k: v.shape for k, v in feeds.items()})
    run = s.run
else:
    o = onnxruntime.SessionOptions()
    o.intra_op_num_threads, o.inter_op_num_threads = threads, 1
    s = onnxruntime.InferenceSession(open(path, "rb").read(), o, providers=["CPUExecutionProvider"])
    run = lambda f: s.run(None, f)
t2 = time.perf_counter()
run(feeds)
t3 = time.perf_counter()
print(json.dumps([1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2)]))
"""


def child(engine: str, path: Path, shapes: dict, threads: int, cache_dir: str | None = None) -> list[float]:
    """``[import, create, first run]`` ms of ``engine`` on the model file ``path`` in a new
    process (mnnpy with the compilation cache ``cache_dir`` where given)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, "-c", CHILD, engine, str(path), json.dumps(shapes), str(threads)]
    if cache_dir is not None and engine == "mnnpy":
        cmd.append(cache_dir)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} child failed: {(done.stderr.strip().splitlines() or [''])[-1][:300]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(bench.MODELS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cache-dir",
        action="store_true",
        help="mnnpy's children use a compilation cache (a new folder, filled by the untimed round): "
        "warm create + resize, issue 15's CPU floor",
    )
    args = ap.parse_args(argv)
    from mnnpy.converter import convert

    print("| model | engine | import ms | create ms | import + create ms | first run ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as d:
        for model in args.models:
            data, feeds = bench.load_models([model])[model]
            files = {"onnxruntime": Path(d) / f"{model}.onnx", "mnnpy": Path(d) / f"{model}.mnn"}
            files["onnxruntime"].write_bytes(data)
            files["mnnpy"].write_bytes(convert(data))
            shapes = {k: [list(v.shape), str(v.dtype)] for k, v in feeds.items()}
            cache_dir = str(Path(d) / f"{model}.cache") if args.cache_dir else None
            for engine, path in files.items():  # untimed: kernel files, disk caches
                child(engine, path, shapes, args.threads, cache_dir)
            got = {e: [] for e in files}
            for _ in range(args.rounds):
                for engine, path in files.items():
                    got[engine].append(child(engine, path, shapes, args.threads, cache_dir))
            med = {}
            for engine, rows in got.items():
                cols = [[r[0] for r in rows], [r[1] for r in rows], [r[0] + r[1] for r in rows], [r[2] for r in rows]]
                med[engine] = [statistics.median(c) for c in cols]
                cells = [f"{min(c):.0f}-{max(c):.0f} ({statistics.median(c):.0f})" for c in cols]
                print(f"| {model} | {engine} | {' | '.join(cells)} |", flush=True)
            r = [m / o for m, o in zip(med["mnnpy"], med["onnxruntime"])]
            print(f"| {model} | mnnpy / onnxruntime | {r[0]:.2f} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

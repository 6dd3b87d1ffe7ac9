"""A process's first session: each engine's import and first session creation in fresh
processes, the engines alternating, ``--rounds`` processes each (``bench.py``'s child:
import, then load the model and create and resize the session; mnnpy's ONNX conversion not
counted). Prints, per model, the range and median of each figure in ms and mnnpy's medians
over onnxruntime's.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench_fresh.py [--models ...] [--rounds 5]

mnnpy's kernels are loaded as machine code (``backends/cpu/kernels/native.py``) when this
machine has them (after one earlier process, the first round here makes sure of it); with
``MNNPY_NATIVE_KERNELS=0`` in the environment, through numba as before.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--models", nargs="+", default=["mobilenet_v2", "resnet18", "ppocr_det", "ppocr_rec", "ppocr_cls", "silero_vad"]
    )
    ap.add_argument("--engines", nargs="+", default=["onnxruntime", "mnnpy"])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    print("| model | engine | import ms | create ms | import + create ms |")
    print("| --- | --- | --- | --- | --- |")
    for model in args.models:
        for engine in args.engines:  # one untimed round: kernel files, disk caches
            bench.peak_rss_child(engine, model, args.threads)
        got = {e: [] for e in args.engines}
        for _ in range(args.rounds):
            for engine in args.engines:
                _, _, imported, created, _ = bench.peak_rss_child(engine, model, args.threads)
                got[engine].append((imported, created))
        med = {}
        for engine, rows in got.items():
            cols = [[r[0] for r in rows], [r[1] for r in rows], [r[0] + r[1] for r in rows]]
            med[engine] = [statistics.median(c) for c in cols]
            cells = [f"{min(c):.0f}-{max(c):.0f} ({statistics.median(c):.0f})" for c in cols]
            print(f"| {model} | {engine} | {' | '.join(cells)} |")
        if "onnxruntime" in med and "mnnpy" in med:
            r = [m / o for m, o in zip(med["mnnpy"], med["onnxruntime"])]
            print(f"| {model} | mnnpy / onnxruntime | {r[0]:.2f} | {r[1]:.2f} | {r[2]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

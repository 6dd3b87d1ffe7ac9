"""AUTO placement against single backends (issue 15): per model, sessions on ``auto``
(``fast_single_answer``), ``vulkan``, ``opencl`` and ``cpu``, timed in turns (12 rounds of 5
runs after 2 untimed ones each; the GPU sessions' order rotates every round; the CPU session
only in the first 2 rounds, its long runs would let the GPU's clocks drop before the next
session), medians in ms; auto's backends and its latency over the fastest single backend's.

    python bench/bench_auto.py MODELS_DIR      # the five .onnx files, as bench_compile_cache.py

Run ``mnnpy devices --measure`` first on the machine: auto places by measured capabilities.
"""

import collections
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mnnpy
from mnnpy.converter import convert

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_compile_cache import MODELS  # noqa: E402 - the five models and their input shapes

folder = sys.argv[1] if len(sys.argv) > 1 else sys.exit(__doc__)
for name, shape in MODELS.items():
    it = mnnpy.Interpreter(convert(open(f"{folder}/{name}.onnx", "rb").read()))
    sessions = {}
    for b in ("auto", "vulkan", "opencl", "cpu"):
        try:
            s = it.create_session(backend=b, preference="fast_single_answer") if b == "auto" else it.create_session(backend=b)
            s.resize({s.inputs[0].name: shape})
            sessions[b] = s
        except Exception as e:  # noqa: BLE001
            print(name, b, "failed:", type(e).__name__, str(e)[:200], flush=True)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feeds = {sessions["cpu"].inputs[0].name: x}
    for s in sessions.values():
        for _ in range(3):
            s.run(feeds)
    t = collections.defaultdict(list)
    order = [b for b in sessions if b != "cpu"]
    for rnd in range(12):
        order = order[1:] + order[:1]  # rotating: no session always first after a pause
        for b in order + (["cpu"] if rnd < 2 else []):
            s = sessions[b]
            for _ in range(2):
                s.run(feeds)  # untimed: the GPU's clocks back up after the CPU's runs
            t0 = time.perf_counter()
            for _ in range(5):
                s.run(feeds)
            t[b].append((time.perf_counter() - t0) / 5 * 1e3)
    med = {b: statistics.median(v) for b, v in t.items()}
    fastest = min((v, b) for b, v in med.items() if b != "auto")
    pl = sessions["auto"].placement
    count = collections.Counter(b for _, _, b, _ in pl.ops)
    print(
        f"{name}: "
        + "  ".join(f"{b} {v:.3f}" for b, v in med.items())
        + f"  | auto/fastest({fastest[1]}) {med['auto'] / fastest[0]:.2f} | auto ops per backend {dict(count)}",
        flush=True,
    )
    for n in pl.notes:
        print("   note:", n[:200])

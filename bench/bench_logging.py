"""What logging costs a run: one session run with ``mnnpy`` logging off and at DEBUG, one process.

    python bench/bench_logging.py [--backends cpu opencl vulkan] [--shape 1,3,64,64] [--runs 200]

The model is the stress suite's convolution net (``mnnpy.stress_suite.conv_model``, seeded
weights). Per backend: one session, resized once for ``--shape``; then blocks of ``--runs``
runs alternate between logging off (no handler, level WARNING) and DEBUG (a handler writing
to memory, as ``MNNPY_LOG=debug`` does to stderr), 5 blocks each. Reported: the median ms per
run of each block kind, their ratio and the log records that DEBUG's runs emitted (0: no
logging call is reached on the run path; ``mnnpy.log``).
"""

from __future__ import annotations

import argparse
import io
import logging
import statistics
import time

import numpy as np

from mnnpy import Interpreter, log
from mnnpy.backend import backend_availability
from mnnpy.stress_suite import conv_model

BLOCKS = 5  # blocks of each kind, alternating


class _Counter(logging.Handler):
    """Counts the records it sees."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        self.count += 1


def _block(session, x, runs: int) -> float:
    """Median ms of ``runs`` runs."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run({"x": x})
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(backend: str, shape: tuple[int, ...], runs: int) -> tuple[float, float, int]:
    """``(median ms off, median ms at DEBUG, records emitted by the DEBUG runs)``."""
    session = Interpreter(conv_model()).create_session(backend=backend)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    session.run({"x": x})  # resize and compile before timing
    counter, root = _Counter(), logging.getLogger(log.ROOT)
    root.addHandler(counter)
    off, on = [], []
    try:
        for _ in range(BLOCKS):
            log.configure(None)
            root.setLevel(logging.WARNING)
            off.append(_block(session, x, runs))
            log.configure("debug", io.StringIO())
            on.append(_block(session, x, runs))
    finally:
        log.configure(None)
        root.removeHandler(counter)
    return statistics.median(off), statistics.median(on), counter.count


def main() -> None:
    """Print a Markdown table: backend, ms per run off, at DEBUG, ratio, records."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", nargs="+", default=["cpu", "opencl", "vulkan"])
    p.add_argument("--shape", default="1,3,64,64", help="the input's shape (N,3,H,W)")
    p.add_argument("--runs", type=int, default=200, help="runs per block")
    args = p.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    print(f"input {shape}, {BLOCKS} blocks of {args.runs} runs each way, alternating\n")
    print("| backend | ms/run, logging off | ms/run, DEBUG | DEBUG/off | records during runs |")
    print("| --- | --- | --- | --- | --- |")
    for b in args.backends:
        ok, why = backend_availability(b)
        if not ok:
            print(f"| {b} | unavailable: {why} | | | |")
            continue
        off, on, records = measure(b, shape, args.runs)
        print(f"| {b} | {off:.3f} | {on:.3f} | {on / off:.3f} | {records} |")


if __name__ == "__main__":
    main()

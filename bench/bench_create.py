"""Session creation in one process, mnnpy against onnxruntime, alternating (issue 15's CPU floor).

Per model: mnnpy's ``Interpreter(bytes)`` (read), ``create_session(backend="cpu",
num_threads=T, cache_dir=...)`` (create) and ``resize`` to the input shape, with a
compilation cache that an untimed first session filled (warm: plan, Winograd weights) and
the model's skeleton from the first read (``mnnpy.model_memo``: read is then the SHA-256 of
the bytes and rebuilding the ``Net``); after ``close``, untimed, the wait for the closed
session's pages to be zeroed for the next (``page_pool.settle``), so that neither engine shares
the CPU with it; onnxruntime's ``InferenceSession(bytes)`` with ``intra_op_num_threads=T``. The two alternate,
``--rounds`` times each after ``--skip`` untimed rounds; medians and first quartiles in ms and
mnnpy's medians over onnxruntime's. Both engines' first sessions in a new process are
``bench_fresh.py --cache-dir``'s.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench_create.py [--models ppocr_det] [--rounds 31]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402


def _quartile(values: list[float]) -> float:
    return sorted(values)[len(values) // 4]


def measure(model: str, rounds: int, skip: int, threads: int) -> dict[str, list[float]]:
    """ms per round: ``read``, ``create``, ``resize``, ``mnnpy`` (their sum) and ``onnxruntime``."""
    import onnxruntime as ort

    import mnnpy
    from mnnpy.backends.cpu import page_pool
    from mnnpy.converter import convert

    data, feeds = bench.load_models([model])[model]
    mdata = convert(data)
    shapes = {k: v.shape for k, v in feeds.items()}
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    got: dict[str, list[float]] = {k: [] for k in ("read", "create", "resize", "mnnpy", "onnxruntime")}
    with tempfile.TemporaryDirectory(prefix="mnnpy-bench-create-") as cache:
        for r in range(skip + rounds):
            t0 = time.perf_counter()
            interp = mnnpy.Interpreter(mdata)
            t1 = time.perf_counter()
            session = interp.create_session(backend="cpu", num_threads=threads, cache_dir=cache)
            t2 = time.perf_counter()
            session.resize(shapes)
            t3 = time.perf_counter()
            session.close()
            page_pool.settle()  # its pages zeroed for the pool (untimed, as onnxruntime's teardown is)
            t4 = time.perf_counter()
            other = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
            t5 = time.perf_counter()
            del other
            if r >= skip:
                for k, v in zip(got, (t1 - t0, t2 - t1, t3 - t2, t3 - t0, t5 - t4)):
                    got[k].append(1e3 * v)
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["ppocr_det"])
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--skip", type=int, default=2, help="untimed rounds first (the first fills the cache)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    print("| model | read ms | create ms | resize ms | mnnpy ms (q1) | onnxruntime ms (q1) | mnnpy / onnxruntime |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for model in args.models:
        got = measure(model, args.rounds, max(1, args.skip), args.threads)
        med = {k: statistics.median(v) for k, v in got.items()}
        print(
            f"| {model} | {med['read']:.1f} | {med['create']:.1f} | {med['resize']:.1f} | {med['mnnpy']:.1f} "
            f"({_quartile(got['mnnpy']):.1f}) | {med['onnxruntime']:.1f} ({_quartile(got['onnxruntime']):.1f}) | "
            f"{med['mnnpy'] / med['onnxruntime']:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

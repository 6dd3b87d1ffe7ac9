"""Throughput of ``run_async`` with runs in flight against back-to-back ``run``, and the cost of
a fenced chain of two sessions against their device times (issue 14), same process.

For each backend: ``--runs`` runs back to back (``run``), then the same with ``--in-flight``
runs kept in flight (``run_async``), alternating ``--rounds`` times; runs per second, median
over rounds, and the ratio. Then ``--chains`` chains of two sessions of the model, the second
a ``run_fenced`` waiting for the first's fence (both ``measure_timing``): the median wall time
of a chain from the first call to the second fence, against the sum of the two runs'
on-device times (NNAPI ``Timing``), and the difference.

    python bench/bench_async.py MODEL.onnx [--shape 1,3,48,320] [--backends vulkan opencl cpu] [--runs 100]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def feeds_for(session, rng, first: tuple[int, ...] | None = None) -> dict:
    """Seeded inputs of the session's declared shapes (dynamic dims 1; ``first``: the first
    input's shape)."""
    out = {}
    for k, d in enumerate(session.inputs):
        shape = tuple(s if isinstance(s, int) and s > 0 else 1 for s in (d.shape or ()))
        if k == 0 and first is not None:
            shape = first
        out[d.name] = rng.standard_normal(shape).astype(d.dtype)
    return out


def throughput(session, feeds, runs: int, in_flight: int) -> float:
    """Runs per second: back to back (``in_flight`` 0) or that many ``run_async`` in flight."""
    t0 = time.perf_counter()
    if in_flight <= 0:
        for _ in range(runs):
            session.run(feeds)
    else:
        pending = []
        for _ in range(runs):
            if len(pending) >= in_flight:
                pending.pop(0).result()
            pending.append(session.run_async(feeds))
        for f in pending:
            f.result()
    return runs / (time.perf_counter() - t0)


def chain(a, b, feeds) -> tuple[float, float | None]:
    """One fenced chain a -> b: (wall µs from the first call to b's fence, sum of the two
    on-device µs or None where not measured)."""
    t0 = time.perf_counter()
    fa, ra = a.run_fenced(feeds, measure_timing=True)
    fb, rb = b.run_fenced(feeds, wait_for=[fa], measure_timing=True)
    fb.wait()
    wall = (time.perf_counter() - t0) * 1e6
    ta, tb = ra.result().timing, rb.result().timing
    device = None if ta.on_device_us is None or tb.on_device_us is None else ta.on_device_us + tb.on_device_us
    return wall, device


def main(argv=None) -> int:
    import mnnpy
    from mnnpy.converter import convert

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", help="an ONNX file")
    p.add_argument("--backends", nargs="+", default=["vulkan", "opencl", "cpu"])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--chains", type=int, default=50)
    p.add_argument("--shape", default=None, help="the first input's shape, e.g. 1,3,48,320 (PP-OCR rec)")
    args = p.parse_args(argv)
    interp = mnnpy.Interpreter(convert(args.model))
    rng = np.random.default_rng(0)
    print(
        f"| backend | run, runs/s | run_async x{args.in_flight}, runs/s | ratio "
        "| fenced chain of 2, µs | sum of on-device µs | chain - device, µs |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for backend in args.backends:
        try:
            a, b = interp.create_session(backend=backend), interp.create_session(backend=backend)
        except mnnpy.MnnpyError as e:
            print(f"| {backend} | unavailable: {e} | | | | | |")
            continue
        feeds = feeds_for(a, rng, tuple(int(v) for v in args.shape.split(",")) if args.shape else None)
        for s in (a, b):
            for _ in range(5):
                s.run(feeds)
        throughput(a, feeds, 10, args.in_flight)  # the lanes' contexts made (mnnpy.run_queue)
        lanes = f"lanes {a._queue.lanes}, sibling sessions {len(a._siblings)}"
        print(f"<!-- {backend}: {a.partitions().splitlines()[0]}; {lanes} -->")
        sync, asyn = [], []
        for _ in range(args.rounds):
            sync.append(throughput(a, feeds, args.runs, 0))
            asyn.append(throughput(a, feeds, args.runs, args.in_flight))
        walls, devices = [], []
        for _ in range(args.chains):
            w, d = chain(a, b, feeds)
            walls.append(w)
            devices.append(d)
        s_, a_ = statistics.median(sync), statistics.median(asyn)
        w = statistics.median(walls)
        dev = [d for d in devices if d is not None]
        d = statistics.median(dev) if dev else None
        dtext = f"{d:.0f}" if d is not None else "not measured"
        diff = f"{w - d:.0f}" if d is not None else "-"
        print(f"| {backend} | {s_:.1f} | {a_:.1f} | {a_ / s_:.2f} | {w:.0f} | {dtext} | {diff} |")
        a.close()
        b.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

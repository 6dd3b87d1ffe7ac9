"""Per-iteration cost of ONNX Loop on each backend, beside onnxruntime, one process.

    python bench/bench_loop.py [--iterations 10000] [--backends cpu opencl vulkan] [--output FILE]

The model: ``Loop(M, cond, x)`` whose body is three scalar ops on the carried value,
``x = x * 0.999 + 1`` (Mul, Add) and the condition ``cond = x < 1e9`` (Less): a counter-like
body where the loop's own overhead dominates. Each engine runs the whole Loop ``--repeat``
times (after one warm-up run, which plans the body); reported: the median ms of a whole run,
its per-iteration cost in µs, and the ratio to onnxruntime's. The floor of issue 11: 10,000
iterations under 1 s on the CPU backend (2-core machine).

``--timeout S``: also an endless Loop (no trip count, the condition always true) run with
``loop_timeout=S`` on each backend: the time until ``LoopTimeoutError``, against the floor
that it fires within 10% + 50 ms of the limit (and never before it).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from onnx import TensorProto, helper


def loop_model(opset: int = 17):
    """``y = Loop(M, cond=True, x)``: body ``x' = x * 0.999 + 1``, ``cond' = x' < 1e9``."""
    f32, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x_in", "k"], ["m"]),
            helper.make_node("Add", ["m", "one"], ["x_out"]),
            helper.make_node("Less", ["x_out", "big"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", i64, []),
            helper.make_tensor_value_info("cond_in", b, []),
            helper.make_tensor_value_info("x_in", f32, []),
        ],
        [helper.make_tensor_value_info("cond_out", b, []), helper.make_tensor_value_info("x_out", f32, [])],
        [
            helper.make_tensor("k", f32, [], [0.999]),
            helper.make_tensor("one", f32, [], [1.0]),
            helper.make_tensor("big", f32, [], [1e9]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x"], ["y"], body=body)],
        "loop",
        [
            helper.make_tensor_value_info("M", i64, []),
            helper.make_tensor_value_info("cond", b, []),
            helper.make_tensor_value_info("x", f32, []),
        ],
        [helper.make_tensor_value_info("y", f32, [])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm-up: plans the body once
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--backends", nargs="+", default=["cpu", "opencl", "vulkan"])
    p.add_argument("--timeout", type=float, default=0.5, help="loop_timeout of the endless Loop, s (0: skip)")
    p.add_argument("--output", help="also write the markdown table here")
    args = p.parse_args(argv)

    import mnnpy
    from mnnpy.apps.reference import onnxruntime_session
    from mnnpy.converter import convert

    model = loop_model()
    feeds = {"M": np.array(args.iterations, np.int64), "cond": np.array(True), "x": np.array(0.0, np.float32)}
    ort_s = onnxruntime_session(model.SerializeToString(), 1)
    rows = [("onnxruntime", _median_ms(lambda: ort_s.run(None, feeds), args.repeat))]
    interp = mnnpy.Interpreter(convert(model))
    for b in args.backends:
        try:
            s = interp.create_session(backend=b)
        except mnnpy.MnnpyError as e:
            print(f"{b}: skipped ({e})")
            continue
        rows.append((b, _median_ms(lambda s=s: s.run(feeds, loop_timeout=15), args.repeat)))
    timeouts = _timeouts(interp, args.backends, args.timeout) if args.timeout else []
    base = rows[0][1]
    lines = [
        f"Loop of {args.iterations} iterations, 3 scalar ops per body; median of {args.repeat} whole runs",
        "",
        "| engine | ms per run | µs per iteration | / onnxruntime |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {name} | {ms:.1f} | {ms * 1e3 / args.iterations:.1f} | {ms / base:.2f} |" for name, ms in rows]
    if timeouts:
        lines += [
            "",
            f"Endless Loop with loop_timeout={args.timeout:g} s: time until LoopTimeoutError "
            f"(floor: {args.timeout:g} s to {args.timeout * 1.1 + 0.05:.3f} s)",
            "",
            "| backend | s until the error | within the floor |",
            "| --- | --- | --- |",
        ]
        lines += [f"| {b} | {t:.3f} | {'yes' if args.timeout <= t <= args.timeout * 1.1 + 0.05 else 'NO'} |" for b, t in timeouts]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "a") as f:
            f.write("\n" + text + "\n")
    return 0


def _timeouts(interp, backends: list[str], limit: float) -> list[tuple[str, float]]:
    """Per backend: seconds from ``run`` until ``LoopTimeoutError`` on an endless Loop."""
    import mnnpy

    feeds = {"M": np.array(2**62, np.int64), "cond": np.array(True), "x": np.array(0.0, np.float32)}
    out = []
    for b in backends:
        try:
            s = interp.create_session(backend=b)
            s.run({**feeds, "M": np.array(2, np.int64)})  # plan the body first
        except mnnpy.MnnpyError:
            continue
        t0 = time.perf_counter()
        try:
            s.run({**feeds, "x": np.array(-1e30, np.float32)}, loop_timeout=limit)  # x stays below 1e9
        except mnnpy.LoopTimeoutError:
            out.append((b, time.perf_counter() - t0))
    return out


if __name__ == "__main__":
    raise SystemExit(main())

"""What recording device time costs a run that nobody reads it from, interleaved in one process.

    python bench/bench_device_time.py [--backend vulkan|opencl|both] [--rounds 20] [--runs 100]

Model: a small all-GPU chain, x (1, 16, 32, 32) -> Conv 3x3 (16 -> 16) -> Relu -> Conv 3x3 ->
Sigmoid -> Add x -> Relu -> y (6 ops, one partition), built in code (seeded).

Variants, each one session of the same model, run ``--runs`` times per round in an order that
alternates between rounds; the figure is the median over rounds of each round's mean run time
(µs, ``session.run``: upload, the partition, download), with the quartiles in brackets:

- Vulkan ``none``: no timestamps recorded (the session created as on a queue without them);
  ``untimed``: recorded, a plain ``run`` (the partition's command buffer submitted alone);
  ``timed``: ``run(measure_timing=True)`` (the partition between its two timestamps);
  ``timed+read``: the same, and ``device_time_us`` read after each run.
- OpenCL ``plain`` and ``untimed``: two sessions with plain runs (the runtime's queue without
  profiling, ``execute_partition`` flushing; two, to show the noise); ``timed``:
  ``run(measure_timing=True)`` (the profiling queue; ``execute_partition`` waits for its
  kernels); ``timed+read``: the same, and ``device_time_us`` read after each run.

``--tiny``: a one-op model (Relu on (1, 8, 16, 16)) instead, where a partition's fixed cost
weighs most.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.planner import PartitionStep


def tiny(rng):
    """One Relu on (1, 8, 16, 16), with its input."""
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    f32 = onnx.TensorProto.FLOAT
    io = [helper.make_tensor_value_info(n, f32, list(x.shape)) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", io[:1], io[1:])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), x


def model(rng):
    """The 6-op chain of the module docstring, with its input."""
    x = rng.standard_normal((1, 16, 32, 32)).astype(np.float32)
    w1, w2 = (rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1 for _ in range(2))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s"]),
        helper.make_node("Add", ["s", "x"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    f32 = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", f32, list(x.shape))],
        [helper.make_tensor_value_info("y", f32, list(x.shape))],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), x


def _reader(session):
    """A callable reading every partition's device time of ``session``'s current plan."""
    steps = [s for s in session.runner.plan.steps if isinstance(s, PartitionStep)]
    return lambda: [s.backend.device_time_us(s) for s in steps]


def vulkan_variants(interp, feeds) -> dict:
    """name -> run callable (see the module docstring)."""
    from mnnpy.backend import get_runtime

    rt = get_runtime("vulkan")
    period, rt.timestamp_period = rt.timestamp_period, 0.0  # as on a queue without timestamps
    try:
        none = interp.create_session(backend="vulkan")  # resized (recorded) here, for fixed shapes
        none.run(feeds)
    finally:
        rt.timestamp_period = period
    untimed, timed = interp.create_session(backend="vulkan"), interp.create_session(backend="vulkan")
    return _variants(none, untimed, timed, feeds)


def opencl_variants(interp, feeds) -> dict:
    """name -> run callable (see the module docstring)."""
    plain, untimed, timed = (interp.create_session(backend="opencl") for _ in range(3))
    return _variants(plain, untimed, timed, feeds)


def _variants(base, untimed, timed, feeds) -> dict:
    for s in (base, untimed):
        s.run(feeds)
    timed.run(feeds, measure_timing=True)
    steps = [s for s in timed.runner.plan.steps if isinstance(s, PartitionStep)]
    assert all(s.backend.device_time_us(s) for s in steps)
    read = _reader(timed)
    return {
        "none" if base.backends[0].name == "vulkan" else "plain": lambda: base.run(feeds),
        "untimed": lambda: untimed.run(feeds),
        "timed": lambda: timed.run(feeds, measure_timing=True),
        "timed+read": lambda: (timed.run(feeds, measure_timing=True), read()),
    }


def measure(variants: dict, rounds: int, runs: int) -> dict:
    """name -> (first quartile, median, third quartile) over rounds of the mean run time, µs
    (order alternating between rounds)."""
    names, times = list(variants), {n: [] for n in variants}
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            fn = variants[n]
            fn()
            t0 = time.perf_counter()
            for _ in range(runs):
                fn()
            times[n].append((time.perf_counter() - t0) / runs * 1e6)
    return {n: statistics.quantiles(v, n=4) for n, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="both", choices=["vulkan", "opencl", "both"])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--tiny", action="store_true", help="a one-op model")
    args = ap.parse_args()
    m, x = (tiny if args.tiny else model)(np.random.default_rng(0))
    interp = mnnpy.Interpreter(convert(m))
    feeds = {"x": x}
    for backend in ["vulkan", "opencl"] if args.backend == "both" else [args.backend]:
        make = vulkan_variants if backend == "vulkan" else opencl_variants
        result = measure(make(interp, feeds), args.rounds, args.runs)
        base = next(iter(result.values()))[1]
        line = ", ".join(
            f"{n} {q[1]:.1f} µs [{q[0]:.0f}-{q[2]:.0f}] ({(q[1] / base - 1) * 100:+.1f}%)" for n, q in result.items()
        )  # noqa: E501
        print(f"{backend}: {line}")


if __name__ == "__main__":
    main()

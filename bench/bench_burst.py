"""Per-run host overhead of mnnpy's executions against onnxruntime's ``InferenceSession.run``
on a one-op model (issue 14, NNAPI bursts), same process, interleaved.

A one-op model (``Relu`` on a small float32 tensor) costs almost nothing to compute, so a
run's time is its overhead: input checks, planning lookups, locks, copies in and out.
Reported per backend, µs per run (median of ``--blocks`` blocks of ``--runs`` runs, the
engines taking turns block by block): onnxruntime's ``run``, mnnpy's ``run``,
``burst().run`` and ``run_async(...).result()``, and each as a ratio to onnxruntime's.

    python bench/bench_burst.py [--backends cpu opencl vulkan] [--runs 1000] [--blocks 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from onnx import TensorProto, helper


def one_op_model(shape=(2, 3)) -> bytes:
    """ONNX bytes of ``y = Relu(x)``, ``x: float32 shape``."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "one_op", [x], [y])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what older onnxruntime releases read (opset 17 needs IR 8)
    return model.SerializeToString()


def per_run_us(calls: dict, runs: int, blocks: int) -> dict[str, float]:
    """Median µs per call of each of ``calls`` (name -> callable), blocks interleaved."""
    for f in calls.values():
        for _ in range(min(runs, 200)):
            f()
    out: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(blocks):
        for name, f in calls.items():
            t0 = time.perf_counter()
            for _ in range(runs):
                f()
            out[name].append((time.perf_counter() - t0) / runs * 1e6)
    return {k: statistics.median(v) for k, v in out.items()}


def main(argv=None) -> int:
    import mnnpy
    from mnnpy.apps.reference import onnxruntime_session
    from mnnpy.converter import convert

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", nargs="+", default=["cpu", "opencl", "vulkan"])
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--blocks", type=int, default=15)
    args = p.parse_args(argv)
    model = one_op_model()
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    ref = onnxruntime_session(model, 1)
    interp = mnnpy.Interpreter(convert(model))
    print("| backend | onnxruntime run | mnnpy run | burst.run | run_async + result | run / ORT | burst / ORT |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for backend in args.backends:
        try:
            s = interp.create_session(backend=backend)
        except mnnpy.MnnpyError as e:
            print(f"| {backend} | unavailable: {e} | | | | | |")
            continue
        burst = s.burst()
        feeds = {"x": x}
        t = per_run_us(
            {
                "ort": lambda: ref.run(None, feeds),
                "run": lambda: s.run(feeds),
                "burst": lambda: burst.run(feeds),
                "async": lambda: s.run_async(feeds).result(),
            },
            args.runs,
            args.blocks,
        )
        print(
            f"| {backend} | {t['ort']:.1f} | {t['run']:.1f} | {t['burst']:.1f} | {t['async']:.1f} "
            f"| {t['run'] / t['ort']:.2f} | {t['burst'] / t['ort']:.2f} |"
        )
        burst.close()
        s.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

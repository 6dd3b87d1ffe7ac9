"""Depthwise Conv on the CPU: the compiled (numba) kernel against the NumPy kernels and
onnxruntime, same process, interleaved.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/bench_depthwise.py [--threads 2] [--runs 40]

Rows: MobileNetV2's ten depthwise 3x3 layers at 224x224 input (each a one-op model
``Conv(group=C) -> Clip(0, 6)``, fused by the converter) and the whole MobileNetV2
(``bench/make_models.py``). Three engines per row, each ``--threads`` threads: mnnpy with the
numba kernel, mnnpy with the NumPy kernels (``depthwise_kernels`` patched to ``None``, as on
a machine without numba), onnxruntime (``intra_op_num_threads``). After a warm-up they run
in rotating blocks of ``BLOCK`` runs on one seeded input. Reported: median ms of each and
the ratios numba/ORT, NumPy/ORT and NumPy/numba.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import numpy as np
from onnx import helper, numpy_helper

import mnnpy
from mnnpy.apps.reference import onnxruntime_session
from mnnpy.backends.cpu.ops import depthwise
from mnnpy.converter import convert

HERE = Path(__file__).resolve().parent
BLOCK = 5
# MobileNetV2 at 224x224: (channels, input height = width, stride) of each depthwise layer
LAYERS = [
    (32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
    (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1),
]  # fmt: skip


def depthwise_model(c: int, hw: int, stride: int, seed: int = 0):
    """``(ONNX bytes, input)``: x (1, C, HW, HW) -> depthwise 3x3 Conv (pads 1) with bias -> Clip(0, 6)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, c, hw, hw)).astype(np.float32)
    inits = [
        numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype(np.float32) * 0.3, "w"),
        numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
        numpy_helper.from_array(np.array(0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6, np.float32), "hi"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["t"], group=c, pads=[1, 1, 1, 1], strides=[stride, stride]),
        helper.make_node("Clip", ["t", "lo", "hi"], ["y"]),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "dw", [vi("x", 1, list(x.shape))], [vi("y", 1, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString(), x


def mobilenet():
    spec = importlib.util.spec_from_file_location("make_models", HERE / "make_models.py")
    mm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mm)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    return mm.mobilenet_v2().SerializeToString(), x


def engines(onnx_bytes: bytes, x: np.ndarray, threads: int):
    """name -> session: mnnpy with numba, mnnpy with NumPy, onnxruntime; the mnnpy sessions
    are resized for ``x`` here (a model with a free batch axis resizes at its first run)."""
    so = onnxruntime_session(onnx_bytes, threads)
    data = convert(onnx_bytes)
    name = so.get_inputs()[0].name
    numba_s = mnnpy.Interpreter(data).create_session(backend="cpu", num_threads=threads)
    numba_s.run({name: x})
    real = depthwise.depthwise_kernels
    depthwise.depthwise_kernels = lambda: None
    try:
        numpy_s = mnnpy.Interpreter(data).create_session(backend="cpu", num_threads=threads)
        numpy_s.run({name: x})
    finally:
        depthwise.depthwise_kernels = real
    return {"numba": numba_s, "numpy": numpy_s, "ort": so}


def measure(onnx_bytes: bytes, x: np.ndarray, threads: int, runs: int) -> dict[str, float]:
    """Median ms per engine, interleaved in rotating blocks; outputs checked against onnxruntime."""
    sessions = engines(onnx_bytes, x, threads)
    name = sessions["ort"].get_inputs()[0].name
    calls = {
        "numba": lambda: sessions["numba"].run({name: x}),
        "numpy": lambda: sessions["numpy"].run({name: x}),
        "ort": lambda: sessions["ort"].run(None, {name: x}),
    }
    ref = calls["ort"]()[0]
    for k in ("numba", "numpy"):
        got = next(iter(calls[k]().values()))
        assert np.allclose(got, ref, atol=1e-3, rtol=1e-3), f"{k} differs from onnxruntime"
    times = {k: [] for k in calls}
    order = list(calls)
    for _ in range(2):
        for f in calls.values():
            f()
    for block in range(-(-runs // BLOCK)):
        for k in order[block % 3 :] + order[: block % 3]:
            for _ in range(BLOCK):
                t0 = time.perf_counter()
                calls[k]()
                times[k].append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.05)
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--layers-only", action="store_true")
    args = ap.parse_args(argv)
    rows = [(f"dw3x3 C={c} {hw}x{hw} s{s}", *depthwise_model(c, hw, s)) for c, hw, s in LAYERS]
    if not args.layers_only:
        rows.append(("MobileNetV2 224", *mobilenet()))
    print("| layer | numba ms | NumPy ms | ORT ms | numba/ORT | NumPy/ORT | NumPy/numba |")
    print("|---|---|---|---|---|---|---|")
    tot = {"numba": 0.0, "numpy": 0.0, "ort": 0.0}
    for label, data, x in rows:
        m = measure(data, x, args.threads, args.runs)
        if label.startswith("dw"):
            for k in tot:
                tot[k] += m[k]
        print(
            f"| {label} | {m['numba']:.3f} | {m['numpy']:.3f} | {m['ort']:.3f} | "
            f"{m['numba'] / m['ort']:.2f} | {m['numpy'] / m['ort']:.2f} | {m['numpy'] / m['numba']:.2f} |",
            flush=True,
        )
    print(
        f"| sum of the ten layers | {tot['numba']:.3f} | {tot['numpy']:.3f} | {tot['ort']:.3f} | "
        f"{tot['numba'] / tot['ort']:.2f} | {tot['numpy'] / tot['ort']:.2f} | {tot['numpy'] / tot['numba']:.2f} |"
    )


if __name__ == "__main__":
    main()

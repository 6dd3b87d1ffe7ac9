"""A chain of two sessions on one device, host arrays against device tensors (issue 14,
item 6: NNAPI memory domains).

Session A (``y = Sigmoid(Relu(x))``) feeds session B (``z = Tanh(2 y)``), both on the same
backend, ``x: float32 (1, C, H, W)``. Reported per backend and size, ms per chain (median of
``--blocks`` blocks of ``--runs`` chains, the two ways taking turns block by block):

- ``host``: ``b.run({"x": a.run(feeds)["y"]})``: A's output downloaded into a new array,
  then uploaded into B;
- ``device``: ``b.run({"x": a.run(feeds, outputs_on_device=True)["y"]})``: copied device to
  device (OpenCL ``clEnqueueCopyBuffer``; Vulkan ``vkCmdCopyBuffer`` in B's partition);
- ``fenced``: the device chain as two fenced runs, B fed ``fa.output("y")`` and waiting for
  A's fence, the result awaited.

Then ``--chains`` fenced chains (A's output left on the device), ended two ways: at B's
fence (B's output left on the device too) and with B's output read on the host. Each: the
median wall time of a chain (µs, from A's call to the end) beside the median sum of A's and
B's on-device µs (NNAPI ``Timing``, from ``--chains`` timed runs of each in the same output
mode, taken in blocks of 10 in turns with blocks of 10 chains: a timed run waits for its
device work, so a timed chain would not be the chain measured), and the difference (issue 14's H200 floor: at most
100 µs; ``fenced_chains``). On
Vulkan A's fenced run only submits (from the caller's thread) and B's is ordered after it by
the queue (``mnnpy.fence``).

``--model conv``: A and B each three 3x3 convolutions (C -> 256 -> 256 -> C channels, ReLU
between), so that the device computes for longer than the host hands work over.

    python bench/bench_device_chain.py [--backends opencl vulkan] [--sizes 16x64x64 64x128x128] [--model conv]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper


def _model(nodes, shape, inits=()) -> bytes:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "chain", [x], [y], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def models(shape, kind: str = "elementwise") -> tuple[bytes, bytes]:
    """ONNX bytes of A and B for input ``shape`` (``kind``: module doc)."""
    if kind == "conv":
        return _convs(shape, 1), _convs(shape, 2)
    a = _model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])], shape)
    two = helper.make_tensor("two", TensorProto.FLOAT, (), [2.0])
    b = _model([helper.make_node("Mul", ["x", "two"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])], shape, [two])
    return a, b


def _convs(shape, seed: int, width: int = 256) -> bytes:
    """x (1, C, H, W) -> Conv 3x3 C->width -> Relu -> Conv width->width -> Relu -> Conv width->C -> y."""
    rng, c = np.random.default_rng(seed), shape[1]
    nodes, inits, prev = [], [], "x"
    for k, (ci, co) in enumerate([(c, width), (width, width), (width, c)]):
        w = (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(9 * ci)).astype(np.float32)
        inits.append(helper.make_tensor(f"w{k}", TensorProto.FLOAT, w.shape, w.ravel()))
        out = "y" if k == 2 else f"c{k}"
        nodes.append(helper.make_node("Conv", [prev, f"w{k}"], [out], pads=[1, 1, 1, 1]))
        if k < 2:
            nodes.append(helper.make_node("Relu", [out], [f"r{k}"]))
            out = f"r{k}"
        prev = out
    return _model(nodes, shape, inits)


def ms_per_chain(calls: dict, runs: int, blocks: int) -> dict[str, float]:
    """Median ms per call of each of ``calls`` (name -> callable), blocks interleaved
    (``bench_burst.per_run_us``)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_burst import per_run_us

    return {k: us / 1e3 for k, us in per_run_us(calls, runs, blocks).items()}


def main() -> None:
    import mnnpy
    from mnnpy.backend import backend_availability
    from mnnpy.converter import convert

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", nargs="+", default=["cpu", "opencl", "vulkan"])
    p.add_argument("--sizes", nargs="+", default=["16x64x64", "64x128x128"], help="C x H x W of the (1, C, H, W) input")
    p.add_argument("--precision", default="normal", choices=("high", "normal", "low"))
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--blocks", type=int, default=5)
    p.add_argument("--chains", type=int, default=30)
    p.add_argument("--model", default="elementwise", choices=("elementwise", "conv"))
    args = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'backend':8} {'input':>18} {'host ms':>9} {'device ms':>10} {'fenced ms':>10} {'host/device':>6}")
    for backend in args.backends:
        ok, why = backend_availability(backend)
        if not ok:
            print(f"{backend:8} skipped: {why}")
            continue
        for size in args.sizes:
            shape = (1, *(int(d) for d in size.split("x")))
            ma, mb = models(shape, args.model)
            a = mnnpy.Interpreter(convert(ma)).create_session(backend=[backend, "cpu"], precision=args.precision)
            b = mnnpy.Interpreter(convert(mb)).create_session(backend=[backend, "cpu"], precision=args.precision)
            feeds = {"x": rng.standard_normal(shape, dtype=np.float32)}
            want = b.run({"x": a.run(feeds)["y"]})["y"]
            got = b.run({"x": a.run(feeds, outputs_on_device=True)["y"]}, outputs_on_device=True)["y"].numpy()
            np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)

            def fenced():
                fa, _ = a.run_fenced(feeds, outputs_on_device=True)
                return b.run_fenced({"x": fa.output("y")}, wait_for=[fa])[1].result()

            calls = {
                "host": lambda: b.run({"x": a.run(feeds)["y"]}),
                "device": lambda: b.run({"x": a.run(feeds, outputs_on_device=True)["y"]}),
                "fenced": fenced,
            }
            t = ms_per_chain(calls, args.runs, args.blocks)
            chain = fenced_chains(a, b, feeds, args.chains)
            print(
                f"{backend:8} {str(shape):>18} {t['host']:9.3f} {t['device']:10.3f} {t['fenced']:10.3f} "
                f"{t['host'] / t['device']:6.2f}"
            )
            for end, (wall, dev) in chain.items():
                gap = f"{wall - dev:.0f}" if dev is not None else "n/a"
                dev = f"{dev:.0f}" if dev is not None else "n/a"
                print(f"{'':28} fenced chain to {end}: {wall:.0f} µs, on device {dev} µs, gap {gap} µs")


def fenced_chains(a, b, feeds: dict, chains: int, block: int = 10) -> dict[str, tuple[float, float | None]]:
    """``end -> (median wall µs, median on-device µs of A + B)`` of ``chains`` fenced chains
    A -> B, A's output left on the device, for two ends: ``"B's fence"`` (B's output on the
    device too, the chain done when ``fb.wait()`` returns: NNAPI's fenced chain, complete
    when its last sync fence signals) and ``"B's output on the host"`` (``future.result()``
    gives host arrays). The device times come from timed runs of A and B in the same output
    mode (a timed run waits for its device work, so a timed chain would not be the chain
    measured): ``block`` chains back to back, then ``block`` timed runs of each, in turns."""
    out = {}
    for end, on_device in (("B's fence", True), ("B's output on the host", False)):
        walls, devices = [], []
        while len(walls) < chains:
            for _ in range(block):
                t0 = time.perf_counter()
                fa, _ = a.run_fenced(feeds, outputs_on_device=True)
                fb, result = b.run_fenced({"x": fa.output("y")}, wait_for=[fa], outputs_on_device=on_device)
                fb.wait() if on_device else result.result()
                walls.append((time.perf_counter() - t0) * 1e6)
            for _ in range(block):
                ta = a.run(feeds, outputs_on_device=True, measure_timing=True).timing
                tb = b.run({"x": a.run(feeds, outputs_on_device=True)["y"]}, outputs_on_device=on_device, measure_timing=True)
                if ta.on_device_us is not None and tb.timing.on_device_us is not None:
                    devices.append(ta.on_device_us + tb.timing.on_device_us)
        out[end] = (statistics.median(walls), statistics.median(devices) if devices else None)
    return out


if __name__ == "__main__":
    main()

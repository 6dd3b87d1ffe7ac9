"""The AUTO cost model's constants (``mnnpy.placement``), measured with a device's capabilities.

``measure(device_id, scale, runs, float32_cpu_us)`` returns ``CostConstants``:

- ``cpu_us_per_mflop``: the CPU backend's µs per MFLOP on the float32 reference workload
  (MobileNetV2: its median CPU time, from the capabilities' own measurement, over its MFLOPs,
  the op schemas' FLOPs rules); it turns an op's MFLOPs into µs.
- ``copy_latency_us`` and ``bandwidth`` (bytes per µs) of host <-> device copies: a one-op
  model ``y = Relu(x)`` run on the device with ``x`` of ``SMALL`` and of ``LARGE[scale]``
  float32 elements; per size the least over ``max(runs, MIN_RUNS)`` runs (after a warm-up) of
  the run's in-driver time less its on-device time (the kernel), which is one copy in and one
  out (the least: noise only adds time). Latency: half the small
  run's; bandwidth: the bytes the large run copies beyond the small one over the extra time.

A value that cannot be measured (no time difference, a device that cannot run the op) is
None: the cost model then keeps its documented default (``mnnpy.auto_devices``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

SMALL = 256  # float32 elements (1 KiB) of the latency run
LARGE = {"full": 1 << 23, "tiny": 1 << 22}  # float32 elements of the bandwidth run: 32 MiB, 16 MiB (beyond caches)
MIN_RUNS = 7  # timed runs per size at least (a copy takes µs: one run is noise)


class CostConstants(NamedTuple):
    """Measured cost constants of one device (module doc); None where not measured."""

    cpu_us_per_mflop: float | None
    copy_latency_us: float | None
    bandwidth: float | None  # bytes per µs (= MB/s)


def measure(device_id: str, scale: str, runs: int, float32_cpu_us: float | None) -> CostConstants:
    """The constants of ``device_id`` (a device name, ``"vulkan:0"``); ``float32_cpu_us``: the
    CPU backend's median µs on the float32 workload (None: not measured)."""
    small, large = _copy_us(device_id, SMALL, runs), _copy_us(device_id, LARGE[scale], runs)
    latency = small / 2 if math.isfinite(small) and small > 0 else None
    extra = large - small
    bandwidth = 2 * 4 * (LARGE[scale] - SMALL) / extra if math.isfinite(extra) and extra > 0 else None
    return CostConstants(_us_per_mflop(scale, float32_cpu_us), latency, bandwidth)


def _us_per_mflop(scale: str, cpu_us: float | None) -> float:
    """``cpu_us`` over the MFLOPs of the float32 workload at ``scale`` (None without a time)."""
    from mnnpy.capability_workloads import mobilenet
    from mnnpy.converter import convert
    from mnnpy.interpreter import Interpreter

    if cpu_us is None or not math.isfinite(cpu_us):
        return None
    model, feeds = mobilenet(scale)
    with Interpreter(convert(model)).create_session(backend="cpu") as session:
        session.resize({k: v.shape for k, v in feeds.items()})
        mflops = sum(m for _, _, m in session.op_mflops())
    return cpu_us / mflops if mflops > 0 else None


def _copy_us(device_id: str, n: int, runs: int) -> float:
    """Least µs the copies of a run of ``Relu`` over ``n`` float32 elements took on ``device_id``
    over ``max(runs, MIN_RUNS)`` runs (in-driver less on-device time); ``nan`` when the device
    gives no driver time or cannot run it."""
    from onnx import TensorProto, helper

    from mnnpy.converter import convert
    from mnnpy.interpreter import Interpreter

    x = np.random.default_rng(15).standard_normal((1, n)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "copy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
    )
    interp = Interpreter(convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])))
    try:
        with interp.create_session(backend=device_id) as session:
            session.run({"x": x})
            times = []
            for _ in range(max(runs, MIN_RUNS)):
                timing = session.run({"x": x}, measure_timing=True).timing
                if timing.in_driver_us is None:
                    return math.nan
                times.append(timing.in_driver_us - (timing.on_device_us or 0.0))
    except Exception:  # noqa: BLE001 - a device that cannot run it: not measured
        return math.nan
    return float(min(times))

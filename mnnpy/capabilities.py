"""A device's performance relative to the CPU backend (NNAPI's ``Capabilities``), measured and cached.

``capabilities(device)`` (also ``Device.capabilities()``) returns NNAPI's ``Capabilities``
(``hardware/interfaces/neuralnetworks/1.3/types.hal``): a ``PerformanceInfo(exec_time,
power_usage)`` for float32 relaxed to float16 (``relaxedFloat32toFloat16PerformanceScalar``
and ``...Tensor``: one measurement for both), per operand type (``operandPerformance``:
``TENSOR_FLOAT32``, ``TENSOR_QUANT8_ASYMM``, ``TENSOR_INT32``, ``TENSOR_BOOL8``), and for
control flow (``ifPerformance``, ``whilePerformance``). Values are ratios, lower is better:
the device's time on a reference workload (``mnnpy.capability_workloads``) over the CPU
backend's time on the same workload, measured in the same call; the CPU device is the
reference, 1.0 everywhere, by definition (not measured).

Time per workload: the median over ``runs`` runs (after one warm-up run) of the run's
``Timing.on_device_us`` (the device's own clock on a GPU; the kernels' wall time on the
CPU), or ``in_driver_us`` (the backends' wall time) where a device gave no device time; for
``if``/``while`` always ``in_driver_us``, since the host steps of control flow are what
those fields price. A workload with an op the device does not support (``supported_ops``;
the host's control-flow ops aside; the ops of If/Loop bodies are placed at run time and
not checked here) gets ``exec_time = inf`` (NNAPI's ``FLT_MAX``: "cannot
run") and the reason in ``Capabilities.reasons``.

``power_usage``: mnnpy has no power meter. On a device of type ``cpu`` (lavapipe, PoCL: the
same cores as the CPU backend, drawing the same power while busy) energy is proportional to
time, so ``power_usage = exec_time`` (documented in ``Capabilities.power``); on any other
device it is ``nan`` (not measured), never a guess.

Cache: measured once per device, driver, mnnpy version and scale, in ``<cache_dir()>/
capabilities/`` (``$MNNPY_CAPABILITIES_CACHE`` moves it, ``0`` turns it off), one file per
device in ``mnnpy.cache_file``'s format (key and SHA-256 checked on the bytes read, written
atomically). A damaged or edited file, or one of another device, driver or mnnpy version, is
measured again with a ``RuntimeWarning``, never trusted. Calls return the cached values.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from mnnpy import cache_file
from mnnpy.capability_workloads import SCALES, WORKLOADS, Workload
from mnnpy.errors import BackendUnavailableError, InputError

CACHE_ENV = "MNNPY_CAPABILITIES_CACHE"
MAGIC, FORMAT = b"MNNPYCAP", 1
# operandPerformance's operand types: workload name -> NNAPI OperandType
OPERAND_TYPES = {"float32": "TENSOR_FLOAT32", "quant8": "TENSOR_QUANT8_ASYMM", "int32": "TENSOR_INT32", "bool": "TENSOR_BOOL8"}
LABELS = {
    "float32": "float32",
    "relaxed": "float32 relaxed to float16",
    "quant8": "int8 quantized (uint8 asymm)",
    "int32": "int32",
    "bool": "bool",
    "if": "If",
    "while": "While (Loop)",
}
RUNS = {"full": 5, "tiny": 3}  # timed runs per workload and backend, by default
POWER_PROXY = "power_usage = exec_time: a device of type cpu runs on the CPU backend's cores (energy ~ time)"
REFERENCE = "the CPU backend: the reference, 1.0 by definition"
NO_POWER = "power_usage not measured (nan): mnnpy has no power meter for a device of type {type}"
_NO_CACHE: dict[str, Capabilities] = {}  # key -> values, when the disk cache is off (stable per process)


class PerformanceInfo(NamedTuple):
    """NNAPI's ``PerformanceInfo``: ``exec_time`` and ``power_usage``, each relative to the CPU
    backend (a ratio, no unit; lower is better; ``inf``: cannot run, NNAPI's ``FLT_MAX``;
    ``nan``: not measured)."""

    exec_time: float
    power_usage: float


@dataclass(frozen=True)
class Capabilities:
    """NNAPI's ``Capabilities`` of one device (module docstring): ``performance`` maps each
    workload name of ``mnnpy.capability_workloads.WORKLOADS`` to its ``PerformanceInfo``;
    ``reasons``: workload name -> why it is ``inf`` (or a note); ``power``: how ``power_usage``
    was derived; ``scale``, ``runs``: the workloads' size and the timed runs per backend;
    ``times_us``: workload name -> (device, CPU) median µs (empty for the CPU);
    ``cpu_us_per_mflop``, ``copy_latency_us`` (µs), ``bandwidth`` (host <-> device bytes per
    µs): the AUTO cost model's constants measured with them (``mnnpy.cost_constants``; None:
    not measured, as for the CPU)."""

    device: str
    performance: Mapping[str, PerformanceInfo]
    reasons: Mapping[str, str] = field(default_factory=dict)
    power: str = ""
    scale: str = "full"
    runs: int = 0
    times_us: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    cpu_us_per_mflop: float | None = None
    copy_latency_us: float | None = None
    bandwidth: float | None = None

    @property
    def relaxed_float32_to_float16_performance_scalar(self) -> PerformanceInfo:
        """NNAPI ``relaxedFloat32toFloat16PerformanceScalar`` (the ``relaxed`` workload)."""
        return self.performance["relaxed"]

    @property
    def relaxed_float32_to_float16_performance_tensor(self) -> PerformanceInfo:
        """NNAPI ``relaxedFloat32toFloat16PerformanceTensor`` (the ``relaxed`` workload)."""
        return self.performance["relaxed"]

    @property
    def operand_performance(self) -> dict[str, PerformanceInfo]:
        """NNAPI ``operandPerformance``: NNAPI OperandType name -> ``PerformanceInfo``."""
        return {nnapi: self.performance[name] for name, nnapi in OPERAND_TYPES.items()}

    @property
    def if_performance(self) -> PerformanceInfo:
        """NNAPI ``ifPerformance``."""
        return self.performance["if"]

    @property
    def while_performance(self) -> PerformanceInfo:
        """NNAPI ``whilePerformance``."""
        return self.performance["while"]

    def table(self) -> list[str]:
        """Lines: per workload, its label, exec_time, power_usage and the reason where there is one."""
        out = [f"capabilities of {self.device} (relative to the CPU backend; lower is better; {self.scale} workloads)"]
        out.append(f"  {'':<30}{'exec_time':>10}{'power_usage':>13}")
        for name, perf in self.performance.items():
            why = self.reasons.get(name, "")
            out.append(f"  {LABELS[name]:<30}{perf.exec_time:>10.3g}{perf.power_usage:>13.3g}" + (f"  ({why})" if why else ""))
        if None not in (self.cpu_us_per_mflop, self.copy_latency_us, self.bandwidth):
            out.append(
                f"  cost model: CPU backend {self.cpu_us_per_mflop:.3g} µs per MFLOP; copies {self.copy_latency_us:.3g} µs"
                f" + {self.bandwidth / 1e3:.3g} GB/s"
            )
        return out + ([f"  {self.power}"] if self.power else [])

    def to_json(self) -> bytes:
        """The values as JSON (``inf``/``nan`` as JSON's ``Infinity``/``NaN``)."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Capabilities:
        """The inverse of ``to_json``; ValueError (KeyError, TypeError) on a malformed document."""
        d = json.loads(data)
        stored = d.pop("performance")
        if set(stored) != {w.name for w in WORKLOADS}:
            raise ValueError("another set of workloads")
        perf = {w.name: PerformanceInfo(*map(float, stored[w.name])) for w in WORKLOADS}  # in WORKLOADS' order
        times = {k: tuple(v) for k, v in d.pop("times_us").items()}
        return cls(performance=perf, times_us=times, **d)


def _key(device, scale: str, version: str | None = None) -> str:
    """What a cache file must be for: the device, its driver, the mnnpy version and the scale."""
    from mnnpy import __version__

    parts = (device.backend, device.name, device.driver_version, device.feature_level, version or __version__)
    return "capabilities|{}|{}|driver {}|{}|mnnpy {}|".format(*parts) + scale


def cache_path(device, scale: str = "full") -> Path | None:
    """The device's cache file (named by backend, index and name), or None when the cache is off."""
    folder = cache_file.resolve_directory(CACHE_ENV, "capabilities", "capabilities")
    if folder is None:
        return None
    tag = hashlib.sha256(f"{device.backend}|{device.index}|{device.name}".encode()).hexdigest()[:16]
    return folder / f"{device.backend}-{device.index}-{tag}-{scale}.cap"


def _stored_key(data: bytes) -> str:
    """The key a cache file says it is for (for the warning), or ``?``."""
    try:
        _, _, klen = cache_file.HEAD.unpack_from(data)
        return data[cache_file.HEAD.size : cache_file.HEAD.size + klen].decode()
    except Exception:  # noqa: BLE001 - only for a message
        return "?"


def load_cached(device, scale: str = "full") -> tuple[Capabilities | None, str]:
    """The cached capabilities, or ``(None, why not)``: absent, or rejected (what is wrong). Never raises."""
    path, key = cache_path(device, scale), _key(device, scale)
    if path is None:
        return _NO_CACHE.get(key), "disk cache off"
    try:
        data = cache_file.read_limited(path, 1 << 20)
        if data is None:
            return None, "not measured"
        payload = cache_file.unpack(data, MAGIC, FORMAT, key)
        return Capabilities.from_json(payload), ""
    except ValueError as e:
        why = f"written for {_stored_key(data)!r}" if str(e) == "entry of another key" else str(e)
        return None, f"cache file {path} rejected: {why}"
    except (OSError, KeyError, TypeError) as e:
        return None, f"cache file {path} rejected: {type(e).__name__} {e}"


def _store(device, scale: str, caps: Capabilities) -> None:
    """Write ``caps`` to the cache (atomically); a folder or file that cannot be written: a warning."""
    key, path = _key(device, scale), cache_path(device, scale)
    if path is None or cache_file.usable_directory(path.parent, "capabilities", stacklevel=4) is None:
        _NO_CACHE[key] = caps
        return
    try:
        cache_file.atomic_write(path, cache_file.pack(MAGIC, FORMAT, key, caps.to_json()))
    except OSError as e:
        _NO_CACHE[key] = caps
        warnings.warn(f"capabilities cache not written: {path}: {e}", RuntimeWarning, stacklevel=4)


def capabilities(
    device, scale: str = "full", runs: int | None = None, progress: Callable[[str], None] | None = None
) -> Capabilities:
    """The capabilities of ``device`` (a ``Device`` or a device name, ``"vulkan:1"``): cached
    ones when valid, else measured now (``measure``) and cached. ``scale``: ``"full"`` or
    ``"tiny"`` workloads (``mnnpy.capability_workloads``); ``runs``: timed runs per workload
    and backend (default ``RUNS[scale]``); ``progress(workload name)`` after each workload.
    Raises ``InputError`` (a bad scale or runs, a malformed name) or
    ``BackendUnavailableError`` (an unknown or unusable device)."""
    from mnnpy.device import get_device

    dev = get_device(device)
    if not dev.available:
        raise BackendUnavailableError(f"device '{dev.id}' is unavailable: {dev.reason}")
    _check(scale, runs)
    cached, why = load_cached(dev, scale)
    if cached is not None:
        return cached
    if why.startswith("cache file"):
        warnings.warn(f"{why}; measuring the capabilities of {dev.id} again", RuntimeWarning, stacklevel=2)
    caps = measure(dev, scale, runs, progress)
    _store(dev, scale, caps)
    return caps


def _check(scale: str, runs: int | None) -> None:
    if scale not in SCALES:
        raise InputError(f"scale must be one of {SCALES}, got {scale!r}")
    if runs is not None and (not isinstance(runs, int) or isinstance(runs, bool) or runs < 1):
        raise InputError(f"runs must be an integer >= 1, got {runs!r}")


def measure(device, scale: str = "full", runs: int | None = None, progress=None) -> Capabilities:
    """Time every workload on ``device`` (a ``Device``) and on the CPU backend; no cache."""
    runs = runs or RUNS[scale]
    if device.backend == "cpu":
        for w in WORKLOADS:
            if progress:
                progress(w.name)
        one = PerformanceInfo(1.0, 1.0)
        return Capabilities(
            device.id, {w.name: one for w in WORKLOADS}, {}, "the CPU backend: the reference, 1.0 by definition", scale, runs
        )
    perf, reasons, times = {}, {}, {}
    proxy = device.type == "cpu"
    for w in WORKLOADS:
        t, why = _workload_times(device.id, w, scale, runs)
        ratio = math.inf if t is None else t[0] / t[1]
        perf[w.name] = PerformanceInfo(ratio, ratio if proxy or t is None else math.nan)
        if why:
            reasons[w.name] = why
        if t is not None:
            times[w.name] = t
        if progress:
            progress(w.name)
    power = POWER_PROXY if proxy else NO_POWER.format(type=device.type)
    from mnnpy.cost_constants import measure as measure_costs

    costs = measure_costs(device.id, scale, runs, times["float32"][1] if "float32" in times else None)
    return Capabilities(device.id, perf, reasons, power, scale, runs, times, *costs)


def _workload_times(device_id: str, w: Workload, scale: str, runs: int) -> tuple[tuple[float, float] | None, str]:
    """(device µs, CPU µs) medians of workload ``w``, or ``(None, why it cannot run on the device)``."""
    from mnnpy.converter import convert
    from mnnpy.interpreter import Interpreter
    from mnnpy.supported_ops import HOST

    model, feeds = w.build(scale)
    interp = Interpreter(convert(model))
    bad = [o for o in interp.supported_ops(device_id) if o.supported is False and o.reason != HOST]
    if bad:
        return None, "; ".join(f"{o.type} '{o.name}': {o.reason}" for o in bad[:2])
    driver = w.name in ("if", "while")
    return (
        _median_us(interp, device_id, w.precision, feeds, runs, driver),
        _median_us(interp, "cpu", w.precision, feeds, runs, driver),
    ), ""


def _median_us(interp, backend: str, precision: str, feeds, runs: int, driver: bool) -> float:
    """Median µs of ``runs`` runs after one warm-up: device time (``driver``: in-driver time; wall time as the fallback)."""
    with interp.create_session(backend=backend, precision=precision) as session:
        session.run(feeds)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            timing = session.run(feeds, measure_timing=True).timing
            wall = (time.perf_counter() - t0) * 1e6
            us = timing.in_driver_us if driver else timing.on_device_us
            times.append(us if us is not None else timing.in_driver_us if timing.in_driver_us is not None else wall)
    return float(statistics.median(times))

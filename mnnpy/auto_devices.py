"""The candidate devices of ``backend="auto"`` and the figures the cost model prices them by.

Candidates: every available device (``mnnpy.devices()``), or those of ``devices=[...]``
(``Device`` objects or names), the CPU backend always last (it runs what no other
candidate supports, and the host steps). Per device, the figure per operand type is its
``PerformanceInfo`` relative to the CPU (``mnnpy.capabilities``): ``exec_time`` for
``fast_single_answer``/``sustained_speed``, ``power_usage`` for ``low_power`` (``exec_time``
where power was not measured, said in the notes).

Where they come from (decided so that ``create_session`` never measures: a tiny measurement
takes 2-3 s per device here): the capabilities cached by ``device.capabilities()`` or
``mnnpy devices --measure`` (full workloads, else tiny ones). A device with none cached gets
the default ordering auto had before measured figures: ``DEFAULT_FIGURE`` (0.5 x CPU for
every operand type) where its Runtime's ``in_auto`` takes it (a GPU or accelerator), in
registration order on ties (Vulkan before OpenCL); left out otherwise (a CPU device behind a
GPU API: lavapipe, PoCL). The copy latency and bandwidth of a device, and the CPU backend's
µs per MFLOP, are those measured with the cached capabilities (``mnnpy.cost_constants``),
else the defaults (``COPY_LATENCY_US``, ``BANDWIDTH``, ``CPU_US_PER_MFLOP``). A device no
faster than the CPU for any operand type is left out
before its backend is made (it could win no op: its copies only add cost). Every decision
is a line of ``session.placement.notes``.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence

from mnnpy.errors import BackendUnavailableError, InputError
from mnnpy.placement import (
    COPY_LATENCY_US,
    CPU_US_PER_MFLOP,
    DEFAULT_PREFERENCE,
    OPERAND_KINDS,
    PREFERENCES,
    AutoPlacer,
    MnnpyDevice,
)

DEFAULT_FIGURE = 0.5  # an unmeasured device that Runtime.in_auto takes: assumed 2x the CPU
# host <-> device bandwidth, bytes per µs: 8 GB/s (PCIe 4.0 x16 through a staging buffer) for a
# GPU or accelerator, 4 GB/s (a memcpy through the driver) for a CPU device behind a GPU API
BANDWIDTH = {"gpu": 8e3, "accelerator": 8e3, "cpu": 4e3, "other": 4e3}
FALLBACK_ONLY = 1e9  # the CPU's figure when devices=[...] leaves it out: it runs only what no candidate can
MEASURE_HINT = "`mnnpy devices --measure` measures them"
NO_POWER = "; power_usage not measured: exec_time used"


def check_preference(preference: str | None) -> str:
    """``preference`` or the default (NNAPI's ``PREFER_FAST_SINGLE_ANSWER``); ``InputError`` if unknown."""
    if preference is None:
        return DEFAULT_PREFERENCE
    if preference not in PREFERENCES:
        raise InputError(f"preference must be one of {tuple(PREFERENCES)}, got {preference!r}")
    return preference


def cached_capabilities(device):
    """``(Capabilities, scale)`` cached for ``device`` (full workloads first), or ``(None, "")``;
    a cache file that is damaged or made for something else is a ``RuntimeWarning``."""
    from mnnpy.capabilities import load_cached

    for scale in ("full", "tiny"):
        caps, why = load_cached(device, scale)
        if caps is not None:
            return caps, scale
        if why.startswith("cache file"):  # damaged or foreign: said, not trusted (mnnpy devices --measure remakes it)
            warnings.warn(f"capabilities of {device.id}: {why}; AUTO placement leaves it out", RuntimeWarning, 2)
    return None, ""


def _figures(caps, preference: str) -> tuple[dict[str, float], bool]:
    """Operand kind -> figure from ``caps``, and whether power_usage was missing (exec_time used)."""
    out, missing = {}, False
    for kind in OPERAND_KINDS:
        perf = caps.performance[kind]
        value = perf.power_usage if preference == "low_power" else perf.exec_time
        if math.isnan(value):
            value, missing = perf.exec_time, True
        out[kind] = value
    return out, missing


def device_model(device, preference: str) -> tuple[MnnpyDevice | None, str]:
    """The cost model's view of a non-CPU ``Device`` and a note, or ``(None, why left out)``."""
    from mnnpy.backend import backend_in_auto

    name = "power_usage" if preference == "low_power" else "exec_time"
    caps, scale = cached_capabilities(device)
    bandwidth = BANDWIDTH.get(device.type, BANDWIDTH["other"])
    who = f"{device.id} ({device.name})"
    if caps is None:
        if not backend_in_auto(device.backend):
            why = f"no measured capabilities, and Runtime.in_auto leaves a device of type {device.type} out"
            return None, f"{who}: left out: {why}; {MEASURE_HINT}"
        figure = dict.fromkeys(OPERAND_KINDS, DEFAULT_FIGURE)
        source = f"no measured capabilities: default {name} {DEFAULT_FIGURE} x CPU for every operand type; {MEASURE_HINT}"
    else:
        figure, missing = _figures(caps, preference)
        source = f"capabilities measured on {scale} workloads (cached)" + (NO_POWER if missing else "")
    latency, bandwidth, copies = copy_figures(caps, bandwidth)
    shown = f"{name} x CPU " + ", ".join(f"{k} {v:.2g}" for k, v in figure.items())
    if all(not v < 1.0 for v in figure.values()):
        return None, f"{who}: left out: {shown} ({source}): no operand type faster than on the CPU"
    return MnnpyDevice(device.id, figure, bandwidth, source, latency), f"{who}: {shown} ({source}); {copies}"


def copy_figures(caps, bandwidth: float) -> tuple[float, float, str]:
    """``(latency µs, bandwidth bytes/µs, note)`` of a device's copies: those measured with its
    capabilities ``caps`` where finite and positive, else ``COPY_LATENCY_US`` and ``bandwidth``
    (the default of its type)."""
    lat_ok = caps is not None and _positive(caps.copy_latency_us)
    bw_ok = caps is not None and _positive(caps.bandwidth)
    latency = caps.copy_latency_us if lat_ok else COPY_LATENCY_US
    bandwidth = caps.bandwidth if bw_ok else bandwidth
    how = "measured" if lat_ok and bw_ok else "default" if not (lat_ok or bw_ok) else "partly measured"
    return latency, bandwidth, f"copies {latency:.3g} µs + {bandwidth / 1e3:.3g} GB/s ({how})"


def _positive(value) -> bool:
    """``value`` is a finite number above 0 (a measured constant; None: not measured)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def cpu_speed(devices) -> tuple[float, str]:
    """``(µs per MFLOP, note)`` of the CPU backend: the median of those measured with the
    capabilities cached for ``devices``, else ``CPU_US_PER_MFLOP``."""
    measured = []
    for dev in devices:
        caps = cached_capabilities(dev)[0] if dev.backend != "cpu" else None
        if caps is not None and _positive(caps.cpu_us_per_mflop):
            measured.append(caps.cpu_us_per_mflop)
    if not measured:
        return CPU_US_PER_MFLOP, f"cpu: {CPU_US_PER_MFLOP:g} µs per MFLOP (default: none measured)"
    value = statistics.median(measured)
    return value, f"cpu: {value:.3g} µs per MFLOP (measured with the capabilities)"


def _listed(devices: Sequence | None):
    """The ``Device`` objects of ``devices=[...]`` (every available device for None); ``InputError``
    for an empty list, a malformed, unknown or unavailable device."""
    from mnnpy.device import Device, get_device
    from mnnpy.device import devices as all_devices

    if devices is None:
        return all_devices()
    if isinstance(devices, (str, Device)) or not isinstance(devices, Sequence) or not devices:
        raise InputError(f"devices must be a non-empty list of mnnpy.Device objects or device names, got {devices!r}")
    out = []
    for d in devices:
        if not isinstance(d, (str, Device)):
            raise InputError(f"devices: each is a mnnpy.Device or a device name such as 'vulkan:1', got {d!r}")
        try:
            dev = get_device(d)
        except BackendUnavailableError as e:
            raise InputError(f"devices: {e}") from None
        if not dev.available:
            raise InputError(f"devices: device '{dev.id}' is unavailable: {dev.reason}")
        out.append(dev)
    return list({(d.backend, d.index): d for d in out}.values())


def auto_placer(
    preference: str | None = None, devices: Sequence | None = None, precision: str = "normal"
) -> tuple[list[str], AutoPlacer]:
    """``(backend names, AutoPlacer)`` of ``backend="auto"``: the candidates (module docstring)
    as names the session's backends are made from (a backend's default device by the backend's
    name, others as ``"vulkan:1"``), the CPU last, and the placer pricing them in that order.
    Raises ``InputError`` (a bad preference or device)."""
    preference = check_preference(preference)
    listed = _listed(devices)
    chosen, notes = [], []
    for dev in listed:
        if dev.backend == "cpu":
            continue
        model, note = device_model(dev, preference)
        notes.append(note)
        if model is not None:
            chosen.append((dev.backend if dev.default else dev.id, model))
    cpu_listed = any(d.backend == "cpu" for d in listed)
    cpu_figure = 1.0 if cpu_listed else FALLBACK_ONLY
    if not cpu_listed:
        notes.append("cpu: not a candidate (devices=[...] leaves it out): it runs only ops no candidate supports")
    cpu = MnnpyDevice("cpu", dict.fromkeys(OPERAND_KINDS, cpu_figure), 0.0, "the reference")
    names = [n for n, _ in chosen] + ["cpu"]
    speed, note = cpu_speed(listed)
    if chosen:  # the CPU's speed prices ops against another candidate's copies
        notes.append(note)
    placer = AutoPlacer([m for _, m in chosen] + [cpu], preference, precision == "low", tuple(notes), speed)
    return names, placer

"""AUTO placement (issue 15 item 4): ``create_session(backend="auto", preference=..., devices=...)``
places ops by the devices' capabilities and the cost of border copies; ``session.placement``
says why. Capability tables are faked (``auto_devices.cached_capabilities``) so that the
placement is the same on any machine; Vulkan (lavapipe here) stands in for a fast GPU."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy import auto_devices
from mnnpy.backend import backend_availability
from mnnpy.capabilities import Capabilities, PerformanceInfo
from mnnpy.capability_workloads import WORKLOADS
from mnnpy.converter import convert
from tests.oracle import make_model, rand

VULKAN_OK, VULKAN_WHY = backend_availability("vulkan")
needs_vulkan = pytest.mark.skipif(not VULKAN_OK, reason=f"Vulkan unavailable: {VULKAN_WHY}")


def fake_capabilities(monkeypatch, figures: dict[str, float], **costs):
    """Every non-CPU device gets ``figures[backend]`` x CPU (default 3: slower) for every operand
    type, and the measured cost constants ``costs`` (``Capabilities`` fields; none: not measured)."""

    def cached(device):
        x = figures.get(device.backend, 3.0)
        return Capabilities(device.id, {w.name: PerformanceInfo(x, x) for w in WORKLOADS}, scale="tiny", **costs), "tiny"

    monkeypatch.setattr(auto_devices, "cached_capabilities", cached)


def conv_model(rng):
    """x (1, 16, 64, 64) -> Conv 3x3 -> Relu (fused: 2 ops) -> Conv 3x3 -> y: 37.8 MFLOPs, 256 KiB in and out."""
    x = rand(rng, 1, 16, 64, 64)
    w1, w2 = rand(rng, 16, 16, 3, 3), rand(rng, 16, 16, 3, 3)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    return make_model(nodes, {"x": x}, ["y"], {"w1": w1, "w2": w2}), x


def sandwich_model(rng):
    """x (1, 64, 128, 128), 4 MiB -> Erf (no GPU execution) -> Relu (1 MFLOP) -> Erf -> y."""
    x = rand(rng, 1, 64, 128, 128)
    nodes = [
        helper.make_node("Erf", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Erf", ["b"], ["y"]),
    ]
    return make_model(nodes, {"x": x}, ["y"])


def test_auto_keeps_everything_on_the_cpu_when_devices_are_slower(rng, monkeypatch):
    """Devices slower than the CPU for every operand type (lavapipe and PoCL here) are left
    out before their backends are made; every op runs on the CPU, and the report says why."""
    fake_capabilities(monkeypatch, {})
    interp = mnnpy.Interpreter(convert(conv_model(rng)[0]))
    s = interp.create_session(backend="auto")
    assert [b.name for b in s.backends] == ["cpu"]
    placement = s.placement
    assert placement.backends == ["cpu"] and placement.preference == "fast_single_answer"
    others = [d for d in mnnpy.devices() if d.backend != "cpu"]
    assert len(placement.notes) == len(others) and all("left out" in n for n in placement.notes)
    assert "the only candidate" in str(placement)


def test_auto_without_measured_capabilities_uses_the_default_ordering(rng, monkeypatch):
    """No cached capabilities: a device ``Runtime.in_auto`` takes gets the default figure, the
    others (a CPU device behind a GPU API) are left out; nothing is measured."""
    monkeypatch.setattr(auto_devices, "cached_capabilities", lambda device: (None, ""))
    monkeypatch.setattr("mnnpy.capabilities.measure", lambda *a, **k: pytest.fail("create_session measured"))
    interp = mnnpy.Interpreter(convert(conv_model(rng)[0]))
    s = interp.create_session(backend="auto", preference="low_power")
    takes = {d.backend for d in mnnpy.devices() if d.backend != "cpu" and mnnpy.backend.backend_in_auto(d.backend)}
    assert {b.name for b in s.backends} - {"cpu"} == takes
    assert all(("default" in n) if "left out" not in n else "Runtime.in_auto" in n for n in s.placement.notes)


@needs_vulkan
def test_a_10x_gpu_takes_the_convs_but_not_a_tiny_op_between_large_tensors(rng, monkeypatch):
    """A GPU 10x faster than the CPU: the conv model goes there (and computes the same); a
    1-MFLOP Relu between two CPU-only ops on 4 MiB tensors stays on the CPU (its copies cost
    more than it saves)."""
    fake_capabilities(monkeypatch, {"vulkan": 0.1})
    model, x = conv_model(rng)
    interp = mnnpy.Interpreter(convert(model))
    s = interp.create_session(backend="auto")
    assert s.placement.backends == ["vulkan"], s.placement
    assert "exec_time 0.1 x CPU for float32; partition of 2 ops, 37.8 MFLOPs, pays its 2 copies (0.5 MiB)" in s.partitions()
    want = interp.create_session(backend="cpu").run({"x": x})["y"]
    np.testing.assert_allclose(s.run({"x": x})["y"], want, rtol=1e-3, atol=1e-3)

    s = mnnpy.Interpreter(convert(sandwich_model(rng))).create_session(backend="auto")
    assert s.placement.backends == ["cpu"]
    relu = next(line for line in str(s.placement).splitlines() if "Relu" in line)
    assert "the vulkan:0 partition of 1 op would move 8 MiB for 1.05 MFLOPs" in relu


@needs_vulkan
def test_measured_copy_latency_and_cpu_speed_decide(rng, monkeypatch):
    """The copy latency, bandwidth and CPU µs per MFLOP measured with the capabilities replace
    the defaults: 2 copies of 0.1 s each outweigh the conv model's saving at 15 µs per MFLOP
    (CPU), not at 10 ms per MFLOP (vulkan); the notes say they were measured."""
    model, _ = conv_model(rng)
    interp = mnnpy.Interpreter(convert(model))
    fake_capabilities(monkeypatch, {"vulkan": 0.1}, copy_latency_us=1e5, bandwidth=2e3, cpu_us_per_mflop=15.0)
    s = interp.create_session(backend="auto")
    assert s.placement.backends == ["cpu"], s.placement
    notes = " ".join(s.placement.notes)
    assert "copies 1e+05 µs + 2 GB/s (measured)" in notes and "cpu: 15 µs per MFLOP (measured" in notes, notes
    fake_capabilities(monkeypatch, {"vulkan": 0.1}, copy_latency_us=1e5, bandwidth=2e3, cpu_us_per_mflop=1e4)
    assert interp.create_session(backend="auto").placement.backends == ["vulkan"]
    fake_capabilities(monkeypatch, {"vulkan": 0.1})  # none measured: the defaults (lavapipe: type cpu, 4 GB/s)
    s = interp.create_session(backend="auto")
    assert s.placement.backends == ["vulkan"] and "copies 20 µs + 4 GB/s (default)" in " ".join(s.placement.notes)


@needs_vulkan
def test_devices_limit_the_candidates(rng, monkeypatch):
    """``devices=[...]`` (Device objects or names): only those are candidates; the CPU stays the
    fallback for what none of them supports."""
    fake_capabilities(monkeypatch, {"vulkan": 0.1})
    interp = mnnpy.Interpreter(convert(conv_model(rng)[0]))
    cpu = next(d for d in mnnpy.devices() if d.backend == "cpu")
    s = interp.create_session(backend="auto", devices=[cpu])
    assert [b.name for b in s.backends] == ["cpu"] and s.placement.backends == ["cpu"]
    s = interp.create_session(backend="auto", devices=["vulkan:0"])
    assert [b.name for b in s.backends] == ["vulkan", "cpu"] and s.placement.candidates == ("vulkan:0", "cpu")
    assert any("cpu: not a candidate" in n for n in s.placement.notes)


@pytest.mark.parametrize(
    "options",
    [
        {"preference": "fastest"},
        {"devices": ["nosuch:0"]},
        {"devices": ["cpu:7"]},
        {"devices": "cpu"},
        {"devices": []},
        {"backend": "cpu", "devices": ["cpu"]},
    ],
)
def test_bad_preference_or_devices(rng, options):
    interp = mnnpy.Interpreter(convert(sandwich_model(rng)))
    with pytest.raises(mnnpy.InputError):
        interp.create_session(**{"backend": "auto", **options})

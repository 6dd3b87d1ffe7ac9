"""Per-op GPU time profiles, off by default: ``MNNPY_VULKAN_PROFILE=1`` (timestamp queries
after each dispatch) and ``MNNPY_OPENCL_PROFILE=1`` (each kernel's profiling events), summed
per op type (``backend.profile``) and per op (``backend.profile_ops``, keyed by name and
type). Skipped, with the reason, where a backend or its timers are unavailable."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import device_backend, gpu_backends
from tests.oracle import make_model, rand


@pytest.mark.parametrize("backend", gpu_backends())
def test_profile_times_each_op_and_op_type(rng, monkeypatch, backend):
    profile = importlib.import_module(f"mnnpy.backends.{backend}.profile")
    x = rand(rng, 1, 3, 16, 16)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"])]
    interp = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"])))
    plain = interp.create_session(backend=backend)
    plain.run({"x": x})
    assert device_backend(plain).profile == {} and not device_backend(plain).profiling
    monkeypatch.setenv(profile.PROFILE_ENV, "1")
    s = interp.create_session(backend=backend)
    if not device_backend(s).profiling:
        pytest.skip(f"this {backend} device has no timers for a profile")
    y = s.run({"x": x})["y"]
    assert s.run({"x": x}, measure_timing=True).timing.on_device_us is not None
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-np.maximum(x, 0))), rtol=1e-6)
    prof, per_op = device_backend(s).profile, device_backend(s).profile_ops
    assert set(prof) == {"Relu", "Sigmoid"} and all(v >= 0 for v in prof.values()) and sum(prof.values()) > 0, prof
    names = {o.type: o.name for o in interp.net.main.ops}
    assert set(per_op) == {(names["Relu"], "Relu"), (names["Sigmoid"], "Sigmoid")}
    assert all(per_op[(names[k], k)] == pytest.approx(v) for k, v in prof.items())

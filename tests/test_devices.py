"""Devices (``mnnpy.devices()``, one Runtime per device, ``backend="vulkan:1"``) and supported
ops (``Interpreter.supported_ops``, ``mnnpy info --supported``): NNAPI's device discovery and
``getSupportedOperationsForDevices``. A second GPU is simulated by listing the one device
twice: each listed device gets its own Runtime (context, queues, caches)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from onnx import TensorProto, helper

import mnnpy
from mnnpy import backend as registry
from mnnpy.cli import main
from mnnpy.converter import convert
from mnnpy.device import DEVICE_TYPES
from tests.backend_compare import gpu_backends, partitioned_model
from tests.oracle import make_model, rand


@pytest.fixture
def fresh_runtimes(monkeypatch):
    """Runtimes made by the test are forgotten after it (the process-wide ones are kept)."""
    monkeypatch.setattr(registry, "_RUNTIMES", dict(registry._RUNTIMES))
    monkeypatch.setattr(registry, "_NAMED", {})


def test_import_loads_no_driver_and_devices_lists_each_backend():
    code = (
        "import sys, mnnpy; bad = [m for m in ('vulkan', 'pyopencl') if m in sys.modules]; assert not bad, bad;"
        "print(','.join(d.id for d in mnnpy.devices()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    ids = out[-1].split(",")
    assert ids[0] == "cpu:0" and len(ids) == len(set(ids))
    for name in ("opencl", "vulkan"):
        ok, _ = registry.backend_availability(name)
        assert any(i.startswith(name + ":") for i in ids) == ok, (name, ids)


def test_device_fields():
    found = mnnpy.devices()
    assert found[0].backend == "cpu" and found[0].type == "cpu" and found[0].feature_level == f"mnnpy {mnnpy.__version__}"
    for d in found:
        assert d.available and d.type in DEVICE_TYPES and d.name and d.driver_version and d.description, d
        assert mnnpy.get_device(d.id) == d
    for name in {d.backend for d in found}:
        mine = [d for d in found if d.backend == name]
        assert [d.index for d in mine] == list(range(len(mine)))
        assert sum(d.default for d in mine) == 1 and mnnpy.get_device(name).default
    levels = {"vulkan": "Vulkan 1.", "opencl": "OpenCL "}
    assert all(d.feature_level.startswith(levels[d.backend]) for d in found if d.backend in levels)


def test_a_missing_driver_contributes_no_device_and_says_why(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN_BACKENDS, "fakegpu", "mnnpy_no_such_driver:Runtime")
    assert all(d.backend != "fakegpu" for d in mnnpy.devices())
    (entry,) = [d for d in mnnpy.devices(include_unavailable=True) if d.backend == "fakegpu"]
    assert not entry.available and "cannot be imported" in entry.reason
    assert "fakegpu: unavailable: " in entry.describe()


@pytest.mark.parametrize(
    "name, error, match",
    [
        ("vulkan:x", mnnpy.InputError, "malformed device name 'vulkan:x'"),
        ("cpu:-1", mnnpy.InputError, "BACKEND:INDEX"),
        (":1", mnnpy.InputError, "malformed"),
        ("cpu:00", mnnpy.InputError, "malformed"),  # one name per device: no leading zeros
        ("cpu:7", mnnpy.BackendUnavailableError, r"no cpu device 7: 1 device\(s\) here \(cpu:0 "),
        ("metal:1", mnnpy.BackendUnavailableError, "unknown backend 'metal'"),
    ],
)
def test_bad_device_names(name, error, match):
    with pytest.raises(error, match=match):
        mnnpy.get_device(name)
    with pytest.raises(error, match=match):
        registry.get_runtime(name)
    with pytest.raises(error, match=match):
        mnnpy.Interpreter(convert(partitioned_model(np.random.default_rng(0)))).create_session(backend=name)


def _two_devices(monkeypatch, backend: str) -> None:
    """The backend's one device listed twice, as on a machine with two GPUs."""
    if backend == "vulkan":
        from mnnpy.backends.vulkan import runtime

        real = runtime.probe()
        monkeypatch.setattr(runtime, "probe", lambda: replace(real, devices=real.devices * 2))
    else:
        from mnnpy.backends.opencl import runtime

        real = runtime.all_devices()
        monkeypatch.setattr(runtime, "all_devices", lambda: (real[0] * 2, ""))


@pytest.mark.parametrize("backend", gpu_backends())
def test_two_devices_of_one_backend_in_one_process(backend, rng, monkeypatch, fresh_runtimes):
    _two_devices(monkeypatch, backend)
    assert [d.id for d in mnnpy.devices() if d.backend == backend] == [f"{backend}:0", f"{backend}:1"]
    first, second = registry.get_runtime(f"{backend}:0"), registry.get_runtime(f"{backend}:1")
    assert first is registry.get_runtime(backend) and second is not first
    interp = mnnpy.Interpreter(convert(partitioned_model(rng)))
    feeds = {"x": rand(rng, 1, 3, 5, 4), "z": rand(rng, 3, 1, 1)}
    want = interp.create_session(backend="cpu").run(feeds)["y"]
    for name, rt in ((f"{backend}:1", second), (backend, first)):
        session = interp.create_session(backend=name)
        assert session.backends[0].runtime is rt and [b.name for b in session.backends] == [backend, "cpu"]
        np.testing.assert_allclose(session.run(feeds)["y"], want, rtol=1e-4, atol=1e-4)
    assert len(interp.create_session(backend=[f"{backend}:0", backend, "cpu:0"]).backends) == 2  # one per device


def test_cli_devices_prints_every_device(capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    for d in mnnpy.devices():
        assert f"  {d.describe()}\n    {d.description}\n" in out


# ---------------------------------------------------------------------------- supported ops
@pytest.mark.parametrize("backend", gpu_backends())
def test_supported_ops_give_the_schedules_reasons(backend, rng):
    interp = mnnpy.Interpreter(convert(partitioned_model(rng)))
    listed = interp.supported_ops(backend)
    assert [(s.type, s.supported) for s in listed] == [("Relu", True), ("Erf", False), ("Add", True), ("Sigmoid", True)]
    erf = listed[1]
    assert erf.reason and erf.index == 1 and not listed[0].reason
    shapes = {"x": (1, 3, 4, 4), "z": (3, 1, 1)}
    assert f"{erf.type} '{erf.name}'  (fell back: {backend}: {erf.reason})" in interp.create_session(backend).partitions(shapes)
    assert all(s.supported for s in interp.supported_ops("cpu"))


def test_shape_dependent_limits_only_with_shapes(rng, monkeypatch):
    """OpenCL's output-size limit (``supports_outputs``, lowered here) is checked for the given
    shapes; without shapes, for batch 1 and other dynamic dims 64 (``mnnpy info --supported``'s)."""
    if not registry.backend_availability("opencl")[0]:
        pytest.skip(f"OpenCL unavailable: {registry.backend_availability('opencl')[1]}")
    from mnnpy.backends.opencl.backend import OpenCLBackend

    monkeypatch.setattr(OpenCLBackend, "max_elements", 3 * 64 * 64)
    interp = mnnpy.Interpreter(convert(partitioned_model(rng)))
    assert [s.supported for s in interp.supported_ops("opencl")] == [True, False, True, True]
    big = interp.supported_ops(mnnpy.get_device("opencl:0"), {"x": (1, 3, 64, 65), "z": (3, 1, 1)})
    assert [s.supported for s in big] == [False, False, False, False]
    assert f"more than {3 * 64 * 64} elements" in big[0].reason
    with pytest.raises(mnnpy.InputError):
        interp.supported_ops("opencl", {"nope": (1, 3, 2, 2), "z": (3, 1, 1)})


def test_supported_ops_without_shapes_take_the_clis_default_shapes(rng):
    """Newcomer finding: each dynamic dim 1 made PP-OCR cls's 2x2 MaxPool larger than its input
    (ShapeError) where ``mnnpy info --supported`` (batch 1, other dims 64) worked."""
    x = rand(rng, 1, 3, 8, 8)
    nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    interp = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"], input_shapes={"x": ["n", 3, "h", "w"]})))
    assert [s.supported for s in interp.supported_ops("cpu")] == [True]


def test_control_flow_runs_on_the_host_and_what_follows_is_told_at_run():
    then = helper.make_graph([helper.make_node("Neg", ["r"], ["t"])], "then", [], [helper.make_tensor_value_info("t", 1, None)])
    other = helper.make_graph([helper.make_node("Abs", ["r"], ["e"])], "else", [], [helper.make_tensor_value_info("e", 1, None)])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("If", ["cond"], ["z"], then_branch=then, else_branch=other),
        helper.make_node("Sigmoid", ["z"], ["y"]),
    ]
    x = np.ones((2, 3), np.float32)
    model = make_model(nodes, {"x": x, "cond": np.array(True)}, ["y"])
    assert model.graph.input[1].type.tensor_type.elem_type == TensorProto.BOOL
    listed = mnnpy.Interpreter(convert(model)).supported_ops("cpu")
    assert [s.supported for s in listed] == [True, False, None]
    assert "runs on the host" in listed[1].reason and "If" in listed[2].reason


def test_cli_info_supported(rng, tmp_path, capsys):
    path = tmp_path / "m.mnnpy"
    path.write_bytes(convert(partitioned_model(rng)))
    assert main(["info", str(path), "--supported", "cpu", "--shape", "x=1,3,5,5"]) == 0
    out = capsys.readouterr().out
    assert "device: cpu:0 " in out and "4 of 4 ops supported on cpu:0" in out and "  yes Erf '" in out
    assert main(["info", str(path), "--supported", "cpu:3"]) == 2
    assert "error: device 'cpu:3' is unavailable: no cpu device 3" in capsys.readouterr().err

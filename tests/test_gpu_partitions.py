"""What every GPU backend does at partition borders: inputs it cannot take fall back to the
CPU with the reason, a model mixing supported and unsupported ops gives the CPU's result
with the expected partitions, across resizes (plans reused), and tensors are copied only at
the borders."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.backend import backend_availability
from mnnpy.converter import convert
from tests.backend_compare import API, compare, device_backend, gpu_backends, partitioned_model, sessions
from tests.oracle import ELEMENTWISE, HALF, make_model, rand


@pytest.mark.parametrize("backend", gpu_backends())
def test_inputs_of_other_dtypes_fall_back(rng, backend):
    """Add takes float32, int32 and int64 on the GPUs: uint8 runs on the CPU, saying why."""
    a = rng.integers(0, 100, (4, 7)).astype(np.uint8)
    model = make_model([helper.make_node("Add", ["a", "a"], ["c"])], {"a": a}, ["c"])
    s = compare(model, {"a": a}, ELEMENTWISE, on_device=False, backend=backend)
    assert f"fell back: {backend}: dtype uint8 ({API[backend]} runs Add on float32, int32, int64 only)" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_partitions_fall_back_to_cpu_and_match(rng, backend):
    dev, cpu = sessions(partitioned_model(rng), backend=backend)
    z = rand(rng, 3, 1, 1)
    for shape in [(1, 3, 13, 7), (1, 3, 17, 9), (1, 3, 13, 7)]:  # a second shape, then the first again
        x = rand(rng, *shape)
        got, want = dev.run({"x": x, "z": z})["y"], cpu.run({"x": x, "z": z})["y"]
        assert got.shape == (1, 3, *shape[2:])
        np.testing.assert_allclose(got, want, **ELEMENTWISE)
    desc = dev.partitions()
    heads = [line for line in desc.splitlines() if line.startswith("partition")]
    assert heads == [
        f"partition 0 on {backend}: 1 ops, 0 tensors copied in",
        "partition 1 on cpu: 1 ops, 1 tensors copied in",
        f"partition 2 on {backend}: 2 ops, 1 tensors copied in",
    ], desc
    assert "Erf '" in desc and f"fell back: {backend}: no {API[backend]} execution for Erf" in desc
    assert dev.resize_count == 2  # the first shape's plan was reused


# backend calls per run of the GPU, CPU, GPU partitions (the CPU reads the border tensor with
# download_into, straight into its arena; Vulkan: also two submissions)
BORDER_CALLS = {
    "opencl": {"upload": 3, "download": 1, "download_into": 2},
    "vulkan": {"upload": 3, "download": 1, "download_into": 2, "submit": 2},
}


@pytest.mark.parametrize("backend", gpu_backends())
def test_copies_only_at_partition_borders(rng, monkeypatch, backend):
    """gpu [Relu] -> cpu [Erf] -> gpu [Add z, Sigmoid]: per run, the uploads are the two inputs
    and one border tensor, the downloads one border tensor and the output."""
    dev, cpu = sessions(partitioned_model(rng), backend=backend)
    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    want = cpu.run({"x": x, "z": z})["y"]
    dev.run({"x": x, "z": z})  # plan and build first
    gpu = device_backend(dev)
    calls = dict.fromkeys(BORDER_CALLS[backend], 0)
    for name in calls:
        real = getattr(gpu, name)

        def counted(*a, _real=real, _name=name):
            calls[_name] += 1
            return _real(*a)

        monkeypatch.setattr(gpu, name, counted)
    np.testing.assert_allclose(dev.run({"x": x, "z": z})["y"], want, **ELEMENTWISE)
    assert calls == BORDER_CALLS[backend]


@pytest.mark.parametrize("precision", ["high", "low"])
def test_border_between_opencl_and_vulkan_without_a_host_array(rng, monkeypatch, precision):
    """OpenCL [Relu] -> Vulkan [3-D MaxPool, which OpenCL does not pool] -> OpenCL [Sigmoid]:
    OpenCL reads its border tensor straight into Vulkan's staging slot (``download_into``), and
    uploads Vulkan's from its staging slot (``host_view``); per run only the output is read into
    a new host array. fp16 storage: both sides cross as float32."""
    for b in API:
        ok, why = backend_availability(b)
        if not ok:
            pytest.skip(f"{b} unavailable: {why}")
    x = rand(rng, 1, 2, 6, 7, 8)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2, 2]),
        helper.make_node("Sigmoid", ["p"], ["y"]),
    ]
    interp = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"])))
    dev = interp.create_session(backend=["opencl", "vulkan", "cpu"], precision=precision)
    want = interp.create_session(backend="cpu").run({"x": x})["y"]
    dev.run({"x": x})  # plan and build first
    heads = [line for line in dev.partitions().splitlines() if line.startswith("partition")]
    assert [h.split(":")[0] for h in heads] == ["partition 0 on opencl", "partition 1 on vulkan", "partition 2 on opencl"]
    downloads = []
    for b in dev.backends[:2]:
        real = b.download
        monkeypatch.setattr(b, "download", lambda src, _real=real: downloads.append(src) or _real(src))
    tol = HALF if precision == "low" else ELEMENTWISE
    np.testing.assert_allclose(dev.run({"x": x})["y"], want, **tol)
    assert len(downloads) == 1  # the output

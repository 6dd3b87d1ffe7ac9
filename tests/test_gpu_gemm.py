"""MatMul and Gemm on every GPU backend against the CPU: 1-D operands, batch dims broadcast
(per-batch strides or an offset table), constant or run-time operands, tile edge cases, K = 0,
empty batches; Gemm transA/transB x every C broadcast shape with alpha/beta, beta = 0, the
classifier head, and the integer fallback. Each backend is skipped, with the reason, where it
is unusable (CI: PoCL, lavapipe). The kernel/shader each backend picks is checked per backend
(OpenCL: the launch's options; Vulkan: every dispatch described at resize); backend-only
checks (GEMV, tile variants, split-K, fp16 storage, limits) live in tests/test_opencl_gemm.py
and tests/test_vulkan_gemm.py."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import ACCUMULATE, compare, gpu_backends, gpu_cases
from tests.oracle import make_model, rand


def _compare_picked(monkeypatch, backend, model, feeds, on_device=True):
    """``compare`` (ACCUMULATE); returns (device session, what was picked): OpenCL: the launch
    key (kernel options) of the first execution; Vulkan: ``(shader, specialization constants
    as a dict, groups, local)`` of every dispatch described at resize, in order."""
    picked: list = []
    if backend == "vulkan":
        from mnnpy.backends.vulkan.execution import VulkanExecution

        real = VulkanExecution.dispatch

        def spy(self, shader, bindings, writes, push, n, spec=(), groups=None, local=None):
            picked.append((shader, dict(spec), groups, local))
            return real(self, shader, bindings, writes, push, n, spec, groups, local)

        monkeypatch.setattr(VulkanExecution, "dispatch", spy)
    s = compare(model, feeds, ACCUMULATE, on_device, backend=backend)
    if backend == "opencl" and on_device:
        picked.append(next(iter(s._plan.executions.values())).launch.key)
    return s, picked


# (A shape, B shape, what the backend picks: OpenCL: whether the launch has BATCH_TABLE;
# Vulkan: (whether the batch needs the offset table, work-group size))
MATMUL = {
    "opencl": [
        ((7, 13), (13, 31), False),
        ((65, 130), (130, 67), False),  # several 64x64 tiles, K not a multiple of the K tile
        ((1, 100), (100, 1000), False),  # GEMV-like classifier head: the thin tile
        ((3, 5), (5, 9), False),
        ((2, 3, 7, 13), (13, 5), False),  # B 2-D: A's batch folds into M
        ((7, 13), (2, 13, 6), False),  # A 2-D: stride 0 for A
        ((3, 9, 13), (3, 13, 10), False),
        ((1, 8, 25, 32), (1, 8, 32, 25), False),  # attention scores (PP-OCR rec)
        ((2, 1, 7, 13), (3, 13, 7), True),  # broadcast both ways: offset table
        ((4, 1, 5, 6), (1, 3, 6, 2), True),
        ((13,), (13, 5), False),
        ((7, 13), (13,), False),
        ((2, 4, 13), (13,), False),
        ((13,), (3, 13, 4), False),
        ((13,), (13,), False),
        ((3, 0), (0, 4), False),  # K = 0: zeros
    ],
    "vulkan": [
        ((7, 13), (13, 31), (False, (32, 2))),
        ((65, 130), (130, 67), (False, (8, 8))),  # several 32x32 tiles, K not a multiple of the K tile
        ((1, 100), (100, 300), (False, (32, 2))),  # GEMV-like classifier head: the thin tile (m <= 8)
        ((11, 21), (21, 150), (False, (32, 4))),  # m <= 16: 16 x 128 tiles
        ((70, 9), (9, 19), (False, (8, 16))),  # n <= 32: 64 x 32 tiles
        ((2, 333, 5), (2, 5, 901), (False, (16, 16))),  # enough 64 x 64 tiles (6 x 15 x 2 batches)
        ((3, 5), (5, 9), (False, (32, 2))),
        ((2, 3, 7, 13), (13, 5), (False, (8, 16))),  # B 2-D: A's batch folds into M (42 rows)
        ((2, 3, 7, 13), (1, 1, 13, 5), (False, (8, 16))),  # B's batch all ones: folds too
        ((7, 13), (2, 13, 6), (False, (32, 2))),  # A 2-D: stride 0 for A
        ((3, 9, 13), (3, 13, 10), (False, (32, 4))),
        ((1, 3, 9, 13), (2, 1, 13, 10), (True, (32, 4))),  # broadcast both ways: offset table
        ((4, 1, 5, 6), (1, 3, 6, 2), (True, (32, 2))),
        ((13,), (13, 5), (False, (32, 2))),
        ((7, 13), (13,), (False, (32, 2))),
        ((2, 4, 13), (13,), (False, (32, 2))),
        ((13,), (3, 13, 4), (False, (32, 2))),
        ((13,), (13,), (False, (32, 2))),
        ((3, 0), (0, 4), (False, (32, 2))),  # K = 0: zeros
    ],
}


def _check_matmul(backend, picked, expected):
    if backend == "opencl":
        (key,) = picked
        assert ("BATCH_TABLE" in key) == expected, key
    else:
        table, local = expected
        ((shader, spec, _, loc),) = picked
        assert shader == "gemm_nn" and spec[5] is table and spec[4] is False and loc == (*local, 1)


@pytest.mark.parametrize("backend,sa,sb,expected", gpu_cases(MATMUL, ids=lambda c: f"{c[0]}x{c[1]}"))
def test_matmul(rng, monkeypatch, backend, sa, sb, expected):
    a, b = rand(rng, *sa), rand(rng, *sb)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    _, picked = _compare_picked(monkeypatch, backend, model, {"a": a, "b": b})
    _check_matmul(backend, picked, expected)


@pytest.mark.parametrize("backend", gpu_backends())
def test_matmul_constant_weights(rng, backend):
    a, b = rand(rng, 2, 11, 24), rand(rng, 24, 37, scale=0.2)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    compare(model, {"a": a}, ACCUMULATE, backend=backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_matmul_empty_batch(rng, backend):
    a, b = np.zeros((0, 3, 5), np.float32), rand(rng, 5, 4)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    compare(model, {"a": a}, ACCUMULATE, backend=backend)


C_SHAPES = [None, (), (1,), (11,), (1, 11), (9, 1), (9, 11)]


@pytest.mark.parametrize("trans", list(itertools.product([0, 1], [0, 1])), ids=lambda t: f"tA{t[0]}tB{t[1]}")
@pytest.mark.parametrize("cshape", C_SHAPES, ids=lambda c: "noC" if c is None else f"C{c}")
@pytest.mark.parametrize("backend", gpu_backends())
def test_gemm(rng, monkeypatch, backend, trans, cshape):
    m, k, n = 9, 17, 11
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"] = rand(rng, *cshape)
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], transA=trans[0], transB=trans[1], alpha=0.75, beta=-1.5)
    _, picked = _compare_picked(monkeypatch, backend, make_model([node], {"a": a}, ["y"], inits), {"a": a})
    if backend == "vulkan":  # the transpose variant, C, alpha and beta as specialization constants
        ((shader, spec, _, _),) = picked
        assert shader == f"gemm_{'nt'[trans[0]]}{'nt'[trans[1]]}"
        assert spec[4] is (cshape is not None) and spec[6] == 0.75 and spec[7] == -1.5


@pytest.mark.parametrize("beta", [0.0, 1.0])
@pytest.mark.parametrize("backend", gpu_backends())
def test_gemm_run_time_operands(rng, monkeypatch, backend, beta):
    """B and C are inputs, not constants; beta 0 ignores C."""
    a, b, c = rand(rng, 70, 33), rand(rng, 33, 66), rand(rng, 70, 1)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=beta)
    feeds = {"a": a, "b": b, "c": c}
    _, picked = _compare_picked(monkeypatch, backend, make_model([node], feeds, ["y"]), feeds)
    if backend == "vulkan":  # C read only where beta is not 0
        assert picked[0][1][4] is (beta != 0.0)


@pytest.mark.parametrize("backend", gpu_backends())
def test_gemm_classifier(rng, monkeypatch, backend):
    """MobileNetV2/ResNet-18 head: (1, 1280) x (1000, 1280)^T + bias (Vulkan: on the GEMV shader)."""
    a, b, c = rand(rng, 1, 1280), rand(rng, 1000, 1280, scale=0.03), rand(rng, 1000)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    _, picked = _compare_picked(monkeypatch, backend, make_model([node], {"a": a}, ["y"], {"b": b, "c": c}), {"a": a})
    if backend == "vulkan":
        assert picked[0][0] == "gemm_gemv" and picked[0][2] == (1000, 1, 1)


@pytest.mark.parametrize("backend", gpu_backends())
def test_integer_matmul_falls_back(rng, backend):
    a, b = rng.integers(-4, 4, (3, 5)).astype(np.int32), rng.integers(-4, 4, (5, 2)).astype(np.int32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = compare(model, {"a": a, "b": b}, on_device=False, backend=backend)
    assert f"fell back: {backend}: dtype int32" in s.partitions()

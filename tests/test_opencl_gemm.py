"""OpenCL MatMul and Gemm (one tiled GEMM kernel) against the CPU backend.

MatMul: 1-D operands, batch dims broadcast (strides or an offset table), constant or run-time
operands, tile edge cases. Gemm: transA/transB, alpha/beta, every C broadcast shape. fp16
storage and a fallback. Skipped, with the reason, where no OpenCL device is usable.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, HALF, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


def _options(session) -> str:
    exe = next(iter(session._plan.executions.values()))
    return exe.launch.key


MATMUL = [
    ((7, 13), (13, 31), ""),
    ((65, 130), (130, 67), ""),  # several 64x64 tiles, K not a multiple of the K tile
    ((1, 100), (100, 1000), ""),  # GEMV-like classifier head: the thin tile
    ((3, 5), (5, 9), ""),
    ((2, 3, 7, 13), (13, 5), ""),  # B 2-D: A's batch folds into M
    ((7, 13), (2, 13, 6), ""),  # A 2-D: stride 0 for A
    ((3, 9, 13), (3, 13, 10), ""),
    ((1, 8, 25, 32), (1, 8, 32, 25), ""),  # attention scores (PP-OCR rec)
    ((2, 1, 7, 13), (3, 13, 7), "BATCH_TABLE"),  # broadcast both ways: offset table
    ((4, 1, 5, 6), (1, 3, 6, 2), "BATCH_TABLE"),
    ((13,), (13, 5), ""),
    ((7, 13), (13,), ""),
    ((2, 4, 13), (13,), ""),
    ((13,), (3, 13, 4), ""),
    ((13,), (13,), ""),
    ((3, 0), (0, 4), ""),  # K = 0: zeros
]


@pytest.mark.parametrize("sa,sb,option", MATMUL, ids=[f"{a}x{b}" for a, b, _ in MATMUL])
def test_matmul(rng, sa, sb, option):
    a, b = rand(rng, *sa), rand(rng, *sb)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = compare(model, {"a": a, "b": b}, ACCUMULATE)
    assert ("BATCH_TABLE" in _options(s)) == bool(option)


def test_matmul_constant_weights(rng):
    a, b = rand(rng, 2, 11, 24), rand(rng, 24, 37, scale=0.2)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    compare(model, {"a": a}, ACCUMULATE)


def test_matmul_empty_batch(rng):
    a, b = np.zeros((0, 3, 5), np.float32), rand(rng, 5, 4)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    compare(model, {"a": a}, ACCUMULATE)


C_SHAPES = [None, (), (1,), (11,), (1, 11), (9, 1), (9, 11)]


@pytest.mark.parametrize("trans", list(itertools.product([0, 1], [0, 1])), ids=lambda t: f"tA{t[0]}tB{t[1]}")
@pytest.mark.parametrize("cshape", C_SHAPES, ids=lambda c: "noC" if c is None else f"C{c}")
def test_gemm(rng, trans, cshape):
    m, k, n = 9, 17, 11
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"] = rand(rng, *cshape)
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], transA=trans[0], transB=trans[1], alpha=0.75, beta=-1.5)
    compare(make_model([node], {"a": a}, ["y"], inits), {"a": a}, ACCUMULATE)


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_gemm_run_time_operands(rng, beta):
    """B and C are inputs, not constants; beta 0 ignores C."""
    a, b, c = rand(rng, 70, 33), rand(rng, 33, 66), rand(rng, 70, 1)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=beta)
    feeds = {"a": a, "b": b, "c": c}
    compare(make_model([node], feeds, ["y"]), feeds, ACCUMULATE)


def test_gemm_classifier(rng):
    """MobileNetV2/ResNet-18 head: (1, 1280) x (1000, 1280)^T + bias."""
    a, b, c = rand(rng, 1, 1280), rand(rng, 1000, 1280, scale=0.03), rand(rng, 1000)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    compare(make_model([node], {"a": a}, ["y"], {"b": b, "c": c}), {"a": a}, ACCUMULATE)


@pytest.mark.parametrize("tiles", [True, False], ids=["local-tiles", "direct"])
@pytest.mark.parametrize("m,k,n,cshape", [(1, 1280, 1000, (1000,)), (3, 1001, 17, (3, 17)), (8, 64, 5, None), (2, 4000, 3, (1,))])
@pytest.mark.parametrize("precision", ["normal", "low"])
def test_gemv(rng, monkeypatch, tiles, m, k, n, cshape, precision):
    """Few rows with B stored (N, K) on GPUs (local-memory devices): the gemv kernel, one work
    group per output; on CPU devices (direct loads) the tiled kernel."""
    from mnnpy.backends.opencl import gemm

    monkeypatch.setattr(gemm, "LOCAL_TILES", tiles)
    a, b = rand(rng, m, k), rand(rng, n, k, scale=1 / np.sqrt(k))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"], names = rand(rng, *cshape), names + ["c"]
    node = helper.make_node("Gemm", names, ["y"], transB=1, alpha=0.75, beta=-1.5)
    tol = HALF if precision == "low" else ACCUMULATE
    s = compare(make_model([node], {"a": a}, ["y"], inits), {"a": a}, tol, precision=precision)
    assert (":gemv:" in _options(s)) == tiles


def test_fp16_storage(rng):
    a, b, c = rand(rng, 2, 3, 19, 40), rand(rng, 2, 3, 40, 23, scale=0.15), rand(rng, 23, 29, scale=0.2)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("MatMul", ["m", "c"], ["y"])]
    s = compare(make_model(nodes, {"a": a, "b": b}, ["y"], {"c": c}), {"a": a, "b": b}, HALF, precision="low")
    assert s.backends[0].storage == np.float16
    g = helper.make_node("Gemm", ["x", "w", "bias"], ["y"], transB=1, alpha=0.5)
    x, w, bias = rand(rng, 5, 64), rand(rng, 37, 64, scale=0.15), rand(rng, 37)
    compare(make_model([g], {"x": x}, ["y"], {"w": w, "bias": bias}), {"x": x}, HALF, precision="low")


def test_integer_matmul_falls_back(rng):
    a, b = rng.integers(-4, 4, (3, 5)).astype(np.int32), rng.integers(-4, 4, (5, 2)).astype(np.int32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = compare(model, {"a": a, "b": b}, on_device=False)
    assert "fell back: opencl: dtype int32" in s.partitions()


TILED = [((65, 130), (130, 67)), ((1, 100), (100, 300)), ((9, 17), (17, 11)), ((4, 1, 5, 6), (1, 3, 6, 2)), ((13,), (13, 5))]


@pytest.mark.parametrize("tiles", [True, False], ids=["local-tiles", "direct"])
@pytest.mark.parametrize("sa,sb", TILED, ids=[f"{a}x{b}" for a, b in TILED])
def test_both_kernel_variants(rng, monkeypatch, tiles, sa, sb):
    """Local-memory tiles (GPUs) and direct loads (CPU devices) whatever the device here is."""
    from mnnpy.backends.opencl import gemm

    monkeypatch.setattr(gemm, "LOCAL_TILES", tiles)
    a, b = rand(rng, *sa), rand(rng, *sb)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = compare(model, {"a": a, "b": b}, ACCUMULATE)
    assert ("DIRECT" in _options(s)) != tiles
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5)
    a, b, c = rand(rng, 33, 20), rand(rng, 70, 33), rand(rng, 70)
    compare(make_model([node], {"a": a}, ["y"], {"b": b, "c": c}), {"a": a}, ACCUMULATE)

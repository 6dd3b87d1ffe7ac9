"""OpenCL MatMul and Gemm: the gemv kernel and which kernel variant (local-memory tiles or
direct loads) runs, fp16 storage. The MatMul/Gemm correctness on every GPU backend (shapes,
broadcasts, transposes x C shapes, run-time operands, fallbacks) is in tests/test_gpu_gemm.py.
Skipped, with the reason, where no OpenCL device is usable.
"""

from __future__ import annotations

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

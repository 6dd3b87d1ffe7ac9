"""Vulkan MatMul and Gemm: which shader runs (tile sizes, GEMV, split-K) and their limits, a
chain of GEMMs. The MatMul/Gemm correctness on every GPU backend (shapes, broadcasts,
transposes x C shapes, run-time operands, fallbacks) is in tests/test_gpu_gemm.py. Skipped,
with the reason, where Vulkan is unusable (CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from mnnpy.backends.vulkan import gemm
from mnnpy.backends.vulkan.execution import VulkanExecution
from tests.backend_compare import ACCUMULATE, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")


@pytest.fixture
def dispatches(monkeypatch):
    """``(shader, specialization constants as a dict, groups, local)`` of every dispatch described at resize."""
    seen: list[tuple] = []
    real = VulkanExecution.dispatch

    def spy(self, shader, bindings, writes, push, n, spec=(), groups=None, local=None):
        seen.append((shader, dict(spec), groups, local))
        return real(self, shader, bindings, writes, push, n, spec, groups, local)

    monkeypatch.setattr(VulkanExecution, "dispatch", spy)
    return seen


def _compare(model, feeds, on_device=True):
    return compare(model, feeds, ACCUMULATE, on_device, backend="vulkan")


# (A shape, B shape, whether the batch needs the offset table, work-group size)
def test_matmul_chain(rng):
    """Two dependent GEMMs in one command buffer (a barrier between them)."""
    a, b, c = rand(rng, 2, 3, 19, 40), rand(rng, 2, 3, 40, 23, scale=0.15), rand(rng, 23, 29, scale=0.2)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("MatMul", ["m", "c"], ["y"])]
    _compare(make_model(nodes, {"a": a, "b": b}, ["y"], {"c": c}), {"a": a, "b": b})


@pytest.mark.parametrize("trans", list(itertools.product([0, 1], [0, 1])), ids=lambda t: f"tA{t[0]}tB{t[1]}")
@pytest.mark.parametrize("m,k,n,local", [(70, 37, 133, (8, 8, 1)), (600, 5, 900, (16, 16, 1))], ids=["32x32", "64x64"])
def test_gemm_several_tiles(rng, dispatches, trans, m, k, n, local):
    """Odd sizes across tiles in both directions and K across several K steps, every variant,
    both square tile sizes."""
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans[0], transB=trans[1], alpha=0.5)
    _compare(make_model([node], {"a": a, "b": b}, ["y"], {"c": rand(rng, n)}), {"a": a, "b": b})
    assert dispatches[0][3] == local


@pytest.mark.parametrize("m,k,n", [(1, 64, 1), (3, 1001, 17), (8, 65, 300), (2, 4000, 5)])
@pytest.mark.parametrize("cshape", [None, (1,), "n", "mn"])
def test_gemv(rng, dispatches, m, k, n, cshape):
    """Few rows with B stored (N, K): one work group per output, K split over its invocations
    (K not a multiple of the group, shorter than two groups, long), alpha/beta, C broadcast."""
    a, b = rand(rng, m, k), rand(rng, n, k, scale=1 / np.sqrt(k))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"] = rand(rng, *{"n": (n,), "mn": (m, n)}.get(cshape, cshape))
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], transB=1, alpha=0.75, beta=-1.5)
    _compare(make_model([node], {"a": a}, ["y"], inits), {"a": a})
    assert [d[0] for d in dispatches] == ["gemm_gemv"]


@pytest.mark.parametrize("m,k,trans", [(9, 100, (0, 1)), (1, 63, (0, 1)), (1, 100, (0, 0)), (1, 100, (1, 1))])
def test_gemv_only_where_it_pays(rng, dispatches, m, k, trans):
    """More than 8 rows, K shorter than a group, or B not stored (N, K): the tiled shader."""
    n = 7
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transA=trans[0], transB=trans[1])
    _compare(make_model([node], {"a": a}, ["y"], {"b": b}), {"a": a})
    assert dispatches[0][0] == f"gemm_{'nt'[trans[0]]}{'nt'[trans[1]]}"


SPLIT_K = [
    ((9, 1000), (1000, 20), "nn"),  # one work group, K = 1000: 7 slices
    ((3, 2, 17, 700), (3, 2, 700, 9), "nn"),  # batched: slices per batch
    ((2, 1, 7, 520), (1, 3, 520, 5), "table"),  # broadcast batch dims (offset table)
    ((300, 2000), (2000, 1), "nn"),  # a column: 10 x 1 groups
]


@pytest.mark.parametrize("sa,sb,kind", SPLIT_K, ids=[f"{a}x{b}" for a, b, _ in SPLIT_K])
def test_matmul_split_k(rng, dispatches, sa, sb, kind):
    """Few work groups over a long K: float32 partial products of K slices, then their sum
    (gemm_splitk)."""
    a, b = rand(rng, *sa), rand(rng, *sb, scale=1 / np.sqrt(sa[-1]))
    _compare(make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]), {"a": a, "b": b})
    (s1, spec1, groups, _), (s2, spec2, _, _) = dispatches
    assert s1 == "gemm_nn" and s2 == "gemm_splitk" and spec1[18] == spec2[18] > 1 and spec1[5] is (kind == "table")
    assert groups[2] % spec1[18] == 0


@pytest.mark.parametrize("trans", list(itertools.product([0, 1], [0, 1])), ids=lambda t: f"tA{t[0]}tB{t[1]}")
@pytest.mark.parametrize("cshape", [None, (1,), (13,), (11, 1), (11, 13)], ids=lambda c: "noC" if c is None else f"C{c}")
def test_gemm_split_k(rng, dispatches, trans, cshape):
    """alpha, beta and C (every broadcast) applied once, after the slices are added."""
    m, k, n = 11, 900, 13
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)), scale=1 / np.sqrt(k))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"], names = rand(rng, *cshape), names + ["c"]
    node = helper.make_node("Gemm", names, ["y"], transA=trans[0], transB=trans[1], alpha=0.75, beta=-1.5)
    _compare(make_model([node], {"a": a}, ["y"], inits), {"a": a})
    assert [d[0] for d in dispatches] == [f"gemm_{'nt'[trans[0]]}{'nt'[trans[1]]}", "gemm_splitk"]


def test_split_k_choice():
    """Enough slices to reach about SPLIT_TARGET groups, each of at least SPLIT_MIN_K of K."""
    assert gemm.split_k(gemm.SPLIT_TARGET, 10_000) == 1 and gemm.split_k(0, 10_000) == 1
    assert gemm.split_k(1, 100) == 1 and gemm.split_k(1, 300) == 2 and gemm.split_k(1, 10_000) == gemm.SPLIT_MAX
    assert gemm.split_k(100, 10_000) == 3


@pytest.mark.parametrize("m,n", [(1, 1000), (8, 9), (9, 500), (70, 32), (70, 33), (4096, 4096)])
def test_tiles_fit_every_device(m, n):
    """Work groups of at most 256 invocations; shared tiles within the 16 KiB every device has."""
    lx, ly = gemm.tile_config(m, n)
    assert lx * ly <= 256 and 16 * (ly * gemm.RM + lx * gemm.RN + 2) * 4 <= 16384


def test_grid_limits():
    """Grids beyond the work-group counts every device has are refused (the op falls back)."""
    assert gemm.grid_fits(64, 64, 3) == (True, "")
    ok, why = gemm.grid_fits(8, 64, 70000)
    assert not ok and "65535" in why
    ok, why = gemm.grid_fits(64, 64 * 65536, 1)
    assert not ok and "work groups" in why

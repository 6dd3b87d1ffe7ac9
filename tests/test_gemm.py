"""MatMul and Gemm on every backend: the CPU backend against onnxruntime, each GPU backend
against the CPU (``tests/backend_compare.py``), within ``ACCUMULATE`` (fp16 storage: ``HALF``).
Tests without a ``backend`` parameter run the CPU backend against onnxruntime.

Every backend: 1-D operands, batch dims broadcast, constant operands, Gemm transA/transB x
every C broadcast shape with alpha/beta, GEMV. GPU (OpenCL, Vulkan; skipped with the reason
where the driver is missing): the kernel/shader each backend picks (OpenCL: the launch's
options; Vulkan: every dispatch described at resize), tile edge cases, K = 0, empty batches,
run-time operands, the classifier head, local-memory tiles or direct loads (OpenCL), split-K
and tile limits (Vulkan), fp16 storage, and the integer fallback.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import backend_cases, check_backend, gpu_backends, launch_key, record_dispatches, storage_dtype
from tests.oracle import ACCUMULATE, ELEMENTWISE, EXACT, HALF, check, make_model, rand


def _picked(monkeypatch, backend, model, feeds, tol=ACCUMULATE, **options):
    """``check_backend``; returns (session, what was picked): OpenCL: the launch key (kernel
    options) of the first Execution; Vulkan: every ``Dispatch`` described at resize, in order;
    the CPU: nothing."""
    seen = record_dispatches(monkeypatch) if backend == "vulkan" else []
    s = check_backend(model, feeds, tol, backend, **options)
    return s, [launch_key(s)] if backend == "opencl" else seen


def _matmul(rng, sa, sb):
    """``(model, feeds)``: ``a @ b`` (MatMul) of seeded inputs of shapes ``sa`` and ``sb``."""
    a, b = rand(rng, *sa), rand(rng, *sb)
    return make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]), {"a": a, "b": b}


# -- MatMul ----------------------------------------------------------------------------------

# (A shape, B shape, what the backend picks: the CPU: nothing checked; OpenCL: whether the
# launch has BATCH_TABLE; Vulkan: (whether the batch needs the offset table, work-group size))
MATMUL = {
    "cpu": [
        ((3, 4), (4, 5), None),
        ((13,), (13, 7), None),
        ((7, 13), (13,), None),
        ((13,), (13,), None),
        ((2, 3, 5, 4), (4, 6), None),
        ((2, 1, 5, 4), (3, 4, 6), None),
        ((5, 4), (2, 4, 3), None),
        ((1, 127, 33), (1, 33, 9), None),
        ((2, 3, 4), (4,), None),
        ((4,), (2, 4, 3), None),
    ],
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
    """Assert what ``backend`` picked for a MatMul (see ``MATMUL``); nothing on the CPU."""
    if backend == "opencl":
        (key,) = picked
        assert ("BATCH_TABLE" in key) == expected, key
    elif backend == "vulkan":
        table, local = expected
        ((shader, spec, _, loc),) = picked
        assert shader == "gemm_nn" and spec[5] is table and spec[4] is False and loc == (*local, 1)


@pytest.mark.parametrize("backend,sa,sb,expected", backend_cases(MATMUL, ids=lambda c: f"{c[0]}x{c[1]}"))
def test_matmul(rng, monkeypatch, backend, sa, sb, expected):
    _, picked = _picked(monkeypatch, backend, *_matmul(rng, sa, sb))
    _check_matmul(backend, picked, expected)


@pytest.mark.parametrize("sa,sb", [((2, 3, 0), (0, 4)), ((2, 0, 5), (5, 4)), ((2, 3, 5), (5, 0))])
@pytest.mark.parametrize("backend", ["cpu", *gpu_backends()])
def test_matmul_empty(backend, sa, sb):
    """An empty K gives zeros, an empty M or N an empty output (the CPU's batched-A view once
    failed to reshape them)."""
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check_backend(model, {"a": a, "b": b}, EXACT, backend, on_device=False)


# (A shape, B shape, B's scale)
CONSTANT_B = {"cpu": [((2, 7, 31), (31, 17), 1.0)], **dict.fromkeys(("opencl", "vulkan"), [((2, 11, 24), (24, 37), 0.2)])}


@pytest.mark.parametrize("backend,sa,sb,scale", backend_cases(CONSTANT_B))
def test_matmul_constant_weights(rng, backend, sa, sb, scale):
    a, b = rand(rng, *sa), rand(rng, *sb, scale=scale)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    check_backend(model, {"a": a}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_matmul_empty_batch(rng, backend):
    a, b = np.zeros((0, 3, 5), np.float32), rand(rng, 5, 4)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a}, ["y"], {"b": b})
    check_backend(model, {"a": a}, ACCUMULATE, backend)


def test_matmul_int(rng):
    a = rng.integers(-9, 9, (3, 5)).astype(np.int32)
    b = rng.integers(-9, 9, (5, 2)).astype(np.int32)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check(m, {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("backend", gpu_backends())
def test_integer_matmul_falls_back(rng, backend):
    a, b = rng.integers(-4, 4, (3, 5)).astype(np.int32), rng.integers(-4, 4, (5, 2)).astype(np.int32)
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    s = check_backend(model, {"a": a, "b": b}, ELEMENTWISE, backend, on_device=False)
    assert f"fell back: {backend}: dtype int32" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_matmul_chain(rng, backend):
    """Two dependent GEMMs in one command buffer (a barrier between them)."""
    a, b, c = rand(rng, 2, 3, 19, 40), rand(rng, 2, 3, 40, 23, scale=0.15), rand(rng, 23, 29, scale=0.2)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("MatMul", ["m", "c"], ["y"])]
    check_backend(make_model(nodes, {"a": a, "b": b}, ["y"], {"c": c}), {"a": a, "b": b}, ACCUMULATE, backend)


TILED = [((65, 130), (130, 67)), ((1, 100), (100, 300)), ((9, 17), (17, 11)), ((4, 1, 5, 6), (1, 3, 6, 2)), ((13,), (13, 5))]


@pytest.mark.parametrize("tiles", [True, False], ids=["local-tiles", "direct"])
@pytest.mark.parametrize("sa,sb", TILED, ids=[f"{a}x{b}" for a, b in TILED])
@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_both_kernel_variants(rng, monkeypatch, backend, tiles, sa, sb):
    """OpenCL: local-memory tiles (GPUs) and direct loads (CPU devices) whatever the device here is."""
    from mnnpy.backends.opencl import gemm

    monkeypatch.setattr(gemm, "LOCAL_TILES", tiles)
    s = check_backend(*_matmul(rng, sa, sb), ACCUMULATE, backend)
    assert ("DIRECT" in launch_key(s)) != tiles
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5)
    a, b, c = rand(rng, 33, 20), rand(rng, 70, 33), rand(rng, 70)
    check_backend(make_model([node], {"a": a}, ["y"], {"b": b, "c": c}), {"a": a}, ACCUMULATE, backend)


SPLIT_K = [
    ((9, 1000), (1000, 20), "nn"),  # one work group, K = 1000: 7 slices
    ((3, 2, 17, 700), (3, 2, 700, 9), "nn"),  # batched: slices per batch
    ((2, 1, 7, 520), (1, 3, 520, 5), "table"),  # broadcast batch dims (offset table)
    ((300, 2000), (2000, 1), "nn"),  # a column: 10 x 1 groups
]


@pytest.mark.parametrize("sa,sb,kind", SPLIT_K, ids=[f"{a}x{b}" for a, b, _ in SPLIT_K])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_matmul_split_k(rng, monkeypatch, backend, sa, sb, kind):
    """Vulkan: few work groups over a long K: float32 partial products of K slices, then their
    sum (gemm_splitk)."""
    a, b = rand(rng, *sa), rand(rng, *sb, scale=1 / np.sqrt(sa[-1]))
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    _, dispatches = _picked(monkeypatch, backend, model, {"a": a, "b": b})
    (s1, spec1, groups, _), (s2, spec2, _, _) = dispatches
    assert s1 == "gemm_nn" and s2 == "gemm_splitk" and spec1[18] == spec2[18] > 1 and spec1[5] is (kind == "table")
    assert groups[2] % spec1[18] == 0


# -- Gemm --------------------------------------------------------------------------------------

C_SHAPES = {"cpu": [None, (), (1,), (7,), (1, 7), (5, 1), (5, 7)], "gpu": [None, (), (1,), (11,), (1, 11), (9, 1), (9, 11)]}
TRANS = list(itertools.product([0, 1], [0, 1]))
# ((M, K, N), (transA, transB), alpha, beta, C shape, B and C constants)
GEMM = {
    "cpu": [
        ((5, 13, 7), t, alpha, beta, c, const)
        for const in (True, False)
        for c in C_SHAPES["cpu"]
        for alpha, beta in [(1.0, 1.0), (0.5, 2.0), (-1.5, 0.0)]
        for t in TRANS
    ],
    **dict.fromkeys(("opencl", "vulkan"), [((9, 17, 11), t, 0.75, -1.5, c, True) for c in C_SHAPES["gpu"] for t in TRANS]),
}


def _gemm_id(case):
    """A test id for a ``GEMM`` row."""
    (m, k, n), t, alpha, beta, c, const = case
    return f"tA{t[0]}tB{t[1]}-a{alpha}b{beta}-{'noC' if c is None else f'C{c}'}-{'const' if const else 'inputs'}"


@pytest.mark.parametrize("backend,dims,trans,alpha,beta,cshape,const", backend_cases(GEMM, ids=_gemm_id))
def test_gemm(rng, monkeypatch, backend, dims, trans, alpha, beta, cshape, const):
    m, k, n = dims
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    names = ["a", "b"] + (["c"] if cshape is not None else [])
    node = helper.make_node("Gemm", names, ["y"], alpha=alpha, beta=beta, transA=trans[0], transB=trans[1])
    feeds, inits = {"a": a}, {}
    (inits if const else feeds)["b"] = b
    if cshape is not None:
        (inits if const else feeds)["c"] = rand(rng, *cshape)
    _, picked = _picked(monkeypatch, backend, make_model([node], feeds, ["y"], inits, opset=13), feeds)
    if backend == "vulkan":  # the transpose variant, C, alpha and beta as specialization constants
        ((shader, spec, _, _),) = picked
        assert shader == f"gemm_{'nt'[trans[0]]}{'nt'[trans[1]]}"
        assert spec[4] is (cshape is not None) and spec[6] == 0.75 and spec[7] == -1.5


@pytest.mark.parametrize("opset", [7, 9, 11])
def test_gemm_old_opsets(rng, opset):
    """Gemm-7/9 require C (unidirectional broadcast since 7, when ``broadcast`` was removed)."""
    a, b, c = rand(rng, 4, 6), rand(rng, 6, 3), rand(rng, 3)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=0, alpha=0.7)
    check(make_model([node], {"a": a}, ["y"], {"b": b, "c": c}, opset=opset), {"a": a}, **ACCUMULATE)


@pytest.mark.parametrize("beta", [0.0, 1.0])
@pytest.mark.parametrize("backend", gpu_backends())
def test_gemm_run_time_operands(rng, monkeypatch, backend, beta):
    """B and C are inputs, not constants; beta 0 ignores C."""
    a, b, c = rand(rng, 70, 33), rand(rng, 33, 66), rand(rng, 70, 1)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], beta=beta)
    feeds = {"a": a, "b": b, "c": c}
    _, picked = _picked(monkeypatch, backend, make_model([node], feeds, ["y"]), feeds)
    if backend == "vulkan":  # C read only where beta is not 0
        assert picked[0].spec[4] is (beta != 0.0)


@pytest.mark.parametrize("backend", gpu_backends())
def test_gemm_classifier(rng, monkeypatch, backend):
    """MobileNetV2/ResNet-18 head: (1, 1280) x (1000, 1280)^T + bias (Vulkan: on the GEMV shader)."""
    a, b, c = rand(rng, 1, 1280), rand(rng, 1000, 1280, scale=0.03), rand(rng, 1000)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    _, picked = _picked(monkeypatch, backend, make_model([node], {"a": a}, ["y"], {"b": b, "c": c}), {"a": a})
    if backend == "vulkan":
        assert picked[0].shader == "gemm_gemv" and picked[0].groups == (1000, 1, 1)


@pytest.mark.parametrize("trans", TRANS, ids=lambda t: f"tA{t[0]}tB{t[1]}")
@pytest.mark.parametrize("m,k,n,local", [(70, 37, 133, (8, 8, 1)), (600, 5, 900, (16, 16, 1))], ids=["32x32", "64x64"])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_gemm_several_tiles(rng, monkeypatch, backend, trans, m, k, n, local):
    """Vulkan: odd sizes across tiles in both directions and K across several K steps, every
    variant, both square tile sizes."""
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=trans[0], transB=trans[1], alpha=0.5)
    model = make_model([node], {"a": a, "b": b}, ["y"], {"c": rand(rng, n)})
    _, dispatches = _picked(monkeypatch, backend, model, {"a": a, "b": b})
    assert dispatches[0].local == local


@pytest.mark.parametrize("trans", TRANS, ids=lambda t: f"tA{t[0]}tB{t[1]}")
@pytest.mark.parametrize("cshape", [None, (1,), (13,), (11, 1), (11, 13)], ids=lambda c: "noC" if c is None else f"C{c}")
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_gemm_split_k(rng, monkeypatch, backend, trans, cshape):
    """Vulkan: alpha, beta and C (every broadcast) applied once, after the slices are added."""
    m, k, n = 11, 900, 13
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)), scale=1 / np.sqrt(k))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"], names = rand(rng, *cshape), names + ["c"]
    node = helper.make_node("Gemm", names, ["y"], transA=trans[0], transB=trans[1], alpha=0.75, beta=-1.5)
    _, dispatches = _picked(monkeypatch, backend, make_model([node], {"a": a}, ["y"], inits), {"a": a})
    assert [d.shader for d in dispatches] == [f"gemm_{'nt'[trans[0]]}{'nt'[trans[1]]}", "gemm_splitk"]


# -- GEMV: few rows, B stored (N, K) ---------------------------------------------------------

GEMV_OPENCL = [(1, 1280, 1000, (1000,)), (3, 1001, 17, (3, 17)), (8, 64, 5, None), (2, 4000, 3, (1,))]
# (m, k, n, C shape ("n": (n,), "mn": (m, n)), OpenCL: local-memory tiles, precision)
GEMV = {
    "opencl": [(*c, tiles, p) for p in ("normal", "low") for c in GEMV_OPENCL for tiles in (True, False)],
    "vulkan": [
        (m, k, n, c, None, "normal")
        for c in [None, (1,), "n", "mn"]
        for m, k, n in [(1, 64, 1), (3, 1001, 17), (8, 65, 300), (2, 4000, 5)]
    ],
}


def _gemv_id(case):
    """A test id for a ``GEMV`` row."""
    m, k, n, c, tiles, precision = case
    where = "" if tiles is None else "-local-tiles" if tiles else "-direct"
    return f"{m}x{k}x{n}-{'noC' if c is None else f'C{c}'}{where}-{precision}"


@pytest.mark.parametrize("backend,m,k,n,cshape,tiles,precision", backend_cases(GEMV, ids=_gemv_id))
def test_gemv(rng, monkeypatch, backend, m, k, n, cshape, tiles, precision):
    """Few rows with B stored (N, K): one work group per output, K split over its items
    (K not a multiple of the group, shorter than two groups, long), alpha/beta, C broadcast.
    OpenCL takes the gemv kernel on local-memory devices (GPUs), the tiled kernel with direct
    loads (CPU devices); Vulkan always the GEMV shader."""
    if backend == "opencl":
        from mnnpy.backends.opencl import gemm

        monkeypatch.setattr(gemm, "LOCAL_TILES", tiles)
    a, b = rand(rng, m, k), rand(rng, n, k, scale=1 / np.sqrt(k))
    inits, names = {"b": b}, ["a", "b"]
    if cshape is not None:
        inits["c"] = rand(rng, *{"n": (n,), "mn": (m, n)}.get(cshape, cshape))
        names.append("c")
    node = helper.make_node("Gemm", names, ["y"], transB=1, alpha=0.75, beta=-1.5)
    tol = HALF if precision == "low" else ACCUMULATE
    _, picked = _picked(monkeypatch, backend, make_model([node], {"a": a}, ["y"], inits), {"a": a}, tol, precision=precision)
    if backend == "opencl":
        assert (":gemv:" in picked[0]) == tiles
    else:
        assert [d.shader for d in picked] == ["gemm_gemv"]


@pytest.mark.parametrize("m,k,trans", [(9, 100, (0, 1)), (1, 63, (0, 1)), (1, 100, (0, 0)), (1, 100, (1, 1))])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_gemv_only_where_it_pays(rng, monkeypatch, backend, m, k, trans):
    """Vulkan: more than 8 rows, K shorter than a group, or B not stored (N, K): the tiled shader."""
    n = 7
    a = rand(rng, *((k, m) if trans[0] else (m, k)))
    b = rand(rng, *((n, k) if trans[1] else (k, n)))
    node = helper.make_node("Gemm", ["a", "b"], ["y"], transA=trans[0], transB=trans[1])
    _, dispatches = _picked(monkeypatch, backend, make_model([node], {"a": a}, ["y"], {"b": b}), {"a": a})
    assert dispatches[0].shader == f"gemm_{'nt'[trans[0]]}{'nt'[trans[1]]}"


# -- Vulkan tile and split choices (no device needed beyond the import) ----------------------


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_split_k_choice(backend):
    """Enough slices to reach about SPLIT_TARGET groups, each of at least SPLIT_MIN_K of K."""
    from mnnpy.backends.vulkan import gemm

    assert gemm.split_k(gemm.SPLIT_TARGET, 10_000) == 1 and gemm.split_k(0, 10_000) == 1
    assert gemm.split_k(1, 100) == 1 and gemm.split_k(1, 300) == 2 and gemm.split_k(1, 10_000) == gemm.SPLIT_MAX
    assert gemm.split_k(100, 10_000) == 3


@pytest.mark.parametrize("m,n", [(1, 1000), (8, 9), (9, 500), (70, 32), (70, 33), (4096, 4096)])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_tiles_fit_every_device(backend, m, n):
    """Work groups of at most 256 invocations; shared tiles within the 16 KiB every device has."""
    from mnnpy.backends.vulkan import gemm

    lx, ly = gemm.tile_config(m, n)
    assert lx * ly <= 256 and 16 * (ly * gemm.RM + lx * gemm.RN + 2) * 4 <= 16384


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_grid_limits(backend):
    """Grids beyond the work-group counts every device has are refused (the op falls back)."""
    from mnnpy.backends.vulkan import gemm

    assert gemm.grid_fits(64, 64, 3) == (True, "")
    ok, why = gemm.grid_fits(8, 64, 70000)
    assert not ok and "65535" in why
    ok, why = gemm.grid_fits(64, 64 * 65536, 1)
    assert not ok and "work groups" in why


# -- fp16 storage (precision="low") ----------------------------------------------------------


def _fp16_opencl(rng):
    """Two chained MatMuls of activations; a Gemm with constant weights."""
    a, b, c = rand(rng, 2, 3, 19, 40), rand(rng, 2, 3, 40, 23, scale=0.15), rand(rng, 23, 29, scale=0.2)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("MatMul", ["m", "c"], ["y"])]
    yield make_model(nodes, {"a": a, "b": b}, ["y"], {"c": c}), {"a": a, "b": b}
    g = helper.make_node("Gemm", ["x", "w", "bias"], ["y"], transB=1, alpha=0.5)
    x, w, bias = rand(rng, 5, 64), rand(rng, 37, 64, scale=0.15), rand(rng, 37)
    yield make_model([g], {"x": x}, ["y"], {"w": w, "bias": bias}), {"x": x}


def _fp16_vulkan(rng):
    """A MatMul of two activations, a Gemm with weights, split-K (fp16 operands, fp32
    partials), the GEMV shader."""
    yield _matmul(rng, (3, 17, 33), (3, 33, 9))
    x, w, c = rand(rng, 5, 37), rand(rng, 13, 37, scale=0.2), rand(rng, 13)
    yield make_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], {"x": x}, ["y"], {"w": w, "c": c}), {"x": x}
    a, b = rand(rng, 9, 1000), rand(rng, 1000, 20, scale=0.03)
    yield make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"]), {"a": a, "b": b}
    x, w, c = rand(rng, 1, 300), rand(rng, 10, 300, scale=0.06), rand(rng, 10)
    yield make_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], {"x": x}, ["y"], {"w": w, "c": c}), {"x": x}


@pytest.mark.parametrize("backend,models", backend_cases({"opencl": [_fp16_opencl], "vulkan": [_fp16_vulkan]}, precision="low"))
def test_fp16_storage(rng, backend, models):
    """Activations stored as fp16, arithmetic in fp32, weights fp32: within HALF of the CPU."""
    for model, feeds in models(rng):
        s = check_backend(model, feeds, HALF, backend, precision="low")
        assert storage_dtype(s) == np.float16


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("k,n,trans", [(1280, 1000, 1), (1283, 1001, 1), (512, 1000, 0), (261, 1003, 0), (64, 100, 1)])
def test_cpu_gemv_column_blocks(rng, threads, k, n, trans):
    """A classifier head's product of one row on the CPU: column blocks of ``kernels/gemv.py``
    over the threads (a multiple of 16 columns each), against onnxruntime; K not a multiple of
    the kernel's four rows, N not of its vectors; NaN and inf in the row reach every output as
    in onnxruntime."""
    import mnnpy
    from mnnpy.backends.cpu import blas
    from mnnpy.converter import convert
    from tests.oracle import assert_outputs, run_ort

    a, c = rand(rng, 1, k), rand(rng, n)
    b = rand(rng, n, k, scale=0.03) if trans else rand(rng, k, n, scale=0.03)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=trans)
    model = make_model([node], {"a": a}, ["y"], {"b": b, "c": c})
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=threads)
    for feed in (a, np.where(np.arange(k) == 7, np.float32(np.nan), a), np.where(np.arange(k) == 3, np.float32(np.inf), a)):
        feeds = {"a": feed.astype(np.float32)}
        assert_outputs(run_ort(model, feeds), [session.run(feeds)["y"]], ["y"], **ACCUMULATE)
    tasks = session.runner.plan.executions[0].mm.tasks
    if k * n < blas.GEMV_SPLIT:  # small: one call of BLAS's sgemv
        assert len(tasks) == 1 and getattr(tasks[0], "native", None) is None
        return
    assert len(tasks) == threads and all(getattr(t, "native", None) is not None for t in tasks)
    assert blas._gemv_tasks(a, np.zeros((k, n), np.float32), np.zeros((1, n), np.float32), 1) is None  # one thread: BLAS

"""BatchNormalization, Softmax, MatMul and Gemm against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand


def _bn_params(rng, c):
    return {
        "scale": rand(rng, c),
        "bias": rand(rng, c),
        "mean": rand(rng, c),
        "var": (np.abs(rand(rng, c)) + 0.1).astype(np.float32),
    }


@pytest.mark.parametrize("shape", [(2, 13, 7, 5), (3, 5), (1, 4, 9), (2, 3, 2, 3, 4)])
@pytest.mark.parametrize("opset", [7, 9, 14, 15])
def test_batchnorm(rng, shape, opset):
    x = rand(rng, *shape, scale=3)
    params = _bn_params(rng, shape[1])
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-3)
    check(make_model([node], {"x": x}, ["y"], params, opset=opset), {"x": x}, **ACCUMULATE)


def test_batchnorm_dynamic_params(rng):
    """Parameters fed as graph inputs: computed per run, not at resize."""
    x = rand(rng, 2, 6, 3, 3)
    feeds = {"x": x, **_bn_params(rng, 6)}
    node = helper.make_node("BatchNormalization", list(feeds), ["y"])
    check(make_model([node], feeds, ["y"]), feeds, **ACCUMULATE)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3, 3])
def test_softmax(rng, axis):
    x = rand(rng, 2, 13, 7, 5, scale=10)
    node = helper.make_node("Softmax", ["x"], ["y"], axis=axis)
    check(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, **ACCUMULATE)


def test_softmax_large_values(rng):
    """Numerically stable: huge logits give no inf/nan."""
    x = (rand(rng, 3, 127) * 1e4).astype(np.float32)
    node = helper.make_node("Softmax", ["x"], ["y"])
    y = check(make_model([node], {"x": x}, ["y"], opset=13), {"x": x}, **ACCUMULATE)[0]
    assert np.isfinite(y).all()


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((3, 4), (4, 5)),
        ((13,), (13, 7)),
        ((7, 13), (13,)),
        ((13,), (13,)),
        ((2, 3, 5, 4), (4, 6)),
        ((2, 1, 5, 4), (3, 4, 6)),
        ((5, 4), (2, 4, 3)),
        ((1, 127, 33), (1, 33, 9)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
    ],
)
def test_matmul(rng, sa, sb):
    a, b = rand(rng, *sa), rand(rng, *sb)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check(m, {"a": a, "b": b}, **ACCUMULATE)


def test_matmul_const_weight(rng):
    a, w = rand(rng, 2, 7, 31), rand(rng, 31, 17)
    m = make_model([helper.make_node("MatMul", ["a", "w"], ["y"])], {"a": a}, ["y"], {"w": w})
    check(m, {"a": a}, **ACCUMULATE)


def test_matmul_int(rng):
    a = rng.integers(-9, 9, (3, 5)).astype(np.int32)
    b = rng.integers(-9, 9, (5, 2)).astype(np.int32)
    m = make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"])
    check(m, {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, 2.0), (-1.5, 0.0)])
@pytest.mark.parametrize("c_shape", [None, (), (1,), (7,), (1, 7), (5, 1), (5, 7)])
@pytest.mark.parametrize("const_b", [True, False])
def test_gemm(rng, trans_a, trans_b, alpha, beta, c_shape, const_b):
    m_, k, n = 5, 13, 7
    a = rand(rng, *((k, m_) if trans_a else (m_, k)))
    b = rand(rng, *((n, k) if trans_b else (k, n)))
    ins = ["a", "b"] + (["c"] if c_shape is not None else [])
    node = helper.make_node("Gemm", ins, ["y"], alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    feeds, inits = {"a": a}, {}
    (inits if const_b else feeds)["b"] = b
    if c_shape is not None:
        (inits if const_b else feeds)["c"] = rand(rng, *c_shape)
    check(make_model([node], feeds, ["y"], inits, opset=13), feeds, **ACCUMULATE)


@pytest.mark.parametrize("opset", [7, 9, 11])
def test_gemm_old_opsets(rng, opset):
    """Gemm-7/9 require C (unidirectional broadcast since 7, when ``broadcast`` was removed)."""
    a, b, c = rand(rng, 4, 6), rand(rng, 6, 3), rand(rng, 3)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=0, alpha=0.7)
    check(make_model([node], {"a": a}, ["y"], {"b": b, "c": c}, opset=opset), {"a": a}, **ACCUMULATE)


def test_run_allocates_nothing(rng):
    """A chain of this family's kernels: matches onnxruntime, and ``run`` allocates far
    less than one activation (tracemalloc sees numpy's allocations)."""
    import tracemalloc

    from onnx import TensorProto

    import mnnpy
    from mnnpy.converter import convert
    from tests.oracle import run_ort

    x = rand(rng, 1, 32, 64, 64)
    i64 = lambda *v: np.array(v, np.int64)
    inits = _bn_params(rng, 32) | {
        "w": rand(rng, 64, 64),
        "st": i64(1),
        "en": i64(-1),
        "ax": i64(3),
        "idx": i64(3, -1, 0),
        "rs": i64(1, 32, -1),
        "raxes": i64(2),
        "gw": rand(rng, 32, 16),
        "gc": rand(rng, 16),
    }
    nodes = [
        helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"]),
        helper.make_node("Transpose", ["bn"], ["t"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["t", "w"], ["mm"]),
        helper.make_node("Softmax", ["mm"], ["sm"], axis=2),
        helper.make_node("Split", ["sm"], ["s1", "s2"], axis=1, num_outputs=2),
        helper.make_node("Concat", ["s2", "s1"], ["cat"], axis=1),
        helper.make_node("Slice", ["cat", "st", "en", "ax"], ["sl"]),
        helper.make_node("Gather", ["sl", "idx"], ["ga"], axis=2),
        helper.make_node("Reshape", ["sl", "rs"], ["r"]),
        helper.make_node("Cast", ["ga"], ["ci"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["ci"], ["cf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["r", "raxes"], ["red"], keepdims=0),
        helper.make_node("Gemm", ["red", "gw", "gc"], ["g"]),
        helper.make_node("ReduceMean", ["cf"], ["red2"], keepdims=0),
    ]
    m = make_model(nodes, {"x": x}, ["g", "red2"], inits, opset=18)
    session = mnnpy.Interpreter(convert(m)).create_session()
    for a, e in zip(session.run({"x": x}).values(), run_ort(m, {"x": x})):
        np.testing.assert_allclose(a, e, **ACCUMULATE)
    tracemalloc.start()
    try:
        for _ in range(3):
            session.run({"x": x})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes // 4, peak

"""Session and API: input errors, resize (explicit, on shape change, cached), no allocation in run."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import device_backend
from tests.oracle import ACCUMULATE, make_model, rand, run_ort

# against _expected, a float64 NumPy reference of the five ops: a one-off bound for the chain
NUMPY_REF = {"atol": 1e-6, "rtol": 1e-6}


def _net_model(rng, shape=("batch", 3, "w")):
    """x -> x*c -> Relu -> +x -> Sigmoid -> HardSwish -> y (x is read again late)."""
    x = rand(rng, 2, 3, 5)
    nodes = [
        helper.make_node("Mul", ["x", "c"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["s"]),
        helper.make_node("HardSwish", ["s"], ["y"]),
    ]
    return make_model(nodes, {"x": x}, ["y"], {"c": np.array(1.5, np.float32)}, input_shapes={"x": list(shape)})


def _expected(x):
    a = np.maximum(x * np.float32(1.5), 0) + x
    s = 1 / (1 + np.exp(-a.astype(np.float64)))
    return (s * np.clip(s / 6 + 0.5, 0, 1)).astype(np.float32)


@pytest.fixture
def session(rng):
    return mnnpy.Interpreter(convert(_net_model(rng))).create_session()


def test_descriptions(rng):
    interp = mnnpy.Interpreter(convert(_net_model(rng)))
    (i,), (o,) = interp.inputs, interp.outputs
    assert (i.name, i.shape, i.dtype) == ("x", ("batch", 3, "w"), np.dtype(np.float32))
    assert o.name == "y"
    s = interp.create_session()
    assert s.inputs == interp.inputs


def test_run_matches_numpy(session, rng):
    x = rand(rng, 2, 3, 5)
    np.testing.assert_allclose(session.run({"x": x})["y"], _expected(x), **NUMPY_REF)


def test_graph_input_read_by_a_late_op_is_not_overwritten(session, rng):
    x = rand(rng, 1, 3, 33, scale=3)
    np.testing.assert_allclose(session.run({"x": x})["y"], _expected(x), **NUMPY_REF)


@pytest.mark.parametrize(
    "feeds,match",
    [
        ({"X": np.zeros((1, 3, 4), np.float32)}, r"unknown input name.*'X'.*\['x'\]"),
        ({}, r"missing input.*'x'"),
        ({"x": np.zeros((3, 4), np.float32)}, r"input 'x': rank 2.*expected rank 3"),
        ({"x": np.zeros((1, 3, 4), np.float64)}, r"input 'x': dtype float64, expected float32"),
        ({"x": np.zeros((1, 4, 4), np.float32)}, r"input 'x': dim 1 is 4, expected 3"),
    ],
)
def test_input_errors(session, feeds, match):
    with pytest.raises(mnnpy.InputError, match=match):
        session.run(feeds)


def test_not_a_dict(session):
    with pytest.raises(mnnpy.InputError):
        session.run([np.zeros((1, 3, 4), np.float32)])


def test_shape_the_model_cannot_take(rng):
    x = rand(rng, 3, 6)
    model = make_model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        {"x": x},
        ["y"],
        {"shape": np.array([3, 4], np.int64)},
        input_shapes={"x": ["n", 6]},
    )
    session = mnnpy.Interpreter(convert(model)).create_session()
    with pytest.raises(mnnpy.ShapeError, match="Reshape") as e:
        session.run({"x": x})  # 18 elements cannot be (3, 4)
    assert isinstance(e.value, mnnpy.MnnpyError)
    assert "'x': (3, 6)" in str(e.value)
    assert session.run({"x": x[:2]})["y"].shape == (3, 4)  # the session is still usable


def test_second_run_with_another_shape(session, rng):
    for shape in [(2, 3, 5), (1, 3, 17), (4, 3, 1)]:
        x = rand(rng, *shape)
        y = session.run({"x": x})["y"]
        assert y.shape == shape
        np.testing.assert_allclose(y, _expected(x), **NUMPY_REF)
    assert session.output_shapes == {"y": (4, 3, 1)}


def test_explicit_resize_then_run(session, rng):
    session.resize({"x": (1, 3, 9)})
    assert session.output_shapes == {"y": (1, 3, 9)}
    count = session.resize_count
    x = rand(rng, 1, 3, 9)
    np.testing.assert_allclose(session.run({"x": x})["y"], _expected(x), **NUMPY_REF)
    assert session.resize_count == count  # run used the plan made by resize
    with pytest.raises(mnnpy.InputError, match="rank"):
        session.resize({"x": (1, 9)})


def test_resize_cache(session, rng):
    a, b = rand(rng, 1, 3, 8), rand(rng, 2, 3, 4)
    session.run({"x": a})
    session.run({"x": b})
    assert session.resize_count == 2
    y = session.run({"x": a})["y"]  # back to an earlier shape: no new plan
    assert session.resize_count == 2
    np.testing.assert_allclose(y, _expected(a), **NUMPY_REF)
    for _ in range(3):
        session.run({"x": a})
    assert session.resize_count == 2


def test_load_short_path(tmp_path, rng):
    path = tmp_path / "m.mnnpy"
    convert(_net_model(rng), path)
    x = rand(rng, 1, 3, 4)
    np.testing.assert_allclose(mnnpy.load(path).run({"x": x})["y"], _expected(x), **NUMPY_REF)
    np.testing.assert_allclose(mnnpy.load(str(path), num_threads=1).run({"x": x})["y"], _expected(x), **NUMPY_REF)


def test_bad_session_options(rng):
    interp = mnnpy.Interpreter(convert(_net_model(rng)))
    with pytest.raises(mnnpy.InputError):
        interp.create_session(precision="ultra")
    with pytest.raises(mnnpy.InputError):
        interp.create_session(num_threads=0)
    with pytest.raises(mnnpy.BackendUnavailableError):
        interp.create_session(backend="no-such-backend")


# ------------------------------------------------------------- no allocation during run
def _big_model():
    """Six elementwise ops on (1, 32, 128, 128) float32 (2 MiB per activation)."""
    x = np.zeros((1, 32, 128, 128), np.float32)
    nodes = [
        helper.make_node("Mul", ["x", "c"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Add", ["b", "x"], ["d"]),
        helper.make_node("Sigmoid", ["d"], ["e"]),
        helper.make_node("HardSwish", ["e"], ["f"]),
        helper.make_node("Mul", ["f", "d"], ["y"]),
    ]
    return make_model(nodes, {"x": x}, ["y"], {"c": np.array(0.5, np.float32)}), x.nbytes


def test_run_reuses_the_arena(rng):
    model, _ = _big_model()
    session = mnnpy.Interpreter(convert(model)).create_session()
    x = rand(rng, 1, 32, 128, 128)
    session.run({"x": x})
    arena = device_backend(session).arena
    address = arena.ctypes.data
    for _ in range(3):
        session.run({"x": x})
        assert device_backend(session).arena is arena and arena.ctypes.data == address


def test_run_allocates_no_intermediates(rng):
    model, act_bytes = _big_model()
    session = mnnpy.Interpreter(convert(model)).create_session(num_threads=1)
    x = rand(rng, 1, 32, 128, 128)
    session.run({"x": x})  # plan and warm up
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        outs = [session.run({"x": x}) for _ in range(4)]
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # what stays is the four returned outputs; the peak may add at most one activation-sized temporary
    assert current - base <= 4 * act_bytes + (256 << 10)
    assert peak - base <= 5 * act_bytes + (256 << 10), f"run allocated {(peak - base) / act_bytes:.1f} activations"
    assert len(outs) == 4


def test_run_allocates_nothing(rng):
    """A chain of CPU kernels (BatchNormalization, Transpose, MatMul, Softmax, Split, Concat,
    Slice, Gather, Reshape, Cast, ReduceMean, Gemm): matches onnxruntime, and ``run`` allocates far
    less than one activation (tracemalloc sees numpy's allocations)."""
    x = rand(rng, 1, 32, 64, 64)
    i64 = lambda *v: np.array(v, np.int64)
    inits = {
        "scale": rand(rng, 32),
        "bias": rand(rng, 32),
        "mean": rand(rng, 32),
        "var": (np.abs(rand(rng, 32)) + 0.1).astype(np.float32),
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

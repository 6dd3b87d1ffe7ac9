"""Data-movement ops against onnxruntime (exact): Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, Concat, Slice, Shape, Gather, Cast, ConstantOfShape, and a shape-computing chain."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import EXACT, check, make_model, rand, run_ort

I64 = np.int64
INT64_MAX, INT64_MIN = np.iinfo(I64).max, np.iinfo(I64).min


def _one(op, x, inits=None, opset=17, ins=None, **attrs):
    """A one-node model of ``op`` on input ``x`` plus constant ``inits`` (in order)."""
    names = ins or (["x"] + list(inits or {}))
    node = helper.make_node(op, names, ["y"], **attrs)
    return make_model([node], {"x": x}, ["y"], inits, opset=opset)


@pytest.mark.parametrize(
    "shape,target",
    [
        ((2, 3, 4), [4, -1]),
        ((2, 3, 4), [0, -1]),
        ((2, 3, 4), [0, 0, 2, 2]),
        ((2, 3, 4), [-1]),
        ((2, 3, 4), [2, 1, 12, 1]),
        ((1, 13), [13]),
        ((5,), [1, 5, 1]),
        ((2, 3, 4), [-1, 0, 4]),
    ],
)
def test_reshape(rng, shape, target):
    x = rand(rng, *shape)
    check(_one("Reshape", x, {"s": np.array(target, I64)}), {"x": x}, **EXACT)


def test_reshape_allowzero(rng):
    """allowzero=1: a 0 in ``shape`` is a real 0 (empty output)."""
    x = rand(rng, 0, 3)
    check(_one("Reshape", x, {"s": np.array([3, 0], I64)}, opset=14, allowzero=1), {"x": x}, **EXACT)


def test_reshape_of_constant_and_chained(rng):
    """A reshape of a constant (not aliasable) followed by one of a dynamic tensor."""
    x = rand(rng, 6, 2)
    w = rand(rng, 3, 4)
    nodes = [
        helper.make_node("Reshape", ["w", "s"], ["w2"]),
        helper.make_node("Reshape", ["x", "s"], ["x2"]),
        helper.make_node("Add", ["x2", "w2"], ["y"]),
        helper.make_node("Reshape", ["y", "s2"], ["z"]),
    ]
    m = make_model(nodes, {"x": x}, ["y", "z"], {"w": w, "s": np.array([12], I64), "s2": np.array([2, 6], I64)})
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("axis,opset", [(a, o) for a in [0, 1, 2, 4, -1, -4] for o in [9, 13] if a >= 0 or o >= 11])
def test_flatten(rng, axis, opset):
    x = rand(rng, 2, 3, 5, 7)
    check(_one("Flatten", x, opset=opset, axis=axis), {"x": x}, **EXACT)


@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 2], [2, -5]])
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(rng, axes, opset):
    x = rand(rng, 1, 3, 1, 7, 1)
    if axes is None:
        m = _one("Squeeze", x, opset=opset)
    elif opset < 13:
        m = _one("Squeeze", x, opset=opset, axes=axes)
    else:
        m = _one("Squeeze", x, {"axes": np.array(axes, I64)}, opset=opset)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, -1], [4, 0, 2]])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(rng, axes, opset):
    x = rand(rng, 3, 5)
    if opset < 13:
        m = _one("Unsqueeze", x, opset=opset, axes=axes)
    else:
        m = _one("Unsqueeze", x, {"axes": np.array(axes, I64)}, opset=opset)
    check(m, {"x": x}, **EXACT)


def test_unsqueeze_scalar(rng):
    x = np.array(3.5, np.float32)
    check(_one("Unsqueeze", x, {"axes": np.array([0], I64)}), {"x": x}, **EXACT)


@pytest.mark.parametrize("perm", [None, [0, 2, 3, 1], [3, 2, 1, 0], [1, 0, 2, 3], [0, 1, 2, 3]])
def test_transpose(rng, perm):
    x = rand(rng, 2, 3, 5, 7)
    attrs = {} if perm is None else {"perm": perm}
    check(_one("Transpose", x, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat(rng, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for k, s in enumerate(shapes):
        s[axis] = 1 + 2 * k
    feeds = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    node = helper.make_node("Concat", list(feeds), ["y"], axis=axis)
    check(make_model([node], feeds, ["y"]), feeds, **EXACT)


def test_concat_empty_and_const(rng):
    a, e = rand(rng, 2, 3), rand(rng, 2, 0)
    node = helper.make_node("Concat", ["a", "e", "c", "a"], ["y"], axis=1)
    m = make_model([node], {"a": a, "e": e}, ["y"], {"c": np.arange(10, dtype=np.float32).reshape(2, 5)})
    check(m, {"a": a, "e": e}, **EXACT)


def test_concat_int64(rng):
    a, b = rng.integers(-5, 5, (3,)).astype(I64), rng.integers(-5, 5, (4,)).astype(I64)
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=0)
    check(make_model([node], {"a": a, "b": b}, ["y"]), {"a": a, "b": b}, **EXACT)


SLICES = [
    ([1], [4], [1], [1]),
    ([0, 1], [2, 5], [0, 2], None),
    ([-3], [-1], [1], [1]),
    ([4], [0], [1], [-1]),  # negative step
    ([-1], [INT64_MIN], [2], [-2]),  # backwards to the beginning
    ([INT64_MAX], [-100], [0], [-1]),  # out-of-range start, walk all backwards
    ([1], [INT64_MAX], [-1], [1]),  # INT64 max end
    ([-100], [100], [1], [3]),  # out-of-range both ends
    ([5], [1], [1], [1]),  # empty
    ([2, 0, 1], [-1, 3, 4], [-1, 0, 1], [1, 2, 2]),
    ([0], [1000], [0], [INT64_MAX]),  # a huge step
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
def test_slice(rng, starts, ends, axes, steps):
    x = rand(rng, 5, 7, 9)
    inits = {"s": np.array(starts, I64), "e": np.array(ends, I64), "a": np.array(axes, I64)}
    if steps is not None:
        inits["st"] = np.array(steps, I64)
    check(_one("Slice", x, inits), {"x": x}, **EXACT)


def test_slice_no_axes_int32(rng):
    x = rand(rng, 5, 7)
    inits = {"s": np.array([1, -3], np.int32), "e": np.array([-1, 100], np.int32)}
    check(_one("Slice", x, inits), {"x": x}, **EXACT)


@pytest.mark.parametrize("starts,ends,axes", [([1], [4], None), ([0, 2], [-1, 100], [1, 0]), ([-2], [2**62], [1])])
def test_slice_opset9(rng, starts, ends, axes):
    x = rand(rng, 5, 7)
    attrs = {"starts": starts, "ends": ends} | ({"axes": axes} if axes else {})
    check(_one("Slice", x, opset=9, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10}, {"start": 3, "end": 1}])
def test_shape(rng, attrs):
    x = rand(rng, 2, 3, 5, 7)
    check(_one("Shape", x, opset=15, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("indices", [[0, -1, 2], [[1, -2], [0, 0]], -3, [2]])
def test_gather(rng, axis, indices):
    x = rand(rng, 4, 5, 3)
    idx = np.array(indices, I64)
    check(_one("Gather", x, {"i": idx}, axis=axis), {"x": x}, **EXACT)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_gather_dynamic_indices(rng, dtype):
    x, idx = rand(rng, 6, 4), np.array([[5, -6], [-1, 0], [3, 3]], dtype)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    check(make_model([node], {"x": x, "i": idx}, ["y"]), {"x": x, "i": idx}, **EXACT)


def test_gather_int_data(rng):
    x = rng.integers(-100, 100, (7, 3)).astype(I64)
    check(_one("Gather", x, {"i": np.array([-7, 6], I64)}, axis=0), {"x": x}, **EXACT)


@pytest.mark.parametrize("bad", [6, -7])
def test_gather_out_of_range(rng, bad):
    """An index outside [-d, d) is a clear MnnpyError (at resize or run), not a crash."""
    x = rand(rng, 6, 4)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    m = make_model([node], {"x": x, "i": np.array([0, bad], I64)}, ["y"])
    session = mnnpy.Interpreter(convert(m)).create_session()
    with pytest.raises(mnnpy.MnnpyError, match="out of range"):
        session.run({"x": x, "i": np.array([0, bad], I64)})
    mc = _one("Gather", x, {"i": np.array([bad], I64)})
    with pytest.raises(mnnpy.MnnpyError, match="out of range"):
        mnnpy.Interpreter(convert(mc)).create_session().run({"x": x})


CASTS = [
    (np.float32, TensorProto.INT32),
    (np.float32, TensorProto.INT64),
    (np.float32, TensorProto.BOOL),
    (np.float32, TensorProto.FLOAT16),
    (np.float32, TensorProto.UINT8),
    (np.int64, TensorProto.FLOAT),
    (np.int32, TensorProto.INT64),
    (np.int64, TensorProto.INT32),
    (np.bool_, TensorProto.FLOAT),
    (np.float16, TensorProto.FLOAT),
    (np.float32, TensorProto.DOUBLE),
    (np.int64, TensorProto.BOOL),
    (np.float32, TensorProto.FLOAT),
]


@pytest.mark.parametrize("src,to", CASTS)
@pytest.mark.parametrize("opset", [7, 13, 19])
def test_cast(rng, src, to, opset):
    if src == np.bool_:
        x = rng.integers(0, 2, (3, 11)).astype(np.bool_)
    elif np.dtype(src).kind == "i":
        x = rng.integers(-1000, 1000, (3, 11)).astype(src)
    else:
        x = rand(rng, 3, 11, scale=50).astype(src)
        x[0, :6] = [0.0, -0.0, 2.5, -2.5, 0.99, -0.99]
        if to == TensorProto.UINT8:
            x = np.abs(x)
    check(_one("Cast", x, opset=opset, to=to), {"x": x}, **EXACT)


@pytest.mark.parametrize("value", [None, np.array([7], I64), np.array([-1.5], np.float32), np.array([1], np.int32)])
def test_constant_of_shape(rng, value):
    x = rand(rng, 2, 3, 4)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["y"], **({} if value is None else {"value": numpy_helper.from_array(value)})),
    ]
    check(make_model(nodes, {"x": x}, ["y"]), {"x": x}, **EXACT)


def test_constant_of_shape_large(rng):
    """Large enough not to be folded at resize: filled at run time."""
    s = np.array([3, 200, 100], I64)
    node = helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([2.0], np.float32)))
    x = rand(rng, 3, 200, 100)
    m = make_model([node, helper.make_node("Add", ["x", "c"], ["y"])], {"x": x}, ["y"], {"s": s})
    check(m, {"x": x}, **EXACT)


def _rec_chain_model(x):
    """PP-OCR-rec-like: (N, C, H, W) -> (N, W, C*H) via Shape/Gather/Slice/Mul/Unsqueeze/Concat/Reshape."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "i0"], ["n"], axis=0),
        helper.make_node("Gather", ["shp", "i3"], ["w"], axis=0),
        helper.make_node("Slice", ["shp", "s1", "s3"], ["ch"]),
        helper.make_node("Split", ["ch"], ["c", "h"], axis=0),
        helper.make_node("Mul", ["c", "h"], ["chp"]),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Unsqueeze", ["w", "ax0"], ["w1"]),
        helper.make_node("Concat", ["n1", "chp", "w1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Cast", ["shp"], ["shp_f"], to=TensorProto.FLOAT),
    ]
    inits = {
        "i0": np.array(0, I64),
        "i3": np.array(-1, I64),
        "s1": np.array([1], I64),
        "s3": np.array([3], I64),
        "ax0": np.array([0], I64),
    }
    return make_model(nodes, {"x": x}, ["t", "shp_f"], inits, opset=13, input_shapes={"x": ["N", 3, 4, "W"]})


def test_shape_chain_two_sizes(rng):
    """A shape-computing chain with dynamic dims, run with two input shapes on one session."""
    x1, x2 = rand(rng, 1, 3, 4, 17), rand(rng, 2, 3, 4, 40)
    m = _rec_chain_model(x1)
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, x2, x1):
        out = session.run({"x": x})
        expected = run_ort(m, {"x": x})
        for name, e in zip(["t", "shp_f"], expected):
            assert out[name].dtype == e.dtype and out[name].shape == e.shape
            np.testing.assert_array_equal(out[name], e)

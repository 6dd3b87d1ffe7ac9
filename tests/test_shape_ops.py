"""Shape and indexing ops the CPU backend alone runs, against onnxruntime: Shape, Cast,
ConstantOfShape, Expand, Tile, Range, GatherElements, GatherND, ScatterND, ScatterElements (and
Scatter), OneHot, DepthToSpace, SpaceToDepth, Trilu, CumSum, NonZero, EyeLike, Size, Einsum, and a
shape-computing chain. The data movement every backend runs (Reshape, Transpose, Slice, Concat,
Split, Gather) is in tests/test_movement.py."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand, run_mnnpy, run_ort

I64 = np.int64


def _one(op, feeds, inits=None, opset=17, ins=None, outs=("y",), **attrs):
    """A one-node model of ``op``: graph inputs ``feeds`` then constants ``inits``, in order."""
    names = ins or (list(feeds) + list(inits or {}))
    node = helper.make_node(op, names, list(outs), **attrs)
    return make_model([node], feeds, list(outs), inits, opset=opset)


# -- Expand / Tile / Range -----------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,target",
    [((3, 1), [2, 3, 5]), ((1, 4), [3, 1]), ((2, 1, 3), [1, 7, 1]), ((), [2, 3]), ((5,), [5]), ((1,), [0, 1])],
)
def test_expand(rng, shape, target):
    x = rand(rng, *shape)
    check(_one("Expand", {"x": x}, {"s": np.array(target, I64)}), {"x": x}, **EXACT)


def test_expand_shape_from_graph_input(rng):
    x = rand(rng, 3, 1).astype(np.int32)
    s = np.array([2, 3, 4], I64)
    check(_one("Expand", {"x": x, "s": s}, opset=8), {"x": x, "s": s}, **EXACT)


@pytest.mark.parametrize("shape,reps", [((2, 3), [3, 2]), ((3, 1, 5), [1, 4, 2]), ((7,), [3]), ((2, 3), [0, 2]), ((4,), [1])])
def test_tile(rng, shape, reps):
    x = rand(rng, *shape)
    check(_one("Tile", {"x": x}, {"r": np.array(reps, I64)}), {"x": x}, **EXACT)


def test_tile_bool(rng):
    x = rng.random((3, 2)) > 0.5
    check(_one("Tile", {"x": x}, {"r": np.array([2, 3], I64)}, opset=13), {"x": x}, **EXACT)


# a one-off bound for float Range (elements start + i * delta, rounded), as the cases were written
RANGE_FLOAT = {"atol": 1e-6, "rtol": 1e-6}


@pytest.mark.parametrize(
    "start,limit,delta,dtype",
    [
        (3, 9, 3, np.int64),
        (10, 4, -2, np.int32),
        (0, 17, 4, np.int64),
        (5, 5, 1, np.int64),
        (5, 1, 1, np.int32),
        (1.5, 7.0, 0.75, np.float32),
        (-2.0, -7.3, -1.1, np.float64),
    ],
)
def test_range(start, limit, delta, dtype):
    ins = {n: np.array(v, dtype) for n, v in zip("sld", (start, limit, delta))}
    m = _one("Range", {}, ins, opset=11)
    tol = EXACT if np.dtype(dtype).kind == "i" else RANGE_FLOAT
    check(m, {}, **tol)


def test_range_from_shape(rng):
    """limit computed at resize from a graph input's shape, the output used downstream."""
    x = rand(rng, 7, 3)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
        helper.make_node("Squeeze", ["s", "ax"], ["n"]),
        helper.make_node("Range", ["zero", "n", "one"], ["r"]),
        helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["rf", "ax1"], ["col"]),
        helper.make_node("Add", ["x", "col"], ["y"]),
    ]
    inits = {"ax": np.array([0], I64), "ax1": np.array([1], I64), "zero": np.array(0, I64), "one": np.array(1, I64)}
    check(make_model(nodes, {"x": x}, ["y"], inits, opset=15), {"x": x}, **EXACT)


# -- Gather / Scatter ----------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_gather_elements(rng, axis):
    x = rand(rng, 4, 5, 3)
    shape = [3, 4, 2]
    shape[axis] = 6
    idx = rng.integers(-x.shape[axis], x.shape[axis], shape).astype(I64)
    check(_one("GatherElements", {"x": x}, {"i": idx}, axis=axis), {"x": x}, **EXACT)


def test_gather_elements_dynamic_int32_indices(rng):
    x = rand(rng, 5, 7)
    idx = rng.integers(-7, 7, (5, 9)).astype(np.int32)
    check(_one("GatherElements", {"x": x, "i": idx}, axis=1, opset=11), {"x": x, "i": idx}, **EXACT)


@pytest.mark.parametrize(
    "xshape,ishape,b",
    [
        ((5, 4, 3), (6, 2), 0),
        ((5, 4, 3), (2, 3, 3), 0),
        ((5, 4, 3), (7, 1), 0),
        ((3, 4, 5), (3, 2, 1), 1),
        ((2, 3, 4, 5), (2, 3, 6, 2), 2),
    ],
)
def test_gather_nd(rng, xshape, ishape, b):
    x = rand(rng, *xshape)
    dims = np.array(xshape[b : b + ishape[-1]])
    idx = (rng.integers(0, 1 << 20, ishape) % dims - (rng.random(ishape) < 0.3) * dims).astype(I64)
    check(_one("GatherND", {"x": x, "i": idx}, opset=13, batch_dims=b), {"x": x, "i": idx}, **EXACT)


def test_gather_nd_opset11(rng):
    x = rng.integers(0, 100, (4, 6)).astype(np.int32)
    idx = np.array([[[1, 2]], [[3, -1]]], I64)
    check(_one("GatherND", {"x": x}, {"i": idx}, opset=11), {"x": x}, **EXACT)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(rng, reduction):
    x = rand(rng, 6, 5, 3)
    if reduction == "none":
        flat = rng.permutation(30)[:8]
        idx = np.stack([flat // 5, flat % 5], -1).reshape(2, 4, 2).astype(I64)
        idx[0, 0, 0] -= 6
    else:
        idx = rng.integers(0, 3, (2, 4, 2)).astype(I64)  # repeated rows accumulate
    upd = rand(rng, 2, 4, 3)
    m = _one("ScatterND", {"x": x, "i": idx, "u": upd}, opset=18, reduction=reduction)
    check(m, {"x": x, "i": idx, "u": upd}, **ACCUMULATE)


def test_scatter_nd_full_index_opset11(rng):
    x = rng.integers(-50, 50, (4, 3)).astype(I64)
    idx = np.array([[0, 1], [3, 2], [2, 0]], I64)
    upd = np.array([7, 8, 9], I64)
    check(_one("ScatterND", {"x": x}, {"i": idx, "u": upd}, opset=11), {"x": x}, **EXACT)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(rng, axis, reduction):
    x = rand(rng, 5, 6)
    shape = [3, 4]
    n = x.shape[axis]
    if reduction == "none":  # distinct targets along axis within each line, some negative
        idx = np.argsort(rng.random(shape), axis=axis) - n * (rng.random(shape) < 0.3)
    else:
        idx = rng.integers(-n, n, shape)
    idx = idx.astype(I64)
    upd = rand(rng, *shape)
    m = _one("ScatterElements", {"x": x, "i": idx, "u": upd}, opset=18, axis=axis, reduction=reduction)
    check(m, {"x": x, "i": idx, "u": upd}, **ACCUMULATE)


@pytest.mark.parametrize("opset", [9, 10])
def test_scatter_deprecated(rng, opset):
    x = np.zeros((3, 3), np.float32)
    idx = np.array([[1, 0, 2], [0, 2, 1]], I64)
    upd = rand(rng, 2, 3)
    check(_one("Scatter", {"x": x}, {"i": idx, "u": upd}, opset=opset, axis=0), {"x": x}, **EXACT)


# -- OneHot ----------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
def test_one_hot(rng, axis):
    idx = rng.integers(-7, 9, (3, 4)).astype(I64)  # some out of range
    m = _one("OneHot", {"i": idx}, {"d": np.array(6, I64), "v": np.array([-1.5, 2.0], np.float32)}, axis=axis)
    check(m, {"i": idx}, **EXACT)


def test_one_hot_float_indices_and_depth(rng):
    idx = np.array([0.0, 2.7, -1.2, 4.0, 1.0], np.float32)
    m = _one("OneHot", {"i": idx}, {"d": np.array(4.0, np.float32), "v": np.array([0, 5], np.float32)}, opset=11)
    check(m, {"i": idx}, **EXACT)


# -- DepthToSpace / SpaceToDepth ------------------------------------------------------------
@pytest.mark.parametrize("mode,b,opset", [("DCR", 2, 13), ("CRD", 2, 13), ("CRD", 3, 11), (None, 2, 9)])
def test_depth_to_space(rng, mode, b, opset):
    x = rand(rng, 2, 2 * b * b, 3, 5)
    attrs = {"blocksize": b} | ({"mode": mode} if mode else {})
    check(_one("DepthToSpace", {"x": x}, opset=opset, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("b,opset", [(2, 13), (3, 9), (1, 13)])
def test_space_to_depth(rng, b, opset):
    x = rand(rng, 2, 3, 3 * b, 2 * b)
    check(_one("SpaceToDepth", {"x": x}, opset=opset, blocksize=b), {"x": x}, **EXACT)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_inverts_depth_to_space(rng, mode):
    """SpaceToDepth (opset-28 ``mode``) undoes DepthToSpace of the same mode."""
    x = rand(rng, 1, 12, 3, 4)
    nodes = [
        helper.make_node("DepthToSpace", ["x"], ["s"], blocksize=2, mode=mode),
        helper.make_node("SpaceToDepth", ["s"], ["y"], blocksize=2, mode=mode),
    ]
    session = mnnpy.Interpreter(convert(make_model(nodes, {"x": x}, ["y"], opset=28))).create_session()
    np.testing.assert_array_equal(session.run({"x": x})["y"], x)


# -- Trilu / CumSum ----------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, 7, -9])
def test_trilu(rng, upper, k):
    x = rng.integers(1, 10, (2, 4, 6)).astype(I64)
    inits = None if k is None else {"k": np.array(k, I64)}
    check(_one("Trilu", {"x": x}, inits, opset=14, upper=upper), {"x": x}, **EXACT)


def test_trilu_k_from_graph_input(rng):
    x = rand(rng, 5, 3)
    for k in (-1, 1):
        kv = np.array(k, I64)
        check(_one("Trilu", {"x": x, "k": kv}, opset=14, upper=0), {"x": x, "k": kv}, **EXACT)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum(rng, exclusive, reverse, axis):
    x = rand(rng, 4, 7, 3)
    m = _one("CumSum", {"x": x}, {"a": np.array(axis, I64)}, opset=14, exclusive=exclusive, reverse=reverse)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_cumsum_dtypes_and_axis_input(rng, dtype):
    x = rng.integers(-20, 20, (5, 3)).astype(dtype)
    a = np.array(1, np.int32)
    check(_one("CumSum", {"x": x, "a": a}, opset=11, exclusive=1), {"x": x, "a": a}, **EXACT)


# -- NonZero / EyeLike / Size -----------------------------------------------------------------
def test_nonzero_of_constant(rng):
    """NonZero of a constant is known at resize; its result feeds a run-time Gather."""
    c = np.array([[0, 3, 0, 1], [2, 0, 0, 5]], np.int32)
    x = rand(rng, 8)
    nodes = [
        helper.make_node("NonZero", ["c"], ["nz"]),
        helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceMean", ["nzf"], ["m"], keepdims=0),
        helper.make_node("Add", ["x", "m"], ["y"]),
    ]
    check(make_model(nodes, {"x": x}, ["nz", "y"], {"c": c}, opset=13), {"x": x}, **EXACT)


def test_nonzero_of_a_graph_input_is_planned_per_content(rng):
    """NonZero's output shape depends on its input's contents: the session reads them at resize."""
    x = rand(rng, 3, 3)
    session = mnnpy.Interpreter(convert(_one("NonZero", {"x": x}, opset=13))).create_session()
    for k in range(3):
        xk = np.where(rand(rng, 3, 3) > 0.3 * k, 1.0, 0.0).astype(np.float32)
        np.testing.assert_array_equal(session.run({"x": xk})["y"], np.array(np.nonzero(xk)))
    big = rand(rng, 300, 300)  # too large to key plans by: planned at run, after the ops before it
    out = mnnpy.Interpreter(convert(_one("NonZero", {"x": big}, opset=13))).create_session().run({"x": big})
    np.testing.assert_array_equal(out["y"], np.array(np.nonzero(big)))


@pytest.mark.parametrize("shape,k", [((4, 4), 0), ((3, 5), 1), ((5, 3), -2), ((3, 4), 9), ((3, 4), -3), ((70, 90), 3)])
@pytest.mark.parametrize("dtype", [None, TensorProto.INT32, TensorProto.DOUBLE])
def test_eye_like(rng, shape, k, dtype):
    x = rand(rng, *shape)
    attrs = {"k": k} | ({"dtype": dtype} if dtype is not None else {})
    check(_one("EyeLike", {"x": x}, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 4), (7,)])
def test_size(rng, shape):
    x = rand(rng, *shape)
    check(_one("Size", {"x": x}), {"x": x}, **EXACT)


# -- Einsum --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ij->ji", [(3, 5)]),
        ("ij->i", [(4, 7)]),
        ("ij,jk->ik", [(3, 5), (5, 6)]),
        ("bij,bjk->bik", [(2, 3, 5), (2, 5, 4)]),
        ("...ii->...i", [(2, 3, 4, 4)]),
        ("i,i", [(9,), (9,)]),
        ("ij,jk", [(3, 5), (5, 2)]),
        ("ba,ca", [(3, 5), (4, 5)]),
        ("...ij,...jk->...ik", [(2, 1, 3, 5), (1, 4, 5, 2)]),
        ("ij,jk,kl->il", [(3, 4), (4, 5), (5, 2)]),
        ("i,j->ij", [(3,), (5,)]),
        ("ii", [(4, 4)]),
        (" ij -> ", [(3, 4)]),
    ],
)
def test_einsum(rng, eq, shapes):
    feeds = {f"x{i}": rand(rng, *s) for i, s in enumerate(shapes)}
    check(_one("Einsum", feeds, equation=eq, opset=12), feeds, **ACCUMULATE)


def test_einsum_int(rng):
    feeds = {"a": rng.integers(-5, 5, (3, 4)).astype(np.int32), "b": rng.integers(-5, 5, (4,)).astype(np.int32)}
    check(_one("Einsum", feeds, equation="ij,j->i", opset=12), feeds, **EXACT)


def test_einsum_bad_equation_is_shape_error(rng):
    feeds = {"a": rand(rng, 3, 4), "b": rand(rng, 5, 2)}
    with pytest.raises(mnnpy.MnnpyError):
        run_mnnpy(_one("Einsum", feeds, equation="ij,jk->ik", opset=12), feeds)


# -- Shape, Cast, ConstantOfShape ---------------------------------------------------------------


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2, "end": 10}, {"start": 3, "end": 1}])
def test_shape(rng, attrs):
    x = rand(rng, 2, 3, 5, 7)
    check(_one("Shape", {"x": x}, opset=15, **attrs), {"x": x}, **EXACT)


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
    check(_one("Cast", {"x": x}, opset=opset, to=to), {"x": x}, **EXACT)


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

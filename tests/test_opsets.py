"""Converter canonicalisation across ONNX opsets 7..newest, against onnxruntime.

Each case is checked twice:
1. *canonical form*: onnxruntime on the original model == onnxruntime on the converted
   Net written back as opset-18 ONNX (``tests/net_to_onnx.py``): the rewrite is right
   independent of mnnpy's kernels;
2. *end to end*: mnnpy == onnxruntime (``oracle.check``), when the CPU backend has
   every op of the canonical graph.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from mnnpy.backends.cpu.registry import executions
from mnnpy.converter import to_net
from tests.net_to_onnx import to_onnx
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand, run_ort

NEWEST = onnx.defs.onnx_opset_version()
I64 = np.int64


def _compare(expected, actual, tol):
    assert len(actual) == len(expected)
    for e, a in zip(expected, actual):
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(a, e, **tol) if tol["atol"] else np.testing.assert_array_equal(a, e)


def verify(model, feeds, tol=EXACT):
    """Both checks of the module docstring; returns the converted Net."""
    net = to_net(model, optimize_graph=False)
    for op in net.main.ops:  # tensor attributes as TensorProto for onnx.helper
        op.attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in op.attrs.items()}
    back = to_onnx(net)
    back.graph.ClearField("output")
    back.graph.output.extend(helper.make_empty_tensor_value_info(o.name) for o in model.graph.output)
    _compare(run_ort(model, feeds), run_ort(back, feeds), tol)
    if all(op.type in executions() for op in net.main.ops):
        check(model, feeds, **tol)
    return net


def valid(opsets, axes_values, since=11):
    """``(opset, axis/axes)`` pairs, leaving out negative axes before opset ``since`` (they were invalid)."""

    def negative(a):
        return a is not None and (min(a) if isinstance(a, list) else a) < 0

    return [(o, a) for o in opsets for a in axes_values if not (negative(a) and o < since)]


def one(op, x, opset, inits=None, ins=None, outs=("y",), tol=EXACT, **attrs):
    """Verify a one-node model of ``op`` on input ``x`` (+ constant ``inits``)."""
    names = ins if ins is not None else ["x"] + list(inits or {})
    node = helper.make_node(op, names, list(outs), **attrs)
    return verify(make_model([node], {"x": x}, list(outs), inits, opset=opset), {"x": x}, tol)


# -- Softmax: coerce-to-2-D before 13 -------------------------------------------------------
@pytest.mark.parametrize("opset,axis", valid([7, 11, 12, 13, NEWEST], [None, 0, 1, 2, 3, -1, -3]))
def test_softmax(rng, opset, axis):
    x = rand(rng, 2, 3, 4, 5, scale=3)
    one("Softmax", x, opset, tol=ACCUMULATE, **({} if axis is None else {"axis": axis}))


@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_dynamic_shape_two_sizes(rng, opset):
    """Coerce-to-2-D with dynamic dims: one session, two input shapes."""
    import mnnpy
    from mnnpy.converter import convert

    x1, x2 = rand(rng, 1, 3, 7, 5), rand(rng, 2, 3, 4, 9)
    m = make_model(
        [helper.make_node("Softmax", ["x"], ["y"], axis=2)], {"x": x1}, ["y"], opset=opset, input_shapes={"x": ["N", 3, "H", "W"]}
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, x2, x1):
        np.testing.assert_allclose(session.run({"x": x})["y"], run_ort(m, {"x": x})[0], **ACCUMULATE)


# -- Clip: attributes before 11 -------------------------------------------------------------
@pytest.mark.parametrize("opset", [7, 11, 12, 13, NEWEST])
@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-1.0, None), (None, 0.5), (None, None)])
def test_clip(rng, opset, bounds):
    x = rand(rng, 3, 17, scale=4)
    lo, hi = bounds
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        one("Clip", x, opset, **attrs)
        return
    inits = {k: np.array(v, np.float32) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    ins = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    while ins[-1] == "":
        ins.pop()
    one("Clip", x, opset, inits, ins=ins)


# -- axes attribute -> input: Squeeze/Unsqueeze (< 13), ReduceMean (< 18) ------------------
def _axes_op(op, x, opset, since, axes, **attrs):
    if axes is None:
        return one(op, x, opset, tol=ACCUMULATE if op.startswith("Reduce") else EXACT, **attrs)
    if opset < since:
        return one(op, x, opset, tol=ACCUMULATE if op.startswith("Reduce") else EXACT, axes=axes, **attrs)
    return one(op, x, opset, {"axes": np.array(axes, I64)}, tol=ACCUMULATE if op.startswith("Reduce") else EXACT, **attrs)


@pytest.mark.parametrize("opset,axes", valid([7, 11, 13, 21, NEWEST], [None, [0], [0, 3], [-1]]))
def test_squeeze(rng, opset, axes):
    _axes_op("Squeeze", rand(rng, 1, 5, 3, 1), opset, 13, axes)


@pytest.mark.parametrize("opset,axes", valid([7, 11, 13, 21, NEWEST], [[0], [1, 3], [-1]]))
def test_unsqueeze(rng, opset, axes):
    _axes_op("Unsqueeze", rand(rng, 5, 3), opset, 13, axes)


@pytest.mark.parametrize("opset,axes", valid([7, 11, 13, 18, NEWEST], [None, [1], [0, 2], [-1]]))
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean(rng, opset, axes, keepdims):
    _axes_op("ReduceMean", rand(rng, 3, 5, 7), opset, 18, axes, keepdims=keepdims)


# -- Slice: attributes before 10 ------------------------------------------------------------
@pytest.mark.parametrize("opset", [7, 9, 10, 11, 13, NEWEST])
@pytest.mark.parametrize("starts,ends,axes", [([1], [3], [0]), ([0, -3], [2, 1000], None), ([2], [-1], [1])])
def test_slice(rng, opset, starts, ends, axes):
    x = rand(rng, 4, 6)
    if opset < 10:
        one("Slice", x, opset, starts=starts, ends=ends, **({"axes": axes} if axes else {}))
        return
    inits = {"s": np.array(starts, I64), "e": np.array(ends, I64)}
    if axes:
        inits["a"] = np.array(axes, I64)
    one("Slice", x, opset, inits)


@pytest.mark.parametrize("opset", [10, 13, NEWEST])
def test_slice_steps(rng, opset):
    x = rand(rng, 7, 6)
    inits = {"s": np.array([-1, 0], I64), "e": np.array([-100, 6], I64), "a": np.array([0, 1], I64), "st": np.array([-2, 3], I64)}
    one("Slice", x, opset, inits)


# -- Pad: attributes before 11 --------------------------------------------------------------
@pytest.mark.parametrize("opset", [7, 11, 13, 18, 19, NEWEST])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(rng, opset, mode):
    x = rand(rng, 2, 3, 5)
    pads = [0, 1, 2, 0, 2, 1]
    if opset < 11:
        one("Pad", x, opset, mode=mode, pads=pads, **({"value": 1.5} if mode == "constant" else {}))
        return
    inits = {"pads": np.array(pads, I64)}
    if mode == "constant":
        inits["value"] = np.array(1.5, np.float32)
    one("Pad", x, opset, inits, mode=mode)


# -- Resize / Upsample ----------------------------------------------------------------------
def _interp_tol(mode):
    """Nearest picks elements (exact); linear/cubic sum weighted neighbours."""
    return EXACT if mode == "nearest" else ACCUMULATE


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("opset,scales_attr", [(7, True), (9, False)])
def test_upsample(rng, mode, opset, scales_attr):
    x = rand(rng, 1, 2, 3, 5)
    scales = [1.0, 1.0, 2.0, 1.7]
    if scales_attr:
        one("Upsample", x, opset, mode=mode, scales=scales, tol=_interp_tol(mode))
    else:
        one("Upsample", x, opset, {"s": np.array(scales, np.float32)}, mode=mode, tol=_interp_tol(mode))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 3], [1, 1, 0.6, 0.5], [1, 1, 0.6, 1.7], [1, 1, 2.5, 0.7]])
def test_resize_10(rng, mode, scales):
    """Resize-10: asymmetric; nearest rounds down when upsampling, up when downsampling."""
    x = rand(rng, 1, 2, 10, 7)
    one("Resize", x, 10, {"s": np.array(scales, np.float32)}, mode=mode, tol=_interp_tol(mode))


RESIZE11 = [
    ("nearest", "half_pixel", "round_prefer_floor"),
    ("nearest", "asymmetric", "floor"),
    ("nearest", "align_corners", "round_prefer_ceil"),
    ("nearest", "tf_half_pixel_for_nn", "round_prefer_floor"),
    ("nearest", "tf_half_pixel_for_nn", "floor"),
    ("linear", "half_pixel", None),
    ("linear", "pytorch_half_pixel", None),
    ("linear", "align_corners", None),
    ("cubic", "half_pixel", None),
]


@pytest.mark.parametrize("mode,coord,nearest", RESIZE11)
@pytest.mark.parametrize("use_sizes", [False, True])
def test_resize_11(rng, mode, coord, nearest, use_sizes):
    """Resize-11: required roi/scales given as empty tensors when unused."""
    x = rand(rng, 1, 2, 6, 9)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord} | ({"nearest_mode": nearest} if nearest else {})
    empty = np.zeros(0, np.float32)
    if use_sizes:
        inits = {"roi": empty, "scales": empty, "sizes": np.array([1, 2, 4, 13], I64)}
    else:
        inits = {"roi": empty, "scales": np.array([1, 1, 1.5, 0.7], np.float32)}
    one("Resize", x, 11, inits, tol=_interp_tol(mode), **attrs)


@pytest.mark.parametrize("opset", [13, 18, 19, NEWEST])
def test_resize_new(rng, opset):
    x = rand(rng, 1, 2, 6, 9)
    one("Resize", x, opset, {"sizes": np.array([1, 2, 12, 5], I64)}, ins=["x", "", "", "sizes"], mode="linear", tol=ACCUMULATE)


@pytest.mark.parametrize("opset", [18, NEWEST])
def test_resize_axes(rng, opset):
    x = rand(rng, 1, 2, 6, 9)
    one("Resize", x, opset, {"scales": np.array([2.0, 0.5], np.float32)}, ins=["x", "", "scales"], mode="nearest", axes=[2, 3])


# -- BatchNormalization, Dropout, Constant --------------------------------------------------
@pytest.mark.parametrize("opset", [7, 9, 14, 15, NEWEST])
def test_batchnorm(rng, opset):
    x = rand(rng, 2, 3, 4, 5)
    p = {k: rand(rng, 3) for k in ("s", "b", "m")} | {"v": np.abs(rand(rng, 3)) + 0.5}
    one("BatchNormalization", x, opset, p, tol=ACCUMULATE, epsilon=1e-4)


def test_batchnorm_spatial0(rng):
    """Opset-7 ``spatial=0``: per-activation statistics of shape (C, D1)."""
    x = rand(rng, 2, 3, 4)
    p = {k: rand(rng, 3, 4) for k in ("s", "b", "m")} | {"v": np.abs(rand(rng, 3, 4)) + 0.5}
    net = one("BatchNormalization", x, 7, p, tol=ACCUMULATE, spatial=0)
    assert [op.type for op in net.main.ops] == ["Mul", "Add"]


@pytest.mark.parametrize("opset", [7, 10, 12, 13, NEWEST])
@pytest.mark.parametrize("mask", [False, True])
def test_dropout(rng, opset, mask):
    x = rand(rng, 3, 5)
    extra = {"ratio": np.array(0.3, np.float32)} if opset >= 12 else {}
    outs = ("y", "mask") if mask else ("y",)
    one("Dropout", x, opset, extra, outs=outs, **({"ratio": 0.3} if opset < 12 else {}))


CONSTANTS = [
    (7, "value", numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))),
    (12, "value_float", 2.5),
    (12, "value_floats", [1.0, -2.0, 3.0]),
    (12, "value_int", 7),
    (12, "value_ints", [3, 1]),
    (NEWEST, "value", numpy_helper.from_array(np.array(4, I64))),
]


@pytest.mark.parametrize("opset,key,value", CONSTANTS)
def test_constant(rng, opset, key, value):
    x = rand(rng, 2, 3)
    nodes = [
        helper.make_node("Constant", [], ["c"], **{key: value}),
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Identity", ["c"], ["y"]),
    ]
    verify(make_model(nodes, {"x": x}, ["y", "s"], opset=opset), {"x": x})


# -- ops copied as they are, at the oldest and the newest opset ----------------------------
@pytest.mark.parametrize("opset", [7, 9, 13, NEWEST])
def test_passthrough_ops(rng, opset):
    """Reshape, Cast (``to`` as int), Gemm, MatMul, Flatten, Transpose, Concat, Gather, Shape, Identity."""
    x = rand(rng, 2, 3, 4)
    inits = {"shape": np.array([6, 4], I64), "w": rand(rng, 4, 5), "c": rand(rng, 5), "idx": np.array([1, 0], I64)}
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Gemm", ["r", "w", "c"], ["g"], alpha=0.5, beta=2.0),
        helper.make_node("MatMul", ["x", "w"], ["mm"]),
        helper.make_node("Flatten", ["mm"], ["f"], axis=2),
        helper.make_node("Transpose", ["f"], ["t"], perm=[1, 0]),
        helper.make_node("Concat", ["t", "t"], ["cat"], axis=1),
        helper.make_node("Gather", ["cat", "idx"], ["ga"], axis=1),
        helper.make_node("Shape", ["ga"], ["sh"]),
        helper.make_node("Cast", ["sh"], ["cs"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["g"], ["ci"], to=TensorProto.INT32),
        helper.make_node("Identity", ["ga"], ["id"]),
    ]
    outs = ["g", "t", "id", "cs", "ci"]
    verify(make_model(nodes, {"x": x}, outs, inits, opset=opset), {"x": x}, ACCUMULATE)


@pytest.mark.parametrize("opset", [9, 13, NEWEST])
def test_constant_of_shape(rng, opset):
    x = rand(rng, 2, 3)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(np.array([3], I64))),
    ]
    verify(make_model(nodes, {"x": x}, ["y"], opset=opset), {"x": x})


@pytest.mark.parametrize("opset", [7, 11, 13, 18, NEWEST])
def test_split(rng, opset):
    x = rand(rng, 6, 4)
    outs = ["a", "b"]
    if opset < 13:
        node = helper.make_node("Split", ["x"], outs, axis=0, split=[2, 4])
        inits = {}
    else:
        node = helper.make_node("Split", ["x", "s"], outs, axis=0)
        inits = {"s": np.array([2, 4], I64)}
    verify(make_model([node], {"x": x}, outs, inits, opset=opset), {"x": x})

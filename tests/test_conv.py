"""Conv (im2col, pointwise, depthwise kernels; fused activations) and ConvTranspose against onnxruntime."""

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.ir import Graph, Net, Op, TensorDesc
from tests.oracle import ACCUMULATE, check, make_model, rand, run_ort


def conv_model(rng, op, xs, ws, bias=True, **attrs):
    x, w = rand(rng, *xs), rand(rng, *ws, scale=0.5)
    inits, ins = {"w": w}, ["x", "w"]
    if bias:
        m_out = ws[0] if op == "Conv" else ws[1] * attrs.get("group", 1)
        inits["b"], ins = rand(rng, m_out), ins + ["b"]
    return make_model([helper.make_node(op, ins, ["y"], **attrs)], {"x": x}, ["y"], inits), x


CONV_CASES = [
    # (x shape, w shape, attrs); odd sizes throughout
    ((1, 8, 13, 11), (6, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 5, 13, 11), (7, 5, 3, 3), {}),
    ((1, 8, 13, 11), (6, 8, 3, 5), {"pads": [1, 0, 2, 3], "strides": [2, 3]}),
    ((1, 4, 17, 13), (3, 4, 3, 3), {"dilations": [2, 3], "pads": [2, 1, 2, 3]}),
    ((2, 8, 13, 11), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ((1, 12, 9, 7), (8, 3, 1, 1), {"group": 4}),
    ((1, 7, 13, 11), (5, 7, 1, 1), {}),
    ((2, 7, 13, 11), (5, 7, 1, 1), {}),
    ((1, 7, 13, 11), (5, 7, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 31, 29), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 5, 7, 9), (4, 5, 5, 5), {"pads": [4, 4, 4, 4]}),
    ((1, 5, 13), (4, 5, 3), {"strides": [2], "pads": [1, 2]}),
    ((2, 3, 5, 6, 7), (4, 3, 3, 2, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 2]}),
    # kn2row (stride 1, M <= C/2): pads, asymmetric pads, dilations, batch, 1xK kernels
    ((1, 16, 13, 11), (5, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 12, 13, 11), (6, 12, 3, 3), {"pads": [0, 2, 1, 0]}),
    ((1, 14, 17, 13), (7, 14, 3, 5), {"dilations": [2, 1], "pads": [2, 2, 1, 0]}),
    ((1, 9, 7, 9), (3, 9, 1, 3), {"pads": [0, 1, 0, 1]}),
    ((1, 10, 6, 5), (4, 10, 3, 3), {}),
]
AUTO_PADS = ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv(rng, xs, ws, attrs, bias):
    m, x = conv_model(rng, "Conv", xs, ws, bias, **attrs)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("auto_pad", AUTO_PADS)
@pytest.mark.parametrize("k,s", [(3, 1), (3, 2), (4, 3), (2, 2)])
def test_conv_auto_pad(rng, auto_pad, k, s):
    m, x = conv_model(rng, "Conv", (1, 3, 13, 10), (4, 3, k, k), strides=[s, s], auto_pad=auto_pad)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize(
    "xs,k,attrs",
    [
        ((1, 16, 13, 11), 3, {"pads": [1, 1, 1, 1]}),
        ((2, 8, 13, 11), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 8, 14, 15), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
        ((1, 8, 13, 11), 5, {"pads": [2, 1, 0, 2], "strides": [1, 2], "dilations": [2, 1]}),
        ((1, 9, 7, 7), 3, {"auto_pad": "SAME_UPPER", "strides": [3, 2]}),
        ((1, 9, 7, 7), 3, {"auto_pad": "VALID"}),
        ((1, 40, 57, 61), 3, {"pads": [1, 1, 1, 1]}),
    ],
)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_depthwise(rng, xs, k, attrs, bias):
    c = xs[1]
    m, x = conv_model(rng, "Conv", xs, (c, 1, k, k), bias, group=c, **attrs)
    check(m, {"x": x}, **ACCUMULATE)


def test_conv_depthwise_multiplier(rng):
    m, x = conv_model(rng, "Conv", (1, 6, 13, 11), (12, 1, 3, 3), group=6, pads=[1, 1, 1, 1])
    check(m, {"x": x}, **ACCUMULATE)


def test_conv_dynamic_weights(rng):
    x, w, b = rand(rng, 1, 4, 9, 7), rand(rng, 6, 4, 3, 3), rand(rng, 6)
    m = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], {"x": x, "w": w, "b": b}, ["y"])
    check(m, {"x": x, "w": w, "b": b}, **ACCUMULATE)


ACTIVATIONS = [
    ("Relu", [], {}),
    ("Clip", [0.0, 6.0], {}),
    ("HardSwish", [], {}),
    ("Sigmoid", [], {}),
    ("Tanh", [], {}),
    ("HardSigmoid", [0.2, 0.5], {"alpha": 0.2, "beta": 0.5}),
    ("LeakyRelu", [0.1], {"alpha": 0.1}),
]


def fused_conv_net(x_shape, w, b, conv_attrs, act, params) -> Net:
    """A Net of one Conv with a fused activation, built directly in the IR."""
    g = Graph()
    tx = g.add_tensor(TensorDesc("x", np.dtype(np.float32), x_shape))
    tw = g.add_tensor(TensorDesc("w", np.dtype(np.float32), w.shape, w))
    tb = g.add_tensor(TensorDesc("b", np.dtype(np.float32), b.shape, b))
    ty = g.add_tensor(TensorDesc("y", np.dtype(np.float32), None))
    attrs = dict(conv_attrs, activation=act, activation_params=list(params))
    g.ops.append(Op("Conv", "conv", [tx, tw, tb], [ty], attrs))
    g.inputs, g.outputs = [tx], [ty]
    return Net(graphs=[g])


@pytest.mark.parametrize("act,params,onnx_attrs", ACTIVATIONS)
@pytest.mark.parametrize("kind", ["im2col", "pointwise", "depthwise"])
def test_conv_fused_activation(rng, act, params, onnx_attrs, kind):
    c = 6
    ws, attrs = {
        "im2col": ((5, c, 3, 3), {"pads": [1, 1, 1, 1]}),
        "pointwise": ((5, c, 1, 1), {}),
        "depthwise": ((c, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": c, "strides": [2, 2]}),
    }[kind]
    x, w, b = rand(rng, 1, c, 13, 11, scale=3), rand(rng, *ws), rand(rng, ws[0])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"], **attrs)]
    inits = {"w": w, "b": b}
    if act == "Clip":
        nodes.append(helper.make_node("Clip", ["t", "lo", "hi"], ["y"]))
        inits.update(lo=np.array(params[0], np.float32), hi=np.array(params[1], np.float32))
    else:
        nodes.append(helper.make_node(act, ["t"], ["y"], **onnx_attrs))
    (expected,) = run_ort(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    actual = mnnpy.Interpreter(fused_conv_net(x.shape, w, b, attrs, act, params)).create_session().run({"x": x})["y"]
    np.testing.assert_allclose(actual, expected, **ACCUMULATE)


@pytest.mark.parametrize(
    "ws,attrs",
    [
        ((6, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
        ((6, 6, 1, 1), {}),
        ((6, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 6}),
    ],
)
def test_conv_second_run_new_shape(rng, ws, attrs):
    cin = 6 if attrs.get("group") or ws[1] == 6 else ws[1]
    w, b = rand(rng, *ws), rand(rng, ws[0])
    x1 = rand(rng, 1, cin, 13, 11)
    m = make_model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)],
        {"x": x1},
        ["y"],
        {"w": w, "b": b},
        input_shapes={"x": ["N", cin, "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, cin, 7, 17), x1):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)


CONVT_CASES = [
    ((1, 4, 7, 5), (4, 3, 3, 3), {}),
    ((2, 4, 7, 5), (4, 3, 2, 2), {"strides": [2, 2]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 4, 7, 5), (4, 3, 3, 2), {"strides": [2, 2], "dilations": [2, 3]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [3, 2], "output_padding": [2, 1]}),
    ((1, 6, 7, 5), (6, 2, 3, 3), {"group": 3, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "output_shape": [14, 10]}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 4, 7, 5), (4, 3, 4, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 4, 13), (4, 3, 4), {"strides": [3], "pads": [1, 2]}),
    ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVT_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose(rng, xs, ws, attrs, bias):
    m, x = conv_model(rng, "ConvTranspose", xs, ws, bias, **attrs)
    check(m, {"x": x}, **ACCUMULATE)


def test_conv_transpose_second_run_new_shape(rng):
    w, b = rand(rng, 4, 3, 2, 2), rand(rng, 3)
    x1 = rand(rng, 1, 4, 7, 5)
    m = make_model(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2])],
        {"x": x1},
        ["y"],
        {"w": w, "b": b},
        input_shapes={"x": ["N", 4, "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 4, 9, 13)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)


def test_chained_convs_share_temporaries_correctly(rng):
    """Executions share one workspace: every run must rewrite the padding zeros and bias ones."""
    x = rand(rng, 1, 8, 15, 13)
    inits = {
        "w1": rand(rng, 12, 8, 3, 3, scale=0.3),
        "b1": rand(rng, 12),
        "w2": rand(rng, 12, 1, 5, 5, scale=0.3),
        "b2": rand(rng, 12),
        "w3": rand(rng, 5, 12, 3, 3, scale=0.3),
        "b3": rand(rng, 5),
        "w4": rand(rng, 6, 5, 7, 7, scale=0.3),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["a"], ["a2"]),
        helper.make_node("Conv", ["a2", "w2", "b2"], ["b"], pads=[2, 2, 2, 2], group=12),
        helper.make_node("Conv", ["b", "w3", "b3"], ["c"], pads=[1, 0, 1, 2]),
        helper.make_node("Conv", ["c", "w4"], ["y"], pads=[3, 3, 3, 3], strides=[2, 2]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], inits)
    session = mnnpy.Interpreter(convert(model)).create_session()
    for _ in range(3):
        xk = rand(rng, 1, 8, 15, 13)
        np.testing.assert_allclose(session.run({"x": xk})["y"], run_ort(model, {"x": xk})[0], **ACCUMULATE)


@pytest.mark.parametrize(
    "xs,k,attrs,act",
    [
        ((1, 24, 5, 19), 5, {"pads": [2, 2, 2, 2]}, None),
        ((2, 7, 3, 13), 3, {"pads": [1, 0, 1, 2]}, None),
        ((1, 8, 4, 11), 3, {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, "Relu"),
        ((1, 5, 2, 9), 5, {"pads": [2, 2, 2, 2]}, "HardSwish"),
    ],
)
def test_depthwise_on_short_maps_channels_innermost(rng, xs, k, attrs, act):
    """Short, wide maps (PP-OCR rec) take the channels-innermost depthwise kernel."""
    c = xs[1]
    x, w, b = rand(rng, *xs), rand(rng, c, 1, k, k, scale=0.5), rand(rng, c)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t" if act else "y"], group=c, **attrs)]
    if act:
        nodes.append(helper.make_node(act, ["t"], ["y"]))
    model = make_model(nodes, {"x": x}, ["y"], {"w": w, "b": b})
    session = mnnpy.Interpreter(convert(model)).create_session()
    assert type(session._plan.executions[0].kernel).__name__ == "_DepthwiseRows"
    check(model, {"x": x}, **ACCUMULATE)

"""Optimisation passes: each on a small graph, results against onnxruntime, op counts before/after.

The optimised Net is checked twice: exported back to ONNX (fused activations expanded)
and run by onnxruntime, which needs no mnnpy kernel; and run by mnnpy itself when
the CPU kernels it needs exist.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper

from mnnpy.backends.cpu.registry import executions
from mnnpy.converter import to_net
from mnnpy.converter.optimize import op_counts, optimize
from tests.net_to_onnx import to_onnx
from tests.oracle import ACCUMULATE, check, make_model, rand, run_ort


def _optimised(model, stats=None):
    net = to_net(model, optimize_graph=False)
    before = op_counts(net)
    optimize(net, stats)
    return net, before, op_counts(net)


# a one-off bound for the fused HardSwish against the subgraph it replaces: x * clip(x/6 + 1/2)
# with 1/6 (or alpha 0.16666667) rounded to float32 differs from HardSwish in the last bits
HARDSWISH_FUSED = {"atol": 1e-5, "rtol": 1e-5}


def _same_as_ort(model, feeds, net, tol=ACCUMULATE):
    """The optimised net (as ONNX) gives onnxruntime's outputs for the original model, same names."""
    expected = run_ort(model, feeds)
    exported = to_onnx(net)
    assert [o.name for o in exported.graph.output] == [o.name for o in model.graph.output]
    assert [i.name for i in exported.graph.input] == [i.name for i in model.graph.input if i.name in feeds]
    for e, a in zip(expected, run_ort(exported, feeds)):
        np.testing.assert_allclose(a, e, **tol)
    needed = {op.type for op in net.main.ops}
    if needed <= set(executions()):
        check(model, feeds, **tol)


def _conv_model(rng, tail_nodes, tail_inits=None, bias=True, c=3, m=4, group=1, out="y", pads=(1, 1, 1, 1)):
    x = rand(rng, 1, c, 9, 11)
    inits = {"W": rand(rng, m, c // group, 3, 3, scale=0.5)}
    ins = ["x", "W"]
    if bias:
        inits["B"] = rand(rng, m)
        ins.append("B")
    nodes = [helper.make_node("Conv", ins, ["t"], group=group, pads=list(pads)), *tail_nodes]
    inits.update(tail_inits or {})
    return make_model(nodes, {"x": x}, [out], inits), {"x": x}


# ------------------------------------------------------------------- constant folding
def test_constant_folding_chain(rng):
    x = rand(rng, 2, 6)
    nodes = [
        helper.make_node("Add", ["c1", "c2"], ["s"]),
        helper.make_node("Mul", ["s", "c2"], ["p"]),
        helper.make_node("Reshape", ["p", "shape"], ["q"]),
        helper.make_node("Add", ["x", "q"], ["y"]),
    ]
    inits = {"c1": rand(rng, 12), "c2": rand(rng, 12), "shape": np.array([2, 6], np.int64)}
    model = make_model(nodes, {"x": x}, ["y"], inits)
    stats = {}
    net, before, after = _optimised(model, stats)
    assert before == Counter({"Add": 2, "Mul": 1, "Reshape": 1})
    assert after == Counter({"Add": 1})
    assert stats["fold_constants"] == 3
    assert sum(t.data is not None for t in net.main.tensors) == 1  # unused constants dropped
    _same_as_ort(model, {"x": x}, net)


def test_constant_folding_shape_of_constant(rng):
    x = rand(rng, 3, 4)
    nodes = [helper.make_node("Shape", ["c"], ["s"]), helper.make_node("Reshape", ["x", "s"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], {"c": rand(rng, 4, 3)})
    net, _, after = _optimised(model)
    assert after == Counter({"Reshape": 1})
    _same_as_ort(model, {"x": x}, net)


# -------------------------------------------------------------------- BatchNormalization
def _bn(rng, m, name="y", src="t"):
    inits = {
        "g": rand(rng, m) + 1.5,
        "be": rand(rng, m),
        "mu": rand(rng, m),
        "var": np.abs(rand(rng, m)) + 0.1,
    }
    return helper.make_node("BatchNormalization", [src, "g", "be", "mu", "var"], [name], epsilon=1e-3), inits


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 1), (True, 3)])
def test_fold_batchnorm_into_conv(rng, bias, group):
    bn, inits = _bn(rng, 6)
    model, feeds = _conv_model(rng, [bn], inits, bias=bias, c=3 * group // group * (3 if group == 3 else 1), m=6, group=group)
    net, before, after = _optimised(model)
    assert before["BatchNormalization"] == 1 and after == Counter({"Conv": 1})
    _same_as_ort(model, feeds, net)


def test_fold_batchnorm_into_conv_transpose(rng):
    x = rand(rng, 1, 4, 5, 6)
    bn, inits = _bn(rng, 6)
    inits.update({"W": rand(rng, 4, 3, 3, 3, scale=0.5), "B": rand(rng, 6)})
    nodes = [helper.make_node("ConvTranspose", ["x", "W", "B"], ["t"], group=2, strides=[2, 2]), bn]
    model = make_model(nodes, {"x": x}, ["y"], inits)
    net, _, after = _optimised(model)
    assert after == Counter({"ConvTranspose": 1})
    _same_as_ort(model, {"x": x}, net)


def test_no_fold_when_conv_output_has_two_readers(rng):
    bn, inits = _bn(rng, 4)
    model, feeds = _conv_model(rng, [bn, helper.make_node("Add", ["y", "t"], ["z"])], inits, out="z")
    net, _, after = _optimised(model)
    assert after == Counter({"Conv": 1, "BatchNormalization": 1, "Add": 1})
    _same_as_ort(model, feeds, net)


# ------------------------------------------------------------------ constant scale/shift
def test_fold_affine_after_and_before_conv(rng):
    tail = [
        helper.make_node("Mul", ["a", "t"], ["u"]),
        helper.make_node("Add", ["u", "b"], ["v"]),
        helper.make_node("Relu", ["v"], ["r"]),
        helper.make_node("Mul", ["r", "a2"], ["r2"]),
        helper.make_node("Sub", ["r2", "b2"], ["r3"]),
        helper.make_node("Conv", ["r3", "W2"], ["y"]),  # unpadded: scale and shift fold in
    ]
    inits = {
        "a": np.array([1.7], np.float32),
        "b": rand(rng, 1, 4, 1, 1),
        "a2": np.array(0.5, np.float32),
        "b2": np.array([0.25], np.float32),
        "W2": rand(rng, 5, 4, 1, 1),
    }
    model, feeds = _conv_model(rng, tail, inits)
    net, before, after = _optimised(model)
    assert sum(before.values()) == 7 and after == Counter({"Conv": 2})
    _same_as_ort(model, feeds, net)


def test_no_shift_fold_into_padded_conv(rng):
    tail = [helper.make_node("Add", ["t", "b"], ["u"]), helper.make_node("Conv", ["u", "W2"], ["y"], pads=[1, 1, 1, 1])]
    model, feeds = _conv_model(rng, tail, {"b": np.array([0.5], np.float32), "W2": rand(rng, 2, 4, 3, 3)}, bias=False)
    net, _, after = _optimised(model)
    assert after == Counter({"Conv": 2})  # the shift went into the first Conv's bias instead
    _same_as_ort(model, feeds, net)


def test_a_scale_by_zero_before_a_conv_folds(rng):
    """``Conv(x * 0)``: the zero scale folds into the Conv's weights like any other (``1 / 0``
    was computed for every scale, Div or not, and stopped the conversion)."""
    tail = [
        helper.make_node("Relu", ["t"], ["r"]),
        helper.make_node("Mul", ["r", "a"], ["u"]),
        helper.make_node("Conv", ["u", "W2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    model, feeds = _conv_model(rng, tail, {"a": np.array([0.0], np.float32), "W2": rand(rng, 2, 4, 3, 3)})
    net, _, after = _optimised(model)
    assert after == Counter({"Conv": 2}), after  # the Relu fused into the first
    _same_as_ort(model, feeds, net)


def test_no_fold_of_spatial_constant(rng):
    tail = [helper.make_node("Mul", ["t", "s"], ["y"])]
    model, feeds = _conv_model(rng, tail, {"s": rand(rng, 1, 1, 9, 11)})
    net, _, after = _optimised(model)
    assert after == Counter({"Conv": 1, "Mul": 1})
    _same_as_ort(model, feeds, net)


# ---------------------------------------------------------------------- activations
ACTS = [
    ("Relu", {}, {}, "Relu", []),
    ("Clip", {}, {"lo": 0.0, "hi": 6.0}, "Clip", [0.0, 6.0]),
    ("Clip", {}, {"lo": -1.0}, "Clip", [-1.0, 3.4028234663852886e38]),
    ("HardSwish", {}, {}, "HardSwish", [1.0, 0.0]),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, {}, "HardSigmoid", [0.3, 0.4]),
    ("Sigmoid", {}, {}, "Sigmoid", []),
    ("LeakyRelu", {"alpha": 0.2}, {}, "LeakyRelu", [0.2]),
    ("Tanh", {}, {}, "Tanh", []),
]


@pytest.mark.parametrize("op,attrs,bounds,act,params", ACTS, ids=[a[0] + str(len(a[2])) for a in ACTS])
def test_fuse_activation(rng, op, attrs, bounds, act, params):
    ins = ["t"] + [k for k in ("lo", "hi") if k in bounds]
    inits = {k: np.array(v, np.float32) for k, v in bounds.items()}
    model, feeds = _conv_model(rng, [helper.make_node(op, ins, ["y"], **attrs)], inits)
    net, _, after = _optimised(model)
    assert after == Counter({"Conv": 1})
    conv = net.main.ops[0]
    assert conv.attrs["activation"] == act
    np.testing.assert_allclose(conv.attrs["activation_params"], params, rtol=1e-6)
    assert net.main.tensors[conv.outputs[0]].name == "y"
    _same_as_ort(model, feeds, net)


def test_clip_with_runtime_bound_is_not_fused(rng):
    x = rand(rng, 1, 3, 9, 11)
    w = rand(rng, 4, 3, 3, 3)
    nodes = [helper.make_node("Conv", ["x", "W"], ["t"]), helper.make_node("Clip", ["t", "lo"], ["y"])]
    lo = np.array(0.1, np.float32)
    model = make_model(nodes, {"x": x, "lo": lo}, ["y"], {"W": w})
    _, _, after = _optimised(model)
    assert after == Counter({"Conv": 1, "Clip": 1})


# ---------------------------------------------------------------- hard-swish patterns
def _hs_nodes(variant):
    add = helper.make_node("Add", ["x", "three"] if variant % 2 == 0 else ["three", "x"], ["a"])
    clip = helper.make_node("Clip", ["a", "zero", "six"], ["c"])
    if variant in (0, 1):
        return [add, clip, helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    if variant == 2:
        return [add, clip, helper.make_node("Mul", ["c", "x"], ["m"]), helper.make_node("Mul", ["sixth", "m"], ["y"])]
    return [add, clip, helper.make_node("Div", ["c", "six"], ["d"]), helper.make_node("Mul", ["d", "x"], ["y"])]


@pytest.mark.parametrize("variant", [0, 1, 2, 3])
def test_hardswish_from_clip(rng, variant):
    x = rand(rng, 2, 5, 7, scale=4)
    consts = {
        "three": np.array([3.0], np.float32),
        "zero": np.array(0.0, np.float32),
        "six": np.array(6.0, np.float32),
        "sixth": np.array([1 / 6], np.float32),
    }
    model = make_model(_hs_nodes(variant), {"x": x}, ["y"], consts)
    net, _, after = _optimised(model)
    assert after == Counter({"HardSwish": 1})
    assert [net.main.tensors[t].name for t in net.main.outputs] == ["y"]
    _same_as_ort(model, {"x": x}, net, tol=HARDSWISH_FUSED)


@pytest.mark.parametrize("alpha,fused", [(0.16666667, True), (0.2, False)])
def test_hardswish_from_hardsigmoid(rng, alpha, fused):
    x = rand(rng, 3, 8, scale=4)
    nodes = [helper.make_node("HardSigmoid", ["x"], ["h"], alpha=alpha, beta=0.5), helper.make_node("Mul", ["x", "h"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"])
    net, _, after = _optimised(model)
    assert after == (Counter({"HardSwish": 1}) if fused else Counter({"HardSigmoid": 1, "Mul": 1}))
    _same_as_ort(model, {"x": x}, net, tol=HARDSWISH_FUSED)


def test_hardswish_pattern_kept_when_intermediate_is_shared(rng):
    x = rand(rng, 2, 5)
    nodes = _hs_nodes(0) + [helper.make_node("Add", ["c", "y"], ["z"])]
    consts = {"three": np.array(3.0, np.float32), "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32)}
    model = make_model(nodes, {"x": x}, ["z"], consts)
    _, before, after = _optimised(model)
    assert after == before


# ------------------------------------------------------------------ no-ops, dead code
def test_identity_and_neutral_ops_removed(rng):
    x = rand(rng, 2, 3)
    nodes = [
        helper.make_node("Identity", ["x"], ["i"]),
        helper.make_node("Mul", ["i", "one"], ["m"]),
        helper.make_node("Relu", ["m"], ["r"]),
        helper.make_node("Add", ["zero", "r"], ["s"]),
        helper.make_node("Identity", ["s"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], {"one": np.array([1.0], np.float32), "zero": np.array(0.0, np.float32)})
    net, _, after = _optimised(model)
    assert after == Counter({"Relu": 1})
    assert net.main.tensors[net.main.ops[0].outputs[0]].name == "y"  # output name kept
    _same_as_ort(model, {"x": x}, net)


def test_identity_of_graph_input_to_output_is_kept(rng):
    x = rand(rng, 2, 3)
    model = make_model([helper.make_node("Identity", ["x"], ["y"])], {"x": x}, ["y"])
    net, _, after = _optimised(model)
    assert after == Counter({"Identity": 1})
    _same_as_ort(model, {"x": x}, net)


def test_mul_by_one_that_would_broadcast_is_kept(rng):
    x = rand(rng, 4)
    model = make_model([helper.make_node("Mul", ["x", "one"], ["y"])], {"x": x}, ["y"], {"one": np.ones((3, 1), np.float32)})
    net, _, after = _optimised(model)
    assert after == Counter({"Mul": 1})
    _same_as_ort(model, {"x": x}, net)


def test_dead_code_removed_names_kept(rng):
    x, x2 = rand(rng, 2, 3), rand(rng, 3)
    nodes = [
        helper.make_node("Relu", ["x"], ["y"]),
        helper.make_node("Sigmoid", ["x"], ["unused1"]),
        helper.make_node("Add", ["unused1", "c"], ["unused2"]),
    ]
    model = make_model(nodes, {"x": x, "x2": x2}, ["y"], {"c": rand(rng, 3), "never": rand(rng, 100)})
    net, _, after = _optimised(model)
    assert after == Counter({"Relu": 1})
    g = net.main
    assert [g.tensors[t].name for t in g.inputs] == ["x", "x2"]  # unused inputs stay
    assert {t.name for t in g.tensors} == {"x", "x2", "y"}


# ------------------------------------------------------------------------ real models
PPOCR = {
    "det": ((1, 3, 64, 96), 672, 104),
    "rec": ((1, 3, 48, 80), 860, 146),
    "cls": ((1, 3, 48, 192), 566, 92),
}


@pytest.mark.parametrize("name", list(PPOCR))
def test_ppocr_op_counts_and_outputs(name):
    from mnnpy import models

    path = models.ocr_model_path(name)  # fetched once into the cache, checksummed
    import onnx

    shape, n_onnx, n_after = PPOCR[name]
    model = onnx.load(path)
    assert len(model.graph.node) == n_onnx
    net, before, after = _optimised(model)
    assert sum(after.values()) <= n_after, (dict(before), dict(after))
    assert "BatchNormalization" not in after  # ConvTranspose -> Add -> BN folds too
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    expected = run_ort(model, {"x": x})
    for e, a in zip(expected, run_ort(to_onnx(net), {"x": x})):
        np.testing.assert_allclose(a, e, **ACCUMULATE)

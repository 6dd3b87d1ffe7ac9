"""The converter's layer-normalisation and swish fusions: outputs unchanged, ops replaced."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper

from mnnpy.converter import to_net
from tests.oracle import ACCUMULATE, ELEMENTWISE, check, make_model, rand


def _layernorm_nodes(axes_name="axes", gamma=True, beta=True):
    nodes = [
        helper.make_node("ReduceMean", ["x", axes_name], ["m"]),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("ReduceMean", ["p", axes_name], ["v"]),
        helper.make_node("Add", ["v", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["s"]),
        helper.make_node("Div", ["d", "s"], ["n" if gamma else "y"]),
    ]
    if gamma:
        nodes.append(helper.make_node("Mul", ["n", "g"], ["ng" if beta else "y"]))
    if gamma and beta:
        nodes.append(helper.make_node("Add", ["ng", "b"], ["y"]))
    return nodes


@pytest.mark.parametrize("axes", [[-1], [-2, -1]])
@pytest.mark.parametrize("gamma,beta", [(True, True), (True, False), (False, False)])
def test_layernorm_pattern_becomes_one_op(rng, axes, gamma, beta):
    x = rand(rng, 2, 5, 7, 3)
    norm = x.shape[-len(axes) :]
    inits = {
        "axes": np.array(axes, np.int64),
        "two": np.array(2.0, np.float32),
        "eps": np.array(1e-5, np.float32),
        "g": rand(rng, *norm),
        "b": rand(rng, *norm),
    }
    m = make_model(_layernorm_nodes(gamma=gamma, beta=beta), {"x": x}, ["y"], inits, opset=18)
    assert Counter(op.type for op in to_net(m).main.ops) == Counter({"LayerNormalization": 1})
    check(m, {"x": x}, **ACCUMULATE)


def test_layernorm_pattern_with_a_shared_intermediate_is_left_alone(rng):
    x = rand(rng, 4, 6)
    inits = {"axes": np.array([-1], np.int64), "two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32)}
    m = make_model(_layernorm_nodes(gamma=False, beta=False), {"x": x}, ["y", "d"], inits, opset=18)
    assert "LayerNormalization" not in {op.type for op in to_net(m).main.ops}
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
def test_swish_pattern(rng, order):
    x = rand(rng, 3, 17, scale=3)
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", list(order), ["y"])]
    m = make_model(nodes, {"x": x}, ["y"])
    assert [op.type for op in to_net(m).main.ops] == ["Swish"]
    check(m, {"x": x}, **ELEMENTWISE)

"""HardSwish's scale and shift (mnnpy's attributes: ``scale * hardswish(x) + shift``): the
converter folds a scalar Mul/Div and Add/Sub after a HardSwish into them
(``fold_hardswish_affine``), a Conv fuses the result, and every backend computes it, fused
and as its own op, against onnxruntime running the ONNX ops."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import backends, check_backend, conv_model
from tests.oracle import ACCUMULATE, ELEMENTWISE, make_model, rand

AFFINE = [("Mul", {}, [1.5]), ("Add", {}, [-0.25])]


def _ops(model) -> list:
    return mnnpy.Interpreter(convert(model)).net.main.ops


def test_scale_and_shift_fold_into_the_hardswish_and_the_conv(rng):
    tail = [("HardSwish", {}, []), ("Div", {}, [0.5]), ("Sub", {}, [0.75]), ("Mul", {}, [-2.0]), ("Add", {}, [0.125])]
    model, _ = conv_model(rng, (1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, after=tail)
    ops = _ops(model)
    assert [op.type for op in ops] == ["Conv"]
    # ((h / 0.5) - 0.75) * -2 + 0.125 = -4 h + 1.625
    assert ops[0].attrs["activation"] == "HardSwish"
    np.testing.assert_allclose(ops[0].attrs["activation_params"], [-4.0, 1.625])


def test_a_hardswish_read_twice_keeps_its_mul(rng):
    x = rand(rng, 1, 4, 5, 5)
    nodes = [
        helper.make_node("HardSwish", ["x"], ["h"]),
        helper.make_node("Mul", ["h", "s"], ["m"]),
        helper.make_node("Add", ["h", "m"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], {"s": np.array(3.0, np.float32)})
    assert Counter(op.type for op in _ops(model)) == Counter({"HardSwish": 1, "Mul": 1, "Add": 1})


def test_a_tensor_scale_is_not_folded(rng):
    per_column = [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]
    model, _ = conv_model(rng, (1, 3, 6, 6), (4, 3, 1, 1), {}, after=[("HardSwish", {}, []), ("Mul", {}, per_column)])
    assert [op.type for op in _ops(model)] == ["Conv", "Mul"]


CONVS = {
    "3x3": ((1, 5, 9, 7), (6, 5, 3, 3), {"pads": [1, 1, 1, 1]}),
    "pointwise": ((1, 16, 7, 7), (8, 16, 1, 1), {}),
    "depthwise": ((1, 8, 9, 9), (8, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 8}),
}


@pytest.mark.parametrize("conv", list(CONVS))
@pytest.mark.parametrize("backend", backends())
def test_fused_scale_and_shift_on_each_backend(rng, backend, conv):
    xs, ws, attrs = CONVS[conv]
    model, feeds = conv_model(rng, xs, ws, attrs, after=[("HardSwish", {}, []), *AFFINE])
    assert [op.type for op in _ops(model)] == ["Conv"]
    check_backend(model, feeds, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", backends())
def test_hardswish_op_with_scale_and_shift_on_each_backend(rng, backend):
    x = rand(rng, 2, 3, 7, 5, scale=4)
    nodes = [
        helper.make_node("HardSwish", ["x"], ["h"]),
        helper.make_node("Mul", ["h", "s"], ["m"]),
        helper.make_node("Add", ["m", "t"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], {"s": np.array(1.5, np.float32), "t": np.array(-0.25, np.float32)})
    ops = _ops(model)
    assert [op.type for op in ops] == ["HardSwish"] and ops[0].attrs == {"scale": 1.5, "shift": -0.25}
    check_backend(model, {"x": x}, ELEMENTWISE, backend)

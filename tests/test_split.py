"""Split against onnxruntime: ``split`` attribute (< 13), input (13+), ``num_outputs`` (18+)."""

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import EXACT, check, make_model, rand


def _split(x, outs, opset, split=None, **attrs):
    names = [f"y{k}" for k in range(outs)]
    ins, inits = ["x"], {}
    if split is not None and opset < 13:
        attrs["split"] = split
    elif split is not None:
        ins, inits = ["x", "split"], {"split": np.array(split, np.int64)}
    node = helper.make_node("Split", ins, names, **attrs)
    return make_model([node], {"x": x}, names, inits, opset=opset)


@pytest.mark.parametrize(
    "opset,axis,split",
    [(o, a, s) for o in [7, 11, 13, 18] for a, s in [(0, None), (1, [2, 5, 6]), (-1, [1, 0, 8]), (2, None)] if a >= 0 or o >= 11],
)
def test_split(rng, opset, axis, split):
    x = rand(rng, 3, 13, 9)
    n = 3 if split is not None or x.shape[axis] % 3 == 0 else 1
    attrs = {"axis": axis}
    if opset >= 18 and split is None:
        attrs["num_outputs"] = n
    check(_split(x, n, opset, split, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("d,n", [(13, 4), (10, 3), (8, 2), (4, 3), (7, 3), (0, 2)])
def test_split_num_outputs_uneven(rng, d, n):
    """Opset 18: chunks of ceil(d / n), the last one smaller, possibly empty (4 into 3: 2, 2, 0)."""
    x = rand(rng, 2, d)
    check(_split(x, n, 18, axis=1, num_outputs=n), {"x": x}, **EXACT)


@pytest.mark.parametrize("d,n", [(5, 4), (2, 4)])
def test_split_num_outputs_negative_last_chunk(rng, d, n):
    """ceil(d / n) chunks that leave the last one negative (5 into 4: 2, 2, 2, -1): refused, as by onnxruntime."""
    x = rand(rng, 2, d)
    with pytest.raises(mnnpy.ShapeError, match="cannot be split into"):
        mnnpy.Interpreter(convert(_split(x, n, 18, axis=1, num_outputs=n))).create_session().run({"x": x})


def test_split_int64_and_unused_output(rng):
    x = rng.integers(-9, 9, (6, 4)).astype(np.int64)
    node = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=0)
    m = make_model([node], {"x": x}, ["a", "c"], {"s": np.array([1, 2, 3], np.int64)}, opset=13)
    check(m, {"x": x}, **EXACT)


def test_split_absent_output(rng):
    """An output with an empty name is absent (onnxruntime crashes on this, so numpy is the reference)."""
    x = rand(rng, 6, 4)
    node = helper.make_node("Split", ["x", "s"], ["a", "", "c"], axis=0)
    m = make_model([node], {"x": x}, ["a", "c"], {"s": np.array([1, 2, 3], np.int64)}, opset=13)
    out = mnnpy.Interpreter(convert(m)).create_session().run({"x": x})
    np.testing.assert_array_equal(out["a"], x[:1])
    np.testing.assert_array_equal(out["c"], x[3:])


def test_split_bad_sizes(rng):
    x = rand(rng, 5, 4)
    m = _split(x, 2, 13, [2, 2], axis=0)
    with pytest.raises(mnnpy.ShapeError, match="split"):
        mnnpy.Interpreter(convert(m)).create_session().run({"x": x})

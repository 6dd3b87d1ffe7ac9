"""The ONNX converter's contract: errors for what it cannot take, what survives conversion."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import mnnpy
from mnnpy import model_file
from mnnpy.converter import PRODUCER, convert, to_net
from tests.oracle import make_model, rand


def _relu_model(rng, **kw):
    x = rand(rng, 2, 3)
    return make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"], **kw), x


def test_unsupported_ops_listed_once_with_counts(rng):
    x = rand(rng, 2, 3)
    nodes = [
        helper.make_node("Foo", ["x"], ["a"]),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Foo", ["b"], ["c"]),
        helper.make_node("Bar", ["c"], ["y"]),
    ]
    with pytest.raises(mnnpy.UnsupportedOperatorError) as e:
        to_net(make_model(nodes, {"x": x}, ["y"]))
    assert e.value.missing == {"Foo": 2, "Bar": 1}
    msg = str(e.value)
    assert msg.count("Foo") == 1 and msg.count("Bar") == 1
    assert "Foo (x2)" in msg and "Bar (x1)" in msg
    assert isinstance(e.value, mnnpy.MnnpyError)


def test_custom_domain_op(rng):
    x = rand(rng, 2, 3)
    nodes = [helper.make_node("Relu", ["x"], ["y"], domain="com.example")]
    model = make_model(nodes, {"x": x}, ["y"])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(mnnpy.UnsupportedOperatorError) as e:
        to_net(model)
    assert e.value.missing == {"com.example::Relu": 1}


def test_unsupported_op_inside_subgraph_is_counted(rng):
    x = rand(rng, 2, 3)
    body = helper.make_graph([helper.make_node("Baz", ["x"], ["z"])], "then", [], [helper.make_empty_tensor_value_info("z")])
    cond = np.array(True)
    nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body)]
    with pytest.raises(mnnpy.UnsupportedOperatorError) as e:
        to_net(make_model(nodes, {"x": x, "cond": cond}, ["y"]))
    assert e.value.missing.get("Baz") == 2


@pytest.mark.parametrize("opset", [0, onnx.defs.onnx_opset_version() + 1])
def test_opset_out_of_range(rng, opset):
    model, _ = _relu_model(rng)
    model.opset_import[0].version = opset
    with pytest.raises(mnnpy.ModelFormatError, match=f"opset {opset}"):
        to_net(model)


def test_old_opset_converts_only_ops_unchanged_since(rng):
    model, _ = _relu_model(rng)
    model.opset_import[0].version = 6  # Relu-6 is still the form of opset 7
    assert [op.type for op in to_net(model).main.ops] == ["Relu"]
    x = rand(rng, 3)
    old_add = make_model([helper.make_node("Add", ["x", "x"], ["y"])], {"x": x}, ["y"], opset=7)
    old_add.opset_import[0].version = 6  # Add-6 had broadcast attributes: changed in 7
    with pytest.raises(mnnpy.ModelFormatError, match="opset 6 not supported for \\['Add'\\]"):
        to_net(old_add)


def test_no_default_opset(rng):
    model, _ = _relu_model(rng)
    del model.opset_import[:]
    with pytest.raises(mnnpy.ModelFormatError, match="opset"):
        to_net(model)


@pytest.mark.parametrize("data", [b"", b"\x00\x01garbage\xff" * 7, bytes(range(256)) * 4])
def test_garbage_onnx_bytes(data):
    try:
        to_net(data)
    except mnnpy.ModelFormatError:
        pass  # empty bytes parse as an empty ModelProto: that too must be a ModelFormatError
    else:
        pytest.fail("no ModelFormatError")


def test_missing_onnx_file(tmp_path):
    with pytest.raises(mnnpy.ModelFormatError):
        to_net(tmp_path / "absent.onnx")


def test_metadata_names_and_producer_survive(rng, tmp_path):
    model, x = _relu_model(rng, input_shapes={"x": ["batch", 3]})
    onnx.helper.set_model_props(model, {"character": "甲\n乙\n", "author": "tests"})
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    dst = tmp_path / "m.mnnpy"
    convert(src, dst)
    net = model_file.load(dst)
    assert net.metadata == {"character": "甲\n乙\n", "author": "tests"}
    assert net.producer_name == PRODUCER == "mnnpy.converter"
    assert net.producer_version == mnnpy.__version__
    interp = mnnpy.Interpreter(dst)
    assert [i.name for i in interp.inputs] == ["x"] and interp.inputs[0].shape == ("batch", 3)
    assert [o.name for o in interp.outputs] == ["y"]
    out = interp.create_session().run({"x": x})
    np.testing.assert_array_equal(out["y"], np.maximum(x, 0))


def test_convert_returns_bytes_and_no_optimize_keeps_ops(rng):
    x = rand(rng, 2, 3)
    nodes = [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Relu", ["i"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"])
    raw = model_file.load(convert(model, optimize_graph=False))
    opt = model_file.load(convert(model))
    assert [o.type for o in raw.main.ops] == ["Identity", "Relu"]
    assert [o.type for o in opt.main.ops] == ["Relu"]


@pytest.mark.parametrize(
    "nodes,written",
    [
        # two nodes write t: converting made the last one win (onnxruntime and the checker refuse)
        ([("Relu", ["x"], ["t"]), ("Neg", ["x"], ["t"]), ("Abs", ["t"], ["y"])], "t"),
        ([("Relu", ["x"], ["y"]), ("Neg", ["x"], ["y"])], "y"),
        ([("Relu", ["x"], ["x"]), ("Abs", ["x"], ["y"])], "x"),  # a node writes a graph input
        ([("Relu", ["x"], ["k"]), ("Add", ["k", "x"], ["y"])], "k"),  # ... or an initializer
    ],
)
def test_two_writers_of_one_value_are_refused(nodes, written):
    x = np.ones((2, 3), np.float32)
    m = make_model([helper.make_node(t, i, o) for t, i, o in nodes], {"x": x}, ["y"], {"k": x})
    with pytest.raises(mnnpy.ModelFormatError, match=f"writes '{written}', which .* already defines"):
        convert(m)


def test_two_writers_in_a_body_are_refused():
    x = np.ones((2,), np.float32)
    body = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2])],
    )
    els = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [2])]
    )
    m = make_model(
        [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=els)],
        {"x": x, "c": np.array(True)},
        ["y"],
    )
    with pytest.raises(mnnpy.ModelFormatError, match="graph 'then': node .* writes 't'"):
        convert(m)

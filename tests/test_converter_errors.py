"""Malformed ONNX models given to the converter: every case a ``ModelFormatError`` naming the
node, tensor or attribute (issue 12, defect 5: these raised onnx's ``SchemaError`` and
``ValidationError``, ``IndexError``, ``ValueError`` and ``TypeError``)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import make_model

X = np.zeros((1, 2, 4, 4), np.float32)
W = np.ones((3, 2, 3, 3), np.float32)


def test_an_op_newer_than_the_models_opset():
    m = make_model([helper.make_node("Gelu", ["x"], ["y"])], {"x": X}, ["y"], opset=13)
    with pytest.raises(
        mnnpy.ModelFormatError,
        match=r"node 'y' \(Gelu\): Gelu does not exist at the model's opset 13 \(it first appears in opset 20\)",
    ):
        convert(m)


def test_a_node_without_outputs():
    m = make_model([helper.make_node("Relu", ["x"], [], name="r")], {"x": X}, ["x"])
    with pytest.raises(mnnpy.ModelFormatError, match=r"node 'r' \(Relu\) has no outputs"):
        convert(m)


@pytest.mark.parametrize("with_value", [False, True])
def test_an_attribute_of_type_undefined(with_value):
    node = helper.make_node("LeakyRelu", ["x"], ["y"])
    a = node.attribute.add()
    a.name = "alpha"
    if with_value:
        a.f = 0.5  # a value, but type 0
    with pytest.raises(mnnpy.ModelFormatError, match=r"node 'y' \(LeakyRelu\): attribute 'alpha' has no type"):
        convert(make_model([node], {"x": X}, ["y"]))


def test_an_initializer_with_short_raw_data():
    w = numpy_helper.from_array(W, "w")
    w.raw_data = w.raw_data[:10]
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": X}, ["y"])
    m.graph.initializer.append(w)
    with pytest.raises(mnnpy.ModelFormatError, match=r"initializer 'w': tensor 'w' \[3, 2, 3, 3\] is malformed"):
        convert(m)


def test_a_constant_with_short_raw_data():
    t = numpy_helper.from_array(np.ones((3, 2), np.float32))
    t.raw_data = t.raw_data[:5]
    nodes = [helper.make_node("Constant", [], ["c"], value=t), helper.make_node("Add", ["x", "c"], ["y"])]
    with pytest.raises(mnnpy.ModelFormatError, match=r"node 'c' \(Constant\): attribute 'value'.* is malformed"):
        convert(make_model(nodes, {"x": X}, ["y"]))


def _external(tmp_path=None):
    w = numpy_helper.from_array(W, "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(W.nbytes))):
        e = w.external_data.add()
        e.key, e.value = k, v
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": X}, ["y"])
    m.graph.initializer.append(w)
    return m


def test_external_data_given_as_bytes(tmp_path, monkeypatch):
    """From bytes there is no folder to look in (ONNX would read the current directory)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights.bin").write_bytes(W.tobytes())
    for model in (_external().SerializeToString(), _external()):
        with pytest.raises(mnnpy.ModelFormatError, match="external file 'weights.bin'; convert the model from its path"):
            convert(model)


def test_external_data_beside_a_model_path(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(_external().SerializeToString())
    with pytest.raises(mnnpy.ModelFormatError, match="cannot load its external data"):
        convert(path)  # weights.bin missing
    (tmp_path / "weights.bin").write_bytes(W.tobytes()[:100])
    with pytest.raises(mnnpy.ModelFormatError, match="cannot load its external data"):
        convert(path)  # shorter than declared
    (tmp_path / "weights.bin").write_bytes(W.tobytes())
    x = np.ones_like(X)
    y = mnnpy.Interpreter(convert(path)).create_session().run({"x": x})["y"]
    np.testing.assert_allclose(y, np.full((1, 3, 2, 2), 18.0, np.float32))


@pytest.mark.parametrize(
    "bias, follow",
    [((2,), "Add"), ((4,), "Mul"), ((3, 1), "Add"), ((), "Mul")],
)
def test_conv_bias_folding_with_a_bias_of_the_wrong_size(bias, follow):
    """A Conv bias that is not ``(M,)`` followed by a constant Add/Mul: the folding pass raised
    ValueError (broadcast) or built a (3, 3) bias. Now nothing is folded, and the Conv's
    shape function names the problem at resize."""
    consts = {"w": W, "b": np.ones(bias, np.float32), "c": np.full((3, 1, 1), 2.0, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["t"]), helper.make_node(follow, ["t", "c"], ["y"])]
    interp = mnnpy.Interpreter(convert(make_model(nodes, {"x": X}, ["y"], consts)))
    with pytest.raises(mnnpy.ShapeError, match="Conv 't'"):
        interp.create_session()


@pytest.mark.parametrize(
    "w_shape, group", [((), 1), ((3,), 1), ((3, 2), 1), ((0, 2, 3, 3), 1), ((3, 2, 3, 3), 0), ((3, 1, 3, 3), 2)]
)
@pytest.mark.parametrize("follow", ["Add", "Mul", "BatchNormalization", "before"])
def test_conv_folding_with_malformed_weights(w_shape, group, follow):
    """Weights of rank < 3, no output channels, group 0 or a group that does not divide the
    channels: the folding passes indexed ``w.shape[1]``, divided by the group or reshaped
    (IndexError, ZeroDivisionError, ValueError). Now they leave such a Conv alone and the
    loader or the Conv's shape function refuses it."""
    consts = {"w": np.ones(w_shape, np.float32), "c": np.full((3, 1, 1), 2.0, np.float32), "k": np.array(2.0, np.float32)}
    if follow == "before":
        nodes = [helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Conv", ["xk", "w"], ["y"], group=group)]
    elif follow == "BatchNormalization":
        consts["s"] = np.ones(3, np.float32)
        nodes = [
            helper.make_node("Conv", ["x", "w"], ["t"], group=group),
            helper.make_node(follow, ["t", "s", "s", "s", "s"], ["y"]),
        ]
    else:
        nodes = [helper.make_node("Conv", ["x", "w"], ["t"], group=group), helper.make_node(follow, ["t", "c"], ["y"])]
    try:
        mnnpy.Interpreter(convert(make_model(nodes, {"x": X}, ["y"], consts))).create_session()
    except (mnnpy.ModelFormatError, mnnpy.ShapeError):
        pass


@pytest.mark.parametrize(
    "attr, value",
    [("strides", 2), ("pads", "same"), ("group", [1, 2]), ("dilations", 1.5)],
)
def test_attributes_of_the_wrong_type_are_refused_before_the_passes_see_them(attr, value):
    """The optimisation passes read raw attributes (``all(s == 1 for s in strides)``): each op
    is checked against its schema before they run."""
    nodes = [helper.make_node("Mul", ["x", "k"], ["xk"]), helper.make_node("Conv", ["xk", "w"], ["y"], **{attr: value})]
    m = make_model(nodes, {"x": X}, ["y"], {"w": W, "k": np.array(2.0, np.float32)})
    with pytest.raises(mnnpy.ModelFormatError, match=f"op 'y'.*'{attr}'"):
        convert(m)

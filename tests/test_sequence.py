"""Sequence ops: the CPU host kernels against ONNX's reference implementation and hand-computed
values (bad positions and sizes raise ``ShapeError``), and what the converter makes of them
(sequence kinds, Loops carrying sequences), and sessions running them against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import mnnpy
from mnnpy import model_file
from mnnpy.backends.cpu.registry import host_kernels
from mnnpy.converter import to_net
from mnnpy.ops import get_schema
from tests.net_to_onnx import to_onnx
from tests.oracle import EXACT, check, make_model, rand, run_ort

F = TensorProto.FLOAT


def _reference(op: str, inputs: dict, attrs: dict | None = None):
    """ONNX's reference implementation of one node; list values are sequences of float32 tensors."""
    infos = [
        helper.make_tensor_sequence_value_info(k, F, None)
        if isinstance(v, list)
        else helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), None)
        for k, v in inputs.items()
    ]
    node = helper.make_node(op, list(inputs), ["out"], **(attrs or {}))
    graph = helper.make_graph([node], "g", infos, [helper.make_empty_tensor_value_info("out")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(model).run(None, inputs)[0]


def _kernel(op: str, inputs: list, **given):
    """The host kernel's one output, with the schema's attribute defaults filled."""
    attrs = get_schema(op).resolve_attrs(given, op)
    out = host_kernels()[op](attrs, inputs)
    assert len(out) == 1
    return out[0]


def _same(got, want) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype and g.shape == w.shape
    else:
        np.testing.assert_array_equal(got, want)
        assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)


@pytest.fixture
def seq(rng):
    return [rand(rng, 2, 3), rand(rng, 4, 3), rand(rng, 1, 3)]


def test_every_sequence_op_has_a_host_kernel_and_is_dynamic():
    ops = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceAt", "SequenceLength"}
    ops |= {"SequenceErase", "ConcatFromSequence", "SplitToSequence"}
    assert set(host_kernels()) == ops
    assert all(get_schema(op).dynamic for op in ops)


@pytest.mark.parametrize("position", [None, 0, 1, 3, -1, -3])
def test_sequence_insert(rng, seq, position):
    x = rand(rng, 5, 3)
    ins = [seq, x] + ([] if position is None else [np.array(position, np.int64)])
    got = _kernel("SequenceInsert", ins)
    want = list(seq)
    want.insert(len(seq) if position is None else position + len(seq) if position < 0 else position, x)
    _same(got, want)
    if position is not None and position != len(seq):  # onnx's reference wraps position n round to 0
        _same(got, _reference("SequenceInsert", {"s": seq, "x": x, "p": np.array(position, np.int64)}))
    assert len(seq) == 3 and not any(a is x for a in got)  # the input unchanged, x copied in


@pytest.mark.parametrize("position", [0, 2, -1, -3])
def test_sequence_at(seq, position):
    p = np.array(position, np.int32)
    got = _kernel("SequenceAt", [seq, p])
    _same(got, _reference("SequenceAt", {"s": seq, "p": p}))
    assert got is not seq[position]


@pytest.mark.parametrize("position", [None, 0, 1, -1, -3])
def test_sequence_erase(seq, position):
    ins = {"s": seq} | ({} if position is None else {"p": np.array(position, np.int64)})
    _same(_kernel("SequenceErase", list(ins.values())), _reference("SequenceErase", ins))
    assert len(seq) == 3


def test_sequence_length_construct_empty(seq):
    _same(_kernel("SequenceLength", [seq]), np.array(3, np.int64))
    _same(_kernel("SequenceLength", [[]]), np.array(0, np.int64))
    got = _kernel("SequenceConstruct", seq)
    _same(got, seq)
    assert all(g is not s for g, s in zip(got, seq))
    assert _kernel("SequenceEmpty", [], dtype=TensorProto.INT64) == []


@pytest.mark.parametrize("axis, new_axis", [(0, 0), (-2, 0), (0, 1), (2, 1), (-1, 1), (-3, 1)])
def test_concat_from_sequence(rng, axis, new_axis):
    seq = [rand(rng, 2, 3) for _ in range(4)] if new_axis else [rand(rng, k, 3) for k in (1, 2, 3)]
    got = _kernel("ConcatFromSequence", [seq], axis=axis, new_axis=new_axis)
    _same(got, np.stack(seq, axis) if new_axis else np.concatenate(seq, axis))
    _same(got, _reference("ConcatFromSequence", {"s": seq}, {"axis": axis, "new_axis": new_axis}))


@pytest.mark.parametrize(
    "split, axis, keepdims",
    [
        (None, 0, 1),
        (None, 1, 0),
        (None, -1, 0),
        (np.array(2, np.int64), 1, 1),
        (np.array([1, 4], np.int32), 1, 0),
        (np.array(5, np.int64), 1, 1),
    ],
)
def test_split_to_sequence(rng, split, axis, keepdims):
    x = rand(rng, 3, 5)
    ins = {"x": x} | ({} if split is None else {"split": split})
    got = _kernel("SplitToSequence", list(ins.values()), axis=axis, keepdims=keepdims)
    _same(got, _reference("SplitToSequence", ins, {"axis": axis, "keepdims": keepdims}))
    assert not any(np.shares_memory(p, x) for p in got)


def test_split_to_sequence_hand_values():
    x = np.arange(7, dtype=np.int64)
    got = _kernel("SplitToSequence", [x, np.array(3, np.int64)])
    _same(got, [np.arange(3), np.arange(3, 6), np.arange(6, 7)])
    _same(_kernel("SplitToSequence", [np.zeros((0, 2), np.float32)]), [])


@pytest.mark.parametrize(
    "op, inputs, attrs, match",
    [
        ("SequenceAt", lambda s: [s, np.array(3, np.int64)], {}, r"position 3 out of range \[-3, 2\]"),
        ("SequenceAt", lambda s: [s, np.array(-4, np.int64)], {}, "out of range"),
        ("SequenceAt", lambda s: [[], np.array(0, np.int64)], {}, r"out of range \[0, -1\] for a sequence of 0"),
        ("SequenceAt", lambda s: [s, np.array(1.0, np.float32)], {}, "int32/int64 scalar"),
        ("SequenceInsert", lambda s: [s, s[0], np.array(4, np.int64)], {}, r"out of range \[-3, 3\]"),
        ("SequenceInsert", lambda s: [s, s[0].astype(np.int64)], {}, "cannot join a sequence of float32"),
        ("SequenceErase", lambda s: [s, np.array(-4, np.int32)], {}, "out of range"),
        ("SequenceErase", lambda s: [[]], {}, "empty sequence"),
        ("ConcatFromSequence", lambda s: [[]], {"axis": 0}, "the sequence is empty"),
        ("ConcatFromSequence", lambda s: [s], {"axis": 1}, "the same shape except along axis 1"),
        ("ConcatFromSequence", lambda s: [s], {"axis": 2}, r"axis 2 out of range \[-2, 1\]"),
        ("ConcatFromSequence", lambda s: [s], {"axis": 0, "new_axis": 1}, "must have the same shape"),
        ("SplitToSequence", lambda s: [s[0], np.array([1, 2], np.int64)], {}, r"summing to the axis' 2"),
        ("SplitToSequence", lambda s: [s[0], np.array(0, np.int64)], {}, "must be positive"),
        ("SplitToSequence", lambda s: [s[0]], {"axis": 2}, "axis 2 out of range"),
        ("SequenceLength", lambda s: [s[0]], {}, "must be a sequence"),
        ("SequenceConstruct", lambda s: [s[0], s[1].astype(np.float64)], {}, "cannot join"),
    ],
)
def test_bad_values_raise_shape_errors(seq, op, inputs, attrs, match):
    with pytest.raises(mnnpy.ShapeError, match=f"{op}: .*{match}"):
        _kernel(op, inputs(seq), **attrs)


# ------------------------------------------------------------------- conversion
def sequence_model(rng):
    """Split x into rows, insert y at the front, erase the last, take one, concatenate the rest."""
    x, y = rand(rng, 4, 3), rand(rng, 1, 3)
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0),
        helper.make_node("SequenceInsert", ["rows", "y", "zero"], ["with_y"]),
        helper.make_node("SequenceErase", ["with_y"], ["shorter"]),
        helper.make_node("SequenceAt", ["shorter", "one"], ["second"]),
        helper.make_node("SequenceLength", ["shorter"], ["n"]),
        helper.make_node("ConcatFromSequence", ["shorter"], ["joined"], axis=0),
        helper.make_node("SequenceConstruct", ["x", "x"], ["pair"]),
        helper.make_node("ConcatFromSequence", ["pair"], ["stacked"], axis=0, new_axis=1),
    ]
    inits = {"zero": np.array(0, np.int64), "one": np.array(-3, np.int32)}
    feeds = {"x": x, "y": y}
    return make_model(nodes, feeds, ["second", "n", "joined", "stacked"], inits, opset=13), feeds


def loop_seq_model(rng):
    """A Loop carrying a sequence (started by SequenceEmpty) that appends ``x * i`` each iteration."""
    x = rand(rng, 2)
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Mul", ["x", "fi"], ["xi"]),
            helper.make_node("SequenceInsert", ["s_in", "xi"], ["s_out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info("s_in", F, None),
        ],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_sequence_value_info("s_out", F, None)],
    )
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
        helper.make_node("Loop", ["M", "", "empty"], ["seq"], body=body),
        helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, new_axis=1),
    ]
    feeds = {"x": x}
    return make_model(nodes, feeds, ["y"], {"M": np.array(3, np.int64)}, opset=13), feeds


def test_sequence_values_are_marked(rng):
    model, _ = sequence_model(rng)
    net = model_file.load(model_file.serialize(to_net(model)))
    kinds = {t.name: t.kind for t in net.main.tensors}
    assert {k for k, v in kinds.items() if v == "sequence"} == {"rows", "with_y", "shorter", "pair"}
    dt = {t.name: t.dtype for t in net.main.tensors}
    assert dt["rows"] == dt["second"] == np.float32 and dt["n"] == np.int64


def test_loop_carrying_a_sequence(rng):
    model, _ = loop_seq_model(rng)
    net = to_net(model)
    loop = next(op for op in net.main.ops if op.type == "Loop")
    body = net.graphs[loop.attrs["body"].index]
    assert [body.tensors[t].kind for t in body.inputs] == ["tensor", "tensor", "sequence", "tensor"]
    assert [body.tensors[t].kind for t in body.outputs] == ["tensor", "sequence"]
    assert net.main.tensors[loop.outputs[0]].kind == "sequence"
    assert net.main.tensors[loop.inputs[2]].kind == "sequence"  # SequenceEmpty's output
    model_file.load(model_file.serialize(net))


def test_sequence_graph_input_and_output(rng):
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["t"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_sequence_value_info("s", F, [2]), helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_sequence_value_info("t", F, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    net = model_file.load(model_file.serialize(to_net(model)))
    s, t = net.main.tensors[net.main.inputs[0]], net.main.tensors[net.main.outputs[0]]
    assert (s.kind, s.dtype, s.shape) == ("sequence", np.float32, (2,)) and t.kind == "sequence"


def test_optional_values_are_refused():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["o"], ["p"])],
        "g",
        [helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2])))],
        [helper.make_empty_tensor_value_info("p")],
    )
    with pytest.raises(mnnpy.ModelFormatError, match="optional_type values are not supported"):
        to_net(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]))


@pytest.mark.parametrize("build", [sequence_model, loop_seq_model])
def test_converted_sequences_mean_what_the_model_means(rng, build):
    model, feeds = build(rng)
    for want, got in zip(run_ort(model, feeds), run_ort(to_onnx(to_net(model)), feeds)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("build", [sequence_model, loop_seq_model])
def test_engine_runs_sequences_like_onnxruntime(rng, build):
    model, feeds = build(rng)
    check(model, feeds, **EXACT)

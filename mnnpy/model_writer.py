"""Writing ``.mnnpy`` files: the flatbuffer head, one method per table, then the data section.

``write_model`` lays the file out as ``mnnpy.model_file`` describes: the flatbuffer
(``Model`` -> ``Graph`` -> ``Tensor``/``Op`` -> ``Attribute``), zero padding up to an
aligned offset, then every constant's bytes, each padded to the alignment. Nothing is
validated here (``model_file.load`` validates); tests rely on that to write hostile files.
"""

from __future__ import annotations

from typing import Any

import flatbuffers
import numpy as np

from mnnpy import dtypes
from mnnpy.errors import ModelFormatError
from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc
from mnnpy.schema import model_generated as fb

AttrType = fb.AttrType
TENSOR_KINDS = ("tensor", "sequence")  # ``Tensor.kind`` code -> ``TensorDesc.kind``


def write_model(net: Net, *, identifier: bytes, version: int, align: int) -> bytes:
    """``net`` as file bytes: flatbuffer head (``identifier``, format ``version``), then the
    constants, each at a file offset that is a multiple of ``align`` bytes.

    Raises ``ModelFormatError`` for an attribute value no attribute type can hold.
    """
    blobs, index = _constants(net)
    placement = _data_offsets(blobs, align)
    head = _HeadWriter(blobs, index, placement, 0).model(net, identifier, version)
    data_start = _round_up(len(head), align)
    head = _HeadWriter(blobs, index, placement, data_start).model(net, identifier, version)
    assert _round_up(len(head), align) == data_start  # offsets are fixed-width: same head size
    out = bytearray(head)
    out += bytes(data_start - len(head))
    for blob, offset in zip(blobs, placement):
        assert len(out) == data_start + offset
        out += blob.tobytes()
        out += bytes((-blob.nbytes) % align)
    return bytes(out)


def _constants(net: Net) -> tuple[list[np.ndarray], dict[tuple, int]]:
    """Every distinct constant of ``net`` (C-contiguous) in buffer order: per graph, the
    tensors' data, then the ops' TENSOR attributes; and ``_key(array) -> buffer index``.

    Arrays over the same memory (one array held by several tensors, as a constant the
    converter copied into control-flow bodies, or the views of one buffer of a loaded file)
    are stored once: every tensor holding one names the same buffer.
    """
    blobs: list[np.ndarray] = []
    index: dict[tuple, int] = {}
    for g in net.graphs:
        arrays = [t.data for t in g.tensors if t.data is not None]
        arrays += [v for op in g.ops for v in op.attrs.values() if isinstance(v, np.ndarray)]
        for a in arrays:
            if _key(a) not in index:
                index[_key(a)] = len(blobs)
                blobs.append(np.ascontiguousarray(a))
    return blobs, index


def _key(a: np.ndarray) -> tuple:
    """What identifies an array's contents without reading them: its memory, layout and dtype."""
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str)


def _data_offsets(blobs: list[np.ndarray], align: int) -> list[int]:
    """Offset in bytes of each blob from the start of the data section (each padded to ``align``)."""
    offsets, cursor = [], 0
    for blob in blobs:
        offsets.append(cursor)
        cursor += _round_up(blob.nbytes, align)
    return offsets


def _attr_type(value: Any) -> int:
    """The ``AttrType`` code that stores ``value``; raises ``ModelFormatError`` if none does."""
    if isinstance(value, GraphRef):
        return AttrType.GRAPH
    if isinstance(value, np.ndarray):
        return AttrType.TENSOR
    if isinstance(value, (bool, int, np.integer)):
        return AttrType.INT
    if isinstance(value, (float, np.floating)):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, (list, tuple)):
        return _list_attr_type(value)
    raise ModelFormatError(f"cannot store attribute value of type {type(value).__name__}")


def _list_attr_type(value: list | tuple) -> int:
    """STRINGS for a non-empty list of str, INTS for ints (and the empty list), else FLOATS."""
    if all(isinstance(v, str) for v in value) and value:
        return AttrType.STRINGS
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return AttrType.INTS
    return AttrType.FLOATS


def _round_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


class _HeadWriter:
    """Builds the flatbuffer head of one file, children before parents (as flatbuffers needs).

    ``blobs``/``placement`` are the constants and their data-section offsets, ``index`` maps
    ``_key(array)`` of each constant to its buffer; ``data_start`` is the data section's file
    offset (bytes), which ``Buffer.offset`` adds to each.
    """

    def __init__(self, blobs: list[np.ndarray], index: dict[tuple, int], placement: list[int], data_start: int):
        self.b = flatbuffers.Builder(1024)
        self.b.ForceDefaults(True)
        self.blobs, self.index, self.placement, self.data_start = blobs, index, placement, data_start

    # ------------------------------------------------------- vectors and tables
    def numbers(self, start_vector, values, kind: str = "int32") -> int:
        """A vector of scalars (``int32``, ``int64`` or ``float32``)."""
        start_vector(self.b, len(values))
        prepend = {"int32": self.b.PrependInt32, "int64": self.b.PrependInt64, "float32": self.b.PrependFloat32}[kind]
        for v in reversed(values):
            prepend(v)
        return self.b.EndVector()

    def tables(self, start_vector, offsets: list[int]) -> int:
        """A vector of tables or strings, from their offsets."""
        start_vector(self.b, len(offsets))
        for o in reversed(offsets):
            self.b.PrependUOffsetTRelative(o)
        return self.b.EndVector()

    def table(self, start, fields: list[tuple[Any, Any]], end) -> int:
        """One table: ``start``, each ``(<Table>Add<Field>, value)`` in order, ``end``.

        Strings, vectors and child tables in ``fields`` must be built before (flatbuffers
        builds children first); their offsets are the values.
        """
        start(self.b)
        for add, value in fields:
            add(self.b, value)
        return end(self.b)

    def buffer_of(self, array: np.ndarray) -> int:
        """Index of the ``Buffer`` holding constant ``array``."""
        return self.index[_key(array)]

    # --------------------------------------------------------------------- tables
    def model(self, net: Net, identifier: bytes, version: int) -> bytes:
        """The finished head: ``Model`` with its graphs, metadata and buffers."""
        graphs = [self.graph(g) for g in net.graphs]
        metadata = [self.key_value(k, v) for k, v in net.metadata.items()]
        buffers = [self.buffer(blob.nbytes, offset) for blob, offset in zip(self.blobs, self.placement)]
        producer = self.b.CreateString(net.producer_name)
        producer_version = self.b.CreateString(net.producer_version)
        fields = [
            (fb.ModelAddFormatVersion, version),
            (fb.ModelAddProducerName, producer),
            (fb.ModelAddProducerVersion, producer_version),
            (fb.ModelAddMetadata, self.tables(fb.ModelStartMetadataVector, metadata)),
            (fb.ModelAddGraphs, self.tables(fb.ModelStartGraphsVector, graphs)),
            (fb.ModelAddBuffers, self.tables(fb.ModelStartBuffersVector, buffers)),
        ]
        self.b.Finish(self.table(fb.ModelStart, fields, fb.ModelEnd), file_identifier=identifier)
        return bytes(self.b.Output())

    def key_value(self, key: str, value: str) -> int:
        """One metadata entry."""
        fields = [(fb.KeyValueAddKey, self.b.CreateString(key)), (fb.KeyValueAddValue, self.b.CreateString(value))]
        return self.table(fb.KeyValueStart, fields, fb.KeyValueEnd)

    def buffer(self, nbytes: int, offset: int) -> int:
        """Where one constant's ``nbytes`` lie: ``offset`` bytes into the data section."""
        fields = [(fb.BufferAddOffset, self.data_start + offset), (fb.BufferAddSize, nbytes)]
        return self.table(fb.BufferStart, fields, fb.BufferEnd)

    def graph(self, g: Graph) -> int:
        """One graph: its tensors, ops, inputs and outputs (tensor indices)."""
        tensors = [self.tensor(t) for t in g.tensors]
        ops = [self.op(op) for op in g.ops]
        fields = [
            (fb.GraphAddName, self.b.CreateString(g.name)),
            (fb.GraphAddTensors, self.tables(fb.GraphStartTensorsVector, tensors)),
            (fb.GraphAddOps, self.tables(fb.GraphStartOpsVector, ops)),
            (fb.GraphAddInputs, self.numbers(fb.GraphStartInputsVector, g.inputs)),
            (fb.GraphAddOutputs, self.numbers(fb.GraphStartOutputsVector, g.outputs)),
        ]
        return self.table(fb.GraphStart, fields, fb.GraphEnd)

    def tensor(self, t: TensorDesc) -> int:
        """One tensor: name, dtype code, shape (when known), buffer index (-1: not a constant) and
        kind code (``TENSOR_KINDS``; an unknown kind is written as 127, which the loader refuses)."""
        fields = [
            (fb.TensorAddName, self.b.CreateString(t.name)),
            (fb.TensorAddDtype, dtypes.to_code(t.dtype)),
            (fb.TensorAddShape, self.tables(fb.TensorStartShapeVector, [self.dim(d) for d in t.shape or ()])),
            (fb.TensorAddHasShape, t.shape is not None),
            (fb.TensorAddBuffer, self.buffer_of(t.data) if t.data is not None else -1),
            (fb.TensorAddKind, TENSOR_KINDS.index(t.kind) if t.kind in TENSOR_KINDS else 127),
        ]
        return self.table(fb.TensorStart, fields, fb.TensorEnd)

    def dim(self, d: int | str | None) -> int:
        """One dimension: a size >= 0, or -1 with the dimension's name when it has one."""
        fields = [(fb.DimAddValue, d if isinstance(d, int) and d >= 0 else -1)]
        if isinstance(d, str):
            fields.append((fb.DimAddParam, self.b.CreateString(d)))
        return self.table(fb.DimStart, fields, fb.DimEnd)

    def op(self, op: Op) -> int:
        """One op: type, name, input/output tensor indices (-1: absent) and attributes."""
        attrs = [self.attribute(key, value) for key, value in op.attrs.items()]
        fields = [
            (fb.OpAddType, self.b.CreateString(op.type)),
            (fb.OpAddName, self.b.CreateString(op.name)),
            (fb.OpAddInputs, self.numbers(fb.OpStartInputsVector, op.inputs)),
            (fb.OpAddOutputs, self.numbers(fb.OpStartOutputsVector, op.outputs)),
            (fb.OpAddAttributes, self.tables(fb.OpStartAttributesVector, attrs)),
        ]
        return self.table(fb.OpStart, fields, fb.OpEnd)

    def attribute(self, key: str, value: Any) -> int:
        """One attribute: name, type code, then the fields its type uses."""
        kind = _attr_type(value)
        fields = [(fb.AttributeAddName, self.b.CreateString(key)), (fb.AttributeAddType, kind)]
        fields += self._ATTR_FIELDS[kind](self, value)
        return self.table(fb.AttributeStart, fields, fb.AttributeEnd)

    # Each returns [(AttributeAdd<Field>, value), ...] for one attribute type.
    def _int_fields(self, value):
        return [(fb.AttributeAddI, int(value))]

    def _float_fields(self, value):
        return [(fb.AttributeAddF, float(value))]

    def _string_fields(self, value):
        return [(fb.AttributeAddS, self.b.CreateString(value))]

    def _ints_fields(self, value):
        return [(fb.AttributeAddInts, self.numbers(fb.AttributeStartIntsVector, [int(v) for v in value], "int64"))]

    def _floats_fields(self, value):
        return [(fb.AttributeAddFloats, self.numbers(fb.AttributeStartFloatsVector, [float(v) for v in value], "float32"))]

    def _strings_fields(self, value):
        strings = [self.b.CreateString(v) for v in value]
        return [(fb.AttributeAddStrings, self.tables(fb.AttributeStartStringsVector, strings))]

    def _tensor_fields(self, value: np.ndarray):
        """A TENSOR attribute: ``tensor`` = buffer index, ``ints`` = shape, ``i`` = dtype code."""
        buffer = self.buffer_of(value)
        shape = self.numbers(fb.AttributeStartIntsVector, [int(v) for v in value.shape], "int64")
        return [(fb.AttributeAddTensor, buffer), (fb.AttributeAddInts, shape), (fb.AttributeAddI, dtypes.to_code(value.dtype))]

    def _graph_fields(self, value: GraphRef):
        return [(fb.AttributeAddGraph, value.index)]

    _ATTR_FIELDS = {
        AttrType.INT: _int_fields,
        AttrType.FLOAT: _float_fields,
        AttrType.STRING: _string_fields,
        AttrType.INTS: _ints_fields,
        AttrType.FLOATS: _floats_fields,
        AttrType.STRINGS: _strings_fields,
        AttrType.TENSOR: _tensor_fields,
        AttrType.GRAPH: _graph_fields,
    }

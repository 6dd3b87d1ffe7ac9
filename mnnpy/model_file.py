"""Reading and writing ``.mnnpy`` files (schema: ``mnnpy/schema/model.fbs``).

Layout: a flatbuffer (identifier ``MNPY``) followed by a data section; every
constant's bytes start at a 64-byte aligned file offset, so loading a constant is
``numpy.frombuffer`` on the memory-mapped file (no copy).

``read_model`` validates everything before returning a ``Net``: identifier, format
version, every vector length against the file size (so hostile lengths cannot make
it allocate without bound), dtypes, buffer ranges and sizes against shapes, tensor
and graph indices, op types and attributes against their schemas, arity, one
producer per tensor, graph inputs/outputs defined, and acyclicity (ops are put in
topological order). Any problem raises ``ModelFormatError`` naming it.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from typing import Any

import flatbuffers
import numpy as np

from mnnpy import dtypes
from mnnpy.errors import ModelFormatError
from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc
from mnnpy.ops import get_schema
from mnnpy.schema import model_generated as fb

FILE_IDENTIFIER = b"MNPY"
FORMAT_VERSION = 1
ALIGN = 64

_ATTR_CODES = {"int": 1, "float": 2, "string": 3, "ints": 4, "floats": 5, "strings": 6, "tensor": 7, "graph": 8}


# ---------------------------------------------------------------------------- writing
def _attr_type(value: Any) -> str:
    if isinstance(value, GraphRef):
        return "graph"
    if isinstance(value, np.ndarray):
        return "tensor"
    if isinstance(value, (bool, int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value) and value:
            return "strings"
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
            return "ints"
        return "floats"
    raise ModelFormatError(f"cannot store attribute value of type {type(value).__name__}")


def serialize(net: Net) -> bytes:
    """Encode ``net`` as ``.mnnpy`` bytes (constants aligned in the trailing data section)."""
    # every constant (tensor data and TENSOR attributes) gets one buffer, in order
    blobs: list[np.ndarray] = []
    for g in net.graphs:
        for t in g.tensors:
            if t.data is not None:
                blobs.append(np.ascontiguousarray(t.data))
        for op in g.ops:
            for v in op.attrs.values():
                if isinstance(v, np.ndarray):
                    blobs.append(np.ascontiguousarray(v))
    placement = []
    cursor = 0
    for b in blobs:
        placement.append(cursor)
        cursor += (b.nbytes + ALIGN - 1) // ALIGN * ALIGN
    head = _build(net, blobs, placement, 0)
    data_start = (len(head) + ALIGN - 1) // ALIGN * ALIGN
    head = _build(net, blobs, placement, data_start)
    assert (len(head) + ALIGN - 1) // ALIGN * ALIGN == data_start
    out = bytearray(head)
    out += bytes(data_start - len(head))
    for b, off in zip(blobs, placement):
        assert len(out) == data_start + off
        out += b.tobytes()
        out += bytes((-b.nbytes) % ALIGN)
    return bytes(out)


def _build(net: Net, blobs, placement, data_start: int) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.ForceDefaults(True)
    blob_iter = iter(range(len(blobs)))

    def vec_int(start_fn, values, kind="int32"):
        start_fn(builder, len(values))
        prepend = {"int32": builder.PrependInt32, "int64": builder.PrependInt64, "float32": builder.PrependFloat32}[kind]
        for v in reversed(values):
            prepend(v)
        return builder.EndVector()

    def vec_off(start_fn, offsets):
        start_fn(builder, len(offsets))
        for o in reversed(offsets):
            builder.PrependUOffsetTRelative(o)
        return builder.EndVector()

    graph_offsets = []
    for g in net.graphs:
        tensor_offs = []
        for t in g.tensors:
            name = builder.CreateString(t.name)
            dims = []
            for d in t.shape or ():
                param = builder.CreateString(d) if isinstance(d, str) else None
                fb.DimStart(builder)
                fb.DimAddValue(builder, d if isinstance(d, int) and d >= 0 else -1)
                if param is not None:
                    fb.DimAddParam(builder, param)
                dims.append(fb.DimEnd(builder))
            shape = vec_off(fb.TensorStartShapeVector, dims)
            buf = next(blob_iter) if t.data is not None else -1
            fb.TensorStart(builder)
            fb.TensorAddName(builder, name)
            fb.TensorAddDtype(builder, dtypes.to_code(t.dtype))
            fb.TensorAddShape(builder, shape)
            fb.TensorAddHasShape(builder, t.shape is not None)
            fb.TensorAddBuffer(builder, buf)
            tensor_offs.append(fb.TensorEnd(builder))
        op_offs = []
        for op in g.ops:
            attr_offs = []
            for key, value in op.attrs.items():
                kind = _attr_type(value)
                name = builder.CreateString(key)
                s = builder.CreateString(value) if kind == "string" else None
                ints = vec_int(fb.AttributeStartIntsVector, [int(v) for v in value], "int64") if kind == "ints" else None
                floats = (
                    vec_int(fb.AttributeStartFloatsVector, [float(v) for v in value], "float32") if kind == "floats" else None
                )
                strings = (
                    vec_off(fb.AttributeStartStringsVector, [builder.CreateString(v) for v in value])
                    if kind == "strings"
                    else None
                )
                tshape = None
                if kind == "tensor":
                    tensor_buf = next(blob_iter)
                    # a TENSOR attribute: i = buffer index, ints = shape, s = dtype code in f
                    tshape = vec_int(fb.AttributeStartIntsVector, [int(v) for v in value.shape], "int64")
                fb.AttributeStart(builder)
                fb.AttributeAddName(builder, name)
                fb.AttributeAddType(builder, _ATTR_CODES[kind])
                if kind == "int":
                    fb.AttributeAddI(builder, int(value))
                elif kind == "float":
                    fb.AttributeAddF(builder, float(value))
                elif kind == "string":
                    fb.AttributeAddS(builder, s)
                elif kind == "ints":
                    fb.AttributeAddInts(builder, ints)
                elif kind == "floats":
                    fb.AttributeAddFloats(builder, floats)
                elif kind == "strings":
                    fb.AttributeAddStrings(builder, strings)
                elif kind == "tensor":
                    fb.AttributeAddTensor(builder, tensor_buf)
                    fb.AttributeAddInts(builder, tshape)
                    fb.AttributeAddI(builder, dtypes.to_code(value.dtype))
                elif kind == "graph":
                    fb.AttributeAddGraph(builder, value.index)
                attr_offs.append(fb.AttributeEnd(builder))
            type_ = builder.CreateString(op.type)
            name = builder.CreateString(op.name)
            ins = vec_int(fb.OpStartInputsVector, op.inputs)
            outs = vec_int(fb.OpStartOutputsVector, op.outputs)
            attrs = vec_off(fb.OpStartAttributesVector, attr_offs)
            fb.OpStart(builder)
            fb.OpAddType(builder, type_)
            fb.OpAddName(builder, name)
            fb.OpAddInputs(builder, ins)
            fb.OpAddOutputs(builder, outs)
            fb.OpAddAttributes(builder, attrs)
            op_offs.append(fb.OpEnd(builder))
        name = builder.CreateString(g.name)
        tensors = vec_off(fb.GraphStartTensorsVector, tensor_offs)
        ops = vec_off(fb.GraphStartOpsVector, op_offs)
        ins = vec_int(fb.GraphStartInputsVector, g.inputs)
        outs = vec_int(fb.GraphStartOutputsVector, g.outputs)
        fb.GraphStart(builder)
        fb.GraphAddName(builder, name)
        fb.GraphAddTensors(builder, tensors)
        fb.GraphAddOps(builder, ops)
        fb.GraphAddInputs(builder, ins)
        fb.GraphAddOutputs(builder, outs)
        graph_offsets.append(fb.GraphEnd(builder))
    kv = []
    for k, v in net.metadata.items():
        ko, vo = builder.CreateString(k), builder.CreateString(v)
        fb.KeyValueStart(builder)
        fb.KeyValueAddKey(builder, ko)
        fb.KeyValueAddValue(builder, vo)
        kv.append(fb.KeyValueEnd(builder))
    buf_offs = []
    for b, off in zip(blobs, placement):
        fb.BufferStart(builder)
        fb.BufferAddOffset(builder, data_start + off)
        fb.BufferAddSize(builder, b.nbytes)
        buf_offs.append(fb.BufferEnd(builder))
    producer = builder.CreateString(net.producer_name)
    producer_version = builder.CreateString(net.producer_version)
    metadata = vec_off(fb.ModelStartMetadataVector, kv)
    graphs = vec_off(fb.ModelStartGraphsVector, graph_offsets)
    buffers = vec_off(fb.ModelStartBuffersVector, buf_offs)
    fb.ModelStart(builder)
    fb.ModelAddFormatVersion(builder, FORMAT_VERSION)
    fb.ModelAddProducerName(builder, producer)
    fb.ModelAddProducerVersion(builder, producer_version)
    fb.ModelAddMetadata(builder, metadata)
    fb.ModelAddGraphs(builder, graphs)
    fb.ModelAddBuffers(builder, buffers)
    builder.Finish(fb.ModelEnd(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def save(net: Net, path: str | os.PathLike) -> None:
    """Write ``net`` to ``path`` as an ``.mnnpy`` file."""
    with open(path, "wb") as f:
        f.write(serialize(net))


# ---------------------------------------------------------------------------- reading
def load(source: str | os.PathLike | bytes | bytearray | memoryview) -> Net:
    """Read and validate a model from a path or bytes; raises ``ModelFormatError``.

    A path is memory-mapped so that constants are zero-copy views of the file; bytes
    are copied once into a 64-byte aligned buffer that the constants then view.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = _aligned_copy(source)
        where = "model bytes"
    else:
        where = os.fspath(source)
        try:
            with open(source, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except OSError as e:
            raise ModelFormatError(f"{where}: cannot read model file: {e}") from e
    return _Reader(buf, where).read()


def _aligned_copy(data) -> memoryview:
    """A read-only copy of ``data`` starting at a 64-byte aligned address (so constants stay aligned)."""
    src = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    raw = np.empty(src.size + ALIGN, np.uint8)
    skip = (-raw.ctypes.data) % ALIGN
    out = raw[skip : skip + src.size]
    out[:] = src
    out.flags.writeable = False
    return memoryview(out)


class _Reader:
    def __init__(self, buf, where: str):
        self.buf = buf
        self.n = len(buf)
        self.where = where

    def fail(self, msg: str):
        raise ModelFormatError(f"{self.where}: {msg}")

    def vec(self, obj, name: str, what: str, elem_bytes: int = 4) -> int:
        """Length of vector field ``name`` of ``obj``, bounded by the file size."""
        if getattr(obj, f"{name}IsNone")():
            return 0
        n = getattr(obj, f"{name}Length")()
        if n < 0 or n * elem_bytes > self.n:
            self.fail(f"{what}: vector '{name}' claims {n} elements, more than the file can hold")
        return n

    def string(self, value, what: str) -> str:
        if value is None:
            return ""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{what}: string is not valid UTF-8")

    def read(self) -> Net:
        if self.n < 8:
            self.fail(f"file is {self.n} bytes, too short to be an mnnpy model")
        if bytes(self.buf[4:8]) != FILE_IDENTIFIER:
            self.fail(f"file identifier is {bytes(self.buf[4:8])!r}, expected {FILE_IDENTIFIER!r} (not an mnnpy model)")
        try:
            return self._read()
        except ModelFormatError:
            raise
        except (IndexError, struct.error, ValueError, TypeError, OverflowError, AttributeError, RecursionError) as e:
            raise ModelFormatError(f"{self.where}: malformed flatbuffer ({type(e).__name__}: {e})") from None

    def _read(self) -> Net:
        root = struct.unpack_from("<I", self.buf, 0)[0]
        if root + 4 > self.n:
            self.fail(f"root table offset {root} beyond the end of the file ({self.n} bytes)")
        model = fb.Model.GetRootAs(self.buf, 0)
        version = model.FormatVersion()
        if version != FORMAT_VERSION:
            self.fail(f"format version {version} is not supported (this mnnpy reads version {FORMAT_VERSION})")
        buffers = []
        for i in range(self.vec(model, "Buffers", "model")):
            b = model.Buffers(i)
            off, size = b.Offset(), b.Size()
            if off % ALIGN or off + size > self.n:
                self.fail(f"buffer {i}: offset {off} size {size} is misaligned or beyond the file ({self.n} bytes)")
            buffers.append((off, size))
        n_graphs = self.vec(model, "Graphs", "model")
        if n_graphs == 0:
            self.fail("model has no graph")
        metadata = {}
        for i in range(self.vec(model, "Metadata", "model")):
            kv = model.Metadata(i)
            metadata[self.string(kv.Key(), f"metadata {i}")] = self.string(kv.Value(), f"metadata {i}")
        graphs = [self._graph(model.Graphs(g), g, buffers, n_graphs) for g in range(n_graphs)]
        return Net(
            graphs=graphs,
            metadata=metadata,
            producer_name=self.string(model.ProducerName(), "model"),
            producer_version=self.string(model.ProducerVersion(), "model"),
            format_version=version,
        )

    def _constant(self, buffers, index: int, dtype: np.dtype, shape: tuple, what: str) -> np.ndarray:
        if not 0 <= index < len(buffers):
            self.fail(f"{what}: buffer index {index} out of range (model has {len(buffers)} buffers)")
        off, size = buffers[index]
        if any(not isinstance(d, int) or d < 0 for d in shape):
            self.fail(f"{what}: a constant must have a fixed shape, got {shape}")
        need = math.prod(shape) * dtype.itemsize
        if need != size:
            self.fail(f"{what}: shape {shape} of {dtype} needs {need} bytes, its buffer has {size}")
        return np.frombuffer(self.buf, dtype=dtype, count=math.prod(shape), offset=off).reshape(shape)

    def _graph(self, g, gi: int, buffers, n_graphs: int) -> Graph:
        gname = self.string(g.Name(), f"graph {gi}")
        where = f"graph {gi} ('{gname}')"
        tensors = []
        for ti in range(self.vec(g, "Tensors", where)):
            t = g.Tensors(ti)
            name = self.string(t.Name(), f"{where} tensor {ti}")
            what = f"{where} tensor {ti} ('{name}')"
            dtype = dtypes.from_code(t.Dtype(), what)
            shape = None
            if t.HasShape():
                shape = []
                for di in range(self.vec(t, "Shape", what)):
                    d = t.Shape(di)
                    v = d.Value()
                    if v < -1:
                        self.fail(f"{what}: dim {di} is {v}")
                    shape.append(v if v >= 0 else (self.string(d.Param(), what) or None))
                shape = tuple(shape)
            data = None
            if t.Buffer() != -1:
                if shape is None:
                    self.fail(f"{what}: a constant needs a shape")
                data = self._constant(buffers, t.Buffer(), dtype, shape, what)
            tensors.append(TensorDesc(name, dtype, shape, data))
        n_t = len(tensors)

        def index_list(obj, field: str, what: str, allow_absent: bool = False) -> list[int]:
            n = self.vec(obj, field, what)
            out = [getattr(obj, field)(k) for k in range(n)]
            for v in out:
                if not (0 <= v < n_t or (allow_absent and v == -1)):
                    self.fail(f"{what}: {field.lower()} index {v} out of range ({n_t} tensors)")
            return out

        ops = []
        for oi in range(self.vec(g, "Ops", where)):
            o = g.Ops(oi)
            op_type = self.string(o.Type(), f"{where} op {oi}")
            name = self.string(o.Name(), f"{where} op {oi}")
            what = f"{where} op {oi} ({op_type} '{name}')"
            schema = get_schema(op_type)
            if schema is None:
                self.fail(f"{what}: unknown op type '{op_type}'")
            inputs = index_list(o, "Inputs", what, allow_absent=True)
            outputs = index_list(o, "Outputs", what, allow_absent=True)
            attrs = {}
            for ai in range(self.vec(o, "Attributes", what)):
                a = o.Attributes(ai)
                key = self.string(a.Name(), what)
                attrs[key] = self._attr(a, f"{what} attribute '{key}'", buffers, n_graphs, gi)
            schema.check_arity(len(inputs), len(outputs), what)
            for k, t in enumerate(inputs):
                spec = schema.input_spec(k)
                if t == -1 and not (spec and spec.optional):
                    self.fail(f"{what}: required input {k} is absent")
            ops.append(Op(op_type, name, inputs, outputs, attrs, schema.resolve_attrs(attrs, what)))
        graph = Graph(gname, tensors, ops, index_list(g, "Inputs", where), index_list(g, "Outputs", where))
        self._check_graph(graph, where)
        return graph

    def _attr(self, a, what: str, buffers, n_graphs: int, gi: int):
        kind = a.Type()
        if kind == 1:
            return a.I()
        if kind == 2:
            return a.F()
        if kind == 3:
            return self.string(a.S(), what)
        if kind == 4:
            return [a.Ints(k) for k in range(self.vec(a, "Ints", what, 8))]
        if kind == 5:
            return [a.Floats(k) for k in range(self.vec(a, "Floats", what))]
        if kind == 6:
            return [self.string(a.Strings(k), what) for k in range(self.vec(a, "Strings", what))]
        if kind == 7:
            shape = tuple(a.Ints(k) for k in range(self.vec(a, "Ints", what, 8)))
            return self._constant(buffers, a.Tensor(), dtypes.from_code(a.I(), what), shape, what)
        if kind == 8:
            g = a.Graph()
            if not 0 < g < n_graphs or g == gi:
                self.fail(f"{what}: graph index {g} out of range or self-referencing")
            return GraphRef(g)
        self.fail(f"{what}: unknown attribute type code {kind}")

    def _check_graph(self, g: Graph, where: str) -> None:
        """One producer per tensor, inputs/outputs defined, acyclic; sorts ops topologically."""
        producer: dict[int, int] = {}
        for i, op in enumerate(g.ops):
            for t in op.outputs:
                if t < 0:
                    continue
                if t in producer:
                    self.fail(f"{where}: tensor '{g.tensors[t].name}' is written by two ops")
                if g.tensors[t].data is not None:
                    self.fail(f"{where}: constant '{g.tensors[t].name}' is written by op '{op.name}'")
                producer[t] = i
        for t in g.inputs:
            if t in producer or g.tensors[t].data is not None:
                self.fail(f"{where}: graph input '{g.tensors[t].name}' is also a constant or an op output")
        available = set(g.inputs) | {t for t, d in enumerate(g.tensors) if d.data is not None}
        for op in g.ops:
            for t in op.inputs:
                if t >= 0 and t not in available and t not in producer:
                    self.fail(f"{where}: op '{op.name}' reads tensor '{g.tensors[t].name}' that nothing defines")
        for t in g.outputs:
            if t not in available and t not in producer:
                self.fail(f"{where}: graph output '{g.tensors[t].name}' is not defined")
        # Kahn's algorithm; stable (keeps file order where it is already topological)
        deps = [{producer[t] for t in op.inputs if t in producer} for op in g.ops]
        users: dict[int, list[int]] = {}
        for i, d in enumerate(deps):
            for j in d:
                users.setdefault(j, []).append(i)
        remaining = [len(d) for d in deps]
        ready = [i for i, r in enumerate(remaining) if r == 0]
        order = []
        import heapq

        heapq.heapify(ready)
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users.get(i, ()):
                remaining[u] -= 1
                if remaining[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) != len(g.ops):
            stuck = [g.ops[i].name or g.ops[i].type for i, r in enumerate(remaining) if r > 0][:5]
            self.fail(f"{where}: graph has a cycle through ops {stuck}")
        g.ops = [g.ops[i] for i in order]

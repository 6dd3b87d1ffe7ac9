"""Reading and validating ``.mnnpy`` files: flatbuffer tables -> ``Net``.

``ModelReader.read`` checks everything before it returns: identifier, format version,
every vector length against the file size (so hostile lengths cannot make it allocate
without bound), dtypes, buffer ranges and sizes against shapes, tensor and graph indices,
op types and attributes against their schemas, arity; then ``check_graph``: one producer
per tensor, inputs and outputs defined, and acyclicity (ops put in topological order);
then ``check_bodies_tree``: the graph references form a tree under the main graph at most
``MAX_NESTING`` deep, and each control-flow op fits its bodies (``check_bodies``).
Any problem raises ``ModelFormatError`` naming the file and what is wrong. Nothing here
recurses over the file's structure, and what is allocated is bounded by the file's size.
"""

from __future__ import annotations

import heapq
import math
import struct
from typing import Any, NoReturn

import numpy as np

from mnnpy import dtypes
from mnnpy.errors import ModelFormatError
from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc
from mnnpy.model_writer import TENSOR_KINDS
from mnnpy.ops import get_schema
from mnnpy.ops.control_flow import MAX_NESTING, body_refs, check_bodies
from mnnpy.schema import model_generated as fb

AttrType = fb.AttrType

# what the flatbuffers runtime raises on offsets that point outside the buffer
MAX_RANK = 64  # dims of a tensor: NumPy 2's NPY_MAXDIMS (a larger rank cannot be an array)
MAX_ATTR_LIST = 1 << 16  # elements of an ints/floats/strings attribute (every schema's lists are rank- or input-sized)
_MALFORMED = (IndexError, struct.error, ValueError, TypeError, OverflowError, AttributeError, RecursionError)


class ModelReader:
    """Reads one file's bytes ``buf`` (named ``where`` in errors) once, with ``read``.

    ``identifier`` (4 bytes), ``version`` and ``align`` (bytes) are what the file must carry:
    its identifier, its format version and the alignment of every constant's file offset.
    Constants are returned as read-only views of ``buf`` (zero-copy).
    """

    def __init__(self, buf, where: str, *, identifier: bytes, version: int, align: int):
        self.buf = buf
        self.n = len(buf)
        self.where = where
        self.identifier, self.version, self.align = identifier, version, align
        self.buffers: list[tuple[int, int]] = []  # (file offset, size in bytes) per Buffer
        self.n_graphs = 0

    def fail(self, msg: str) -> NoReturn:
        """Raise ``ModelFormatError`` for this file."""
        raise ModelFormatError(f"{self.where}: {msg}")

    def vec(self, obj, name: str, what: str, elem_bytes: int = 4) -> int:
        """Length of vector field ``name`` of ``obj``, bounded by the file size."""
        if getattr(obj, f"{name}IsNone")():
            return 0
        n = getattr(obj, f"{name}Length")()
        if n < 0 or n * elem_bytes > self.n:
            self.fail(f"{what}: vector '{name}' claims {n} elements, more than the file can hold")
        return n

    def numbers(self, obj, name: str, what: str, elem_bytes: int = 4) -> np.ndarray:
        """Scalar vector field ``name`` of ``obj`` as a read-only NumPy view of the file (its
        ``AsNumpy`` accessor: no Python call per element), ending inside the file. A length
        edited to millions took a minute when read one element at a time (issue 12 defect 3:
        73 s for a 54 MB model)."""
        if self.vec(obj, name, what, elem_bytes) == 0:
            return np.zeros(0, np.int64)
        try:
            return getattr(obj, f"{name}AsNumpy")()
        except ValueError:  # np.frombuffer: the vector runs past the end of the file
            self.fail(f"{what}: vector '{name}' runs past the end of the file")

    def string(self, value: bytes | None, what: str) -> str:
        """A string field as ``str`` ("" when absent); raises when it is not UTF-8."""
        if value is None:
            return ""
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{what}: string is not valid UTF-8")

    # ---------------------------------------------------------------------- model
    def read(self) -> Net:
        """The validated ``Net``; raises ``ModelFormatError`` (never another exception)."""
        if self.n < 8:
            self.fail(f"file is {self.n} bytes, too short to be an mnnpy model")
        if bytes(self.buf[4:8]) != self.identifier:
            self.fail(f"file identifier is {bytes(self.buf[4:8])!r}, expected {self.identifier!r} (not an mnnpy model)")
        try:
            return self._model()
        except ModelFormatError:
            raise
        except _MALFORMED as e:
            raise ModelFormatError(f"{self.where}: malformed flatbuffer ({type(e).__name__}: {e})") from None

    def _model(self) -> Net:
        root = struct.unpack_from("<I", self.buf, 0)[0]
        if root + 4 > self.n:
            self.fail(f"root table offset {root} beyond the end of the file ({self.n} bytes)")
        model = fb.Model.GetRootAs(self.buf, 0)
        version = model.FormatVersion()
        if version != self.version:
            self.fail(f"format version {version} is not supported (this mnnpy reads version {self.version})")
        self.buffers = [self._buffer(model.Buffers(i), i) for i in range(self.vec(model, "Buffers", "model"))]
        self.n_graphs = self.vec(model, "Graphs", "model")
        if self.n_graphs == 0:
            self.fail("model has no graph")
        metadata = self._metadata(model)
        graphs = [self._graph(model.Graphs(gi), gi) for gi in range(self.n_graphs)]
        check_bodies_tree(graphs, self.where)
        return Net(
            graphs=graphs,
            metadata=metadata,
            producer_name=self.string(model.ProducerName(), "model"),
            producer_version=self.string(model.ProducerVersion(), "model"),
            format_version=version,
        )

    def _buffer(self, b, i: int) -> tuple[int, int]:
        """(offset, size) of Buffer ``i``: aligned and inside the file."""
        off, size = b.Offset(), b.Size()
        if off % self.align or off + size > self.n:
            self.fail(f"buffer {i}: offset {off} size {size} is misaligned or beyond the file ({self.n} bytes)")
        return off, size

    def _metadata(self, model) -> dict[str, str]:
        metadata = {}
        for i in range(self.vec(model, "Metadata", "model")):
            kv = model.Metadata(i)
            metadata[self.string(kv.Key(), f"metadata {i}")] = self.string(kv.Value(), f"metadata {i}")
        return metadata

    def _constant(self, index: int, dtype: np.dtype, shape: tuple, what: str) -> np.ndarray:
        """View of Buffer ``index`` as ``dtype`` ``shape``; its size must match exactly."""
        if not 0 <= index < len(self.buffers):
            self.fail(f"{what}: buffer index {index} out of range (model has {len(self.buffers)} buffers)")
        off, size = self.buffers[index]
        if any(not isinstance(d, int) or d < 0 for d in shape):
            self.fail(f"{what}: a constant must have a fixed shape, got {shape}")
        need = math.prod(shape) * dtype.itemsize
        if need != size:
            self.fail(f"{what}: shape {shape} of {dtype} needs {need} bytes, its buffer has {size}")
        return np.frombuffer(self.buf, dtype=dtype, count=math.prod(shape), offset=off).reshape(shape)

    # ---------------------------------------------------------------------- graph
    def _graph(self, g, gi: int) -> Graph:
        gname = self.string(g.Name(), f"graph {gi}")
        where = f"graph {gi} ('{gname}')"
        tensors = [self._tensor(g.Tensors(ti), f"{where} tensor {ti}") for ti in range(self.vec(g, "Tensors", where))]
        ops = [self._op(g.Ops(oi), f"{where} op {oi}", len(tensors), gi) for oi in range(self.vec(g, "Ops", where))]
        inputs = self._indices(g, "Inputs", where, len(tensors))
        outputs = self._indices(g, "Outputs", where, len(tensors))
        graph = Graph(gname, tensors, ops, inputs, outputs)
        check_graph(graph, f"{self.where}: {where}")
        return graph

    def _indices(self, obj, field: str, what: str, n_tensors: int, allow_absent: bool = False) -> list[int]:
        """Tensor indices in vector ``field``, each in range (or -1 where ``allow_absent``)."""
        out = self.numbers(obj, field, what)
        bad = (out < (-1 if allow_absent else 0)) | (out >= n_tensors)
        if bad.any():
            self.fail(f"{what}: {field.lower()} index {out[bad.argmax()]} out of range ({n_tensors} tensors)")
        return out.tolist()

    def _tensor(self, t, at: str) -> TensorDesc:
        name = self.string(t.Name(), at)
        what = f"{at} ('{name}')"
        dtype = dtypes.from_code(t.Dtype(), what)
        shape = self._shape(t, what) if t.HasShape() else None
        kind = t.Kind()
        if not 0 <= kind < len(TENSOR_KINDS):
            self.fail(f"{what}: unknown tensor kind code {kind} (0: tensor, 1: sequence)")
        data = None
        if t.Buffer() != -1:
            if shape is None:
                self.fail(f"{what}: a constant needs a shape")
            if kind != 0:
                self.fail(f"{what}: a sequence cannot be a constant")
            data = self._constant(t.Buffer(), dtype, shape, what)
        return TensorDesc(name, dtype, shape, data, TENSOR_KINDS[kind])

    def _shape(self, t, what: str) -> tuple:
        """Dims: sizes >= 0, names (str) or None for an unnamed dynamic dim (stored as -1)."""
        shape = []
        rank = self.vec(t, "Shape", what)
        if rank > MAX_RANK:
            self.fail(f"{what}: rank {rank} exceeds {MAX_RANK}, NumPy's most dimensions")
        for di in range(rank):
            d = t.Shape(di)
            v = d.Value()
            if v < -1:
                self.fail(f"{what}: dim {di} is {v}")
            shape.append(v if v >= 0 else (self.string(d.Param(), what) or None))
        return tuple(shape)

    # ------------------------------------------------------------------------- op
    def _op(self, o, at: str, n_tensors: int, gi: int) -> Op:
        op_type = self.string(o.Type(), at)
        name = self.string(o.Name(), at)
        what = f"{at} ({op_type} '{name}')"
        schema = get_schema(op_type)
        if schema is None:
            self.fail(f"{what}: unknown op type '{op_type}'")
        inputs = self._indices(o, "Inputs", what, n_tensors, allow_absent=True)
        outputs = self._indices(o, "Outputs", what, n_tensors, allow_absent=True)
        attrs = {}
        for ai in range(self.vec(o, "Attributes", what)):
            a = o.Attributes(ai)
            key = self.string(a.Name(), what)
            attrs[key] = self._attribute(a, f"{what} attribute '{key}'", gi)
        schema.check_arity(len(inputs), len(outputs), what)
        for k, t in enumerate(inputs):
            spec = schema.input_spec(k)
            if t == -1 and not (spec and spec.optional):
                self.fail(f"{what}: required input {k} is absent")
        return Op(op_type, name, inputs, outputs, attrs, schema.resolve_attrs(attrs, what))

    def _attribute(self, a, what: str, gi: int) -> Any:
        """The value of one attribute of an op in graph ``gi``, by its type code."""
        kind = a.Type()
        if kind in (AttrType.INTS, AttrType.FLOATS, AttrType.STRINGS):
            field = {AttrType.INTS: "Ints", AttrType.FLOATS: "Floats", AttrType.STRINGS: "Strings"}[kind]
            n = self.vec(a, field, what, 8 if kind == AttrType.INTS else 4)
            if n > MAX_ATTR_LIST:
                self.fail(f"{what}: {n} elements, more than an attribute list may hold ({MAX_ATTR_LIST})")
        if kind == AttrType.INT:
            return a.I()
        if kind == AttrType.FLOAT:
            return a.F()
        if kind == AttrType.STRING:
            return self.string(a.S(), what)
        if kind == AttrType.INTS:
            return self.numbers(a, "Ints", what, 8).tolist()
        if kind == AttrType.FLOATS:
            return self.numbers(a, "Floats", what).tolist()
        if kind == AttrType.STRINGS:
            return [self.string(a.Strings(k), what) for k in range(self.vec(a, "Strings", what))]
        if kind == AttrType.TENSOR:
            shape = tuple(self.numbers(a, "Ints", what, 8).tolist())
            return self._constant(a.Tensor(), dtypes.from_code(a.I(), what), shape, what)
        if kind == AttrType.GRAPH:
            return self._graph_ref(a.Graph(), what, gi)
        self.fail(f"{what}: unknown attribute type code {kind}")

    def _graph_ref(self, g: int, what: str, gi: int) -> GraphRef:
        """A body graph: another graph than ``gi``, never the main graph (0)."""
        if not 0 < g < self.n_graphs or g == gi:
            self.fail(f"{what}: graph index {g} out of range or self-referencing")
        return GraphRef(g)


# --------------------------------------------------------------------- graph structure
def check_bodies_tree(graphs: list[Graph], where: str) -> None:
    """Bodies form a tree: each graph but the main one is the body of exactly one op, reached
    from the main graph (no cycle, no orphan) within ``MAX_NESTING`` levels; then each
    control-flow op's arity rules against its bodies (``check_bodies``). Iterative: a hostile
    nesting cannot exhaust the stack. ``ModelFormatError`` (prefixed ``where``) names the
    graph and the op otherwise.
    """

    def label(gi: int) -> str:
        return f"graph {gi} ('{graphs[gi].name}')"

    owner: dict[int, tuple[int, str]] = {}  # body -> (graph of its op, description of the op)
    bodies: list[list[int]] = [[] for _ in graphs]
    for gi, g in enumerate(graphs):
        for oi, op in enumerate(g.ops):
            what = f"{label(gi)} op {oi} ({op.type} '{op.name}')"
            for attr, child in body_refs(op):
                if child in owner:
                    raise ModelFormatError(f"{where}: {label(child)} is the body of two ops: {owner[child][1]} and {what}")
                owner[child] = (gi, f"{what} attribute '{attr}'")
                bodies[gi].append(child)
    depth = {0: 0}
    todo = [0]
    while todo:
        gi = todo.pop()
        for child in bodies[gi]:
            depth[child] = depth[gi] + 1
            if depth[child] > MAX_NESTING:
                raise ModelFormatError(
                    f"{where}: {label(child)}, the body of {owner[child][1]}, is nested {depth[child]} levels deep "
                    f"(at most {MAX_NESTING})"
                )
            todo.append(child)
    for gi in range(len(graphs)):
        if gi not in depth:
            raise ModelFormatError(f"{where}: {label(gi)} is not reachable from the main graph ({_why_unreached(gi, owner)})")
    for gi, g in enumerate(graphs):
        for oi, op in enumerate(g.ops):
            check_bodies(op, graphs, f"{where}: {label(gi)} op {oi} ({op.type} '{op.name}')", g)


def _why_unreached(gi: int, owner: dict[int, tuple[int, str]]) -> str:
    """Why graph ``gi`` hangs from no chain of bodies under the main graph: an orphan or a cycle."""
    seen = {gi}
    while gi in owner:
        gi = owner[gi][0]
        if gi in seen:
            return f"graph references form a cycle through graph {gi}"
        seen.add(gi)
    return f"graph {gi} is the body of no op"


def check_graph(g: Graph, where: str) -> None:
    """One producer per tensor, every tensor read defined, acyclic; sorts ``g.ops`` topologically.

    ``where`` (file and graph) prefixes the ``ModelFormatError`` raised.
    """
    producer = _producers(g, where)
    _check_defined(g, producer, where)
    g.ops = [g.ops[i] for i in _topological_order(g, producer, where)]


def _producers(g: Graph, where: str) -> dict[int, int]:
    """Tensor index -> index of the op writing it; a tensor has at most one writer, a constant none."""
    producer: dict[int, int] = {}
    for i, op in enumerate(g.ops):
        for t in op.outputs:
            if t < 0:
                continue
            if t in producer:
                raise ModelFormatError(f"{where}: tensor '{g.tensors[t].name}' is written by two ops")
            if g.tensors[t].data is not None:
                raise ModelFormatError(f"{where}: constant '{g.tensors[t].name}' is written by op '{op.name}'")
            producer[t] = i
    return producer


def _check_defined(g: Graph, producer: dict[int, int], where: str) -> None:
    """Graph inputs are neither constants nor op outputs; what ops and the graph read is defined."""
    for t in g.inputs:
        if t in producer or g.tensors[t].data is not None:
            raise ModelFormatError(f"{where}: graph input '{g.tensors[t].name}' is also a constant or an op output")
    defined = set(g.inputs) | {t for t, d in enumerate(g.tensors) if d.data is not None} | set(producer)
    for op in g.ops:
        for t in op.inputs:
            if t >= 0 and t not in defined:
                raise ModelFormatError(f"{where}: op '{op.name}' reads tensor '{g.tensors[t].name}' that nothing defines")
    for t in g.outputs:
        if t not in defined:
            raise ModelFormatError(f"{where}: graph output '{g.tensors[t].name}' is not defined")


def _topological_order(g: Graph, producer: dict[int, int], where: str) -> list[int]:
    """Op indices in topological order (Kahn's algorithm, smallest index first, so a file
    already in topological order keeps its order); raises on a cycle."""
    deps = [{producer[t] for t in op.inputs if t in producer} for op in g.ops]
    users: dict[int, list[int]] = {}
    for i, d in enumerate(deps):
        for j in d:
            users.setdefault(j, []).append(i)
    remaining = [len(d) for d in deps]
    ready = [i for i, r in enumerate(remaining) if r == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, ()):
            remaining[u] -= 1
            if remaining[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(g.ops):
        stuck = [g.ops[i].name or g.ops[i].type for i, r in enumerate(remaining) if r > 0][:5]
        raise ModelFormatError(f"{where}: graph has a cycle through ops {stuck}")
    return order

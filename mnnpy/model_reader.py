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

import functools
import heapq
import math
import struct
from typing import Any, NoReturn

import numpy as np

from mnnpy import dtypes, flat_table
from mnnpy.errors import ModelFormatError
from mnnpy.flat_table import FlatTable
from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc
from mnnpy.model_writer import TENSOR_KINDS
from mnnpy.ops import get_schema
from mnnpy.ops.control_flow import MAX_NESTING, body_refs, check_bodies
from mnnpy.schema.model_generated import AttrType

# field indices of each table, in the order of mnnpy/schema/model.fbs
_DIM_VALUE, _DIM_PARAM = 0, 1
_BUFFER_OFFSET, _BUFFER_SIZE = 0, 1
_TENSOR_NAME, _TENSOR_DTYPE, _TENSOR_SHAPE, _TENSOR_HAS_SHAPE, _TENSOR_BUFFER, _TENSOR_KIND = range(6)
_ATTR_NAME, _ATTR_TYPE, _ATTR_I, _ATTR_F, _ATTR_S, _ATTR_INTS, _ATTR_FLOATS, _ATTR_STRINGS, _ATTR_TENSOR, _ATTR_GRAPH = range(10)
_OP_TYPE, _OP_NAME, _OP_INPUTS, _OP_OUTPUTS, _OP_ATTRIBUTES = range(5)
_GRAPH_NAME, _GRAPH_TENSORS, _GRAPH_OPS, _GRAPH_INPUTS, _GRAPH_OUTPUTS = range(5)
_KV_KEY, _KV_VALUE = 0, 1
_MODEL_VERSION, _MODEL_PRODUCER, _MODEL_PRODUCER_VERSION, _MODEL_METADATA, _MODEL_GRAPHS, _MODEL_BUFFERS = range(6)
_I8, _U8, _I32, _U32, _I64, _U64, _F32 = (struct.Struct(f) for f in ("<b", "<B", "<i", "<I", "<q", "<Q", "<f"))
_INT32, _INT64, _FLOAT32 = np.dtype("<i4"), np.dtype("<i8"), np.dtype("<f4")

# what the flatbuffers runtime raises on offsets that point outside the buffer
MAX_RANK = 64  # dims of a tensor: NumPy 2's NPY_MAXDIMS (a larger rank cannot be an array)
SHARING = 4  # times the file's size that its strings and vectors may add up to when read
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
        # bytes of strings and vectors read so far, and how many a file may make us read: a
        # flatbuffer may point many fields at one string or vector (a 1 MB file naming 20,000
        # tensors with one 1 MB string asked for 20 GB); a file mnnpy writes reads each once
        self.spent, self.budget = 0, SHARING * self.n + (1 << 20)
        self.seen: set[int] = set()  # positions of the tables read

    def fail(self, msg: str) -> NoReturn:
        """Raise ``ModelFormatError`` for this file."""
        raise ModelFormatError(f"{self.where}: {msg}")

    def vec(self, t: FlatTable, field: int, name: str, what: str, elem_bytes: int = 4) -> tuple[int, int]:
        """``(start, length)`` of vector ``field`` (named ``name`` in errors) of table ``t``,
        its length bounded by the file size."""
        start, n = t.vector(field)
        if n * elem_bytes > self.n:
            self.fail(f"{what}: vector '{name}' claims {n} elements, more than the file can hold")
        self.spend(4 + n * elem_bytes, what)
        return start, n

    def tables(self, t: FlatTable, field: int, name: str, what: str) -> list[FlatTable]:
        """The tables of vector ``field`` (named ``name``) of ``t``. Each table of a file is
        referenced once (flatbuffers lets many references share one: a 10 MB file listing one
        graph 2.5 million times took 21 s and 1 GB before the budget refused it); a table
        referenced again is refused at once."""
        return [t.at(pos) for pos in self.table_positions(t, field, name, what)]

    def table_positions(self, t: FlatTable, field: int, name: str, what: str) -> list[int]:
        """Where the tables of vector ``field`` (named ``name``) of ``t`` are, each checked
        not to be referenced before (``tables``)."""
        positions = t.positions(*self.vec(t, field, name, what))
        seen = self.seen
        for pos in positions:
            if pos in seen:
                self.fail(f"{_short(what)}: vector '{name}' refers to the table at byte {pos} again (tables are not shared)")
            seen.add(pos)
        return positions

    def spend(self, nbytes: int, what: str) -> None:
        """Count ``nbytes`` more read from strings and vectors; past ``SHARING`` times the
        file's size (fields pointing at the same data again and again) the file is refused."""
        self.spent += nbytes
        if self.spent > self.budget:
            self.fail(
                f"{_short(what)}: its strings and vectors add up to more than {SHARING}x the file's {self.n} bytes "
                "(fields point at the same data again and again)"
            )

    def numbers(self, t: FlatTable, field: int, name: str, what: str, dtype: np.dtype = _INT32) -> np.ndarray:
        """Scalar vector ``field`` of ``t`` as a read-only NumPy view of the file (no Python
        call per element), ending inside the file. A length edited to millions took a minute
        when read one element at a time (issue 12 defect 3: 73 s for a 54 MB model)."""
        start, n = self.vec(t, field, name, what, dtype.itemsize)
        if n == 0:
            return np.zeros(0, np.int64)
        try:
            return t.numbers(start, n, dtype)
        except ValueError:  # np.frombuffer: the vector runs past the end of the file
            self.fail(f"{what}: vector '{name}' runs past the end of the file")

    def string(self, span: tuple[int, int] | None, what: str) -> str:
        """A string field (``FlatTable.string``'s span) as ``str`` ("" when absent), counted
        against the budget before it is copied; raises when it is not UTF-8."""
        if span is None:
            return ""
        start, length = span
        self.spend(4 + length, what)
        try:
            return bytes(self.buf[start : start + length]).decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{_short(what)}: string is not valid UTF-8")

    # ---------------------------------------------------------------------- model
    def read(self) -> Net:
        """The validated ``Net``; raises ``ModelFormatError`` (never another exception)."""
        if self.n < 8:
            self.fail(f"file is {self.n} bytes, too short to be an mnnpy model")
        if bytes(self.buf[4:8]) != self.identifier:
            self.fail(f"file identifier is {bytes(self.buf[4:8])!r}, expected {self.identifier!r} (not an mnnpy model)")
        try:
            return self._model()
        except ModelFormatError as e:
            if str(e).startswith(f"{self.where}: "):
                raise
            raise ModelFormatError(f"{self.where}: {e}") from None  # a schema's or dtype's check names the op only
        except _MALFORMED as e:
            raise ModelFormatError(f"{self.where}: malformed flatbuffer ({type(e).__name__}: {e})") from None

    def _model(self) -> Net:
        root = struct.unpack_from("<I", self.buf, 0)[0]
        if root + 4 > self.n:
            self.fail(f"root table offset {root} beyond the end of the file ({self.n} bytes)")
        model = flat_table.root(self.buf, self.n)
        version = model.scalar(_MODEL_VERSION, _U32, 0)
        if version != self.version:
            self.fail(f"format version {version} is not supported (this mnnpy reads version {self.version})")
        buffer_tables = self.tables(model, _MODEL_BUFFERS, "Buffers", "model")
        self.buffers = [self._buffer(b, i) for i, b in enumerate(buffer_tables)]
        graph_tables = self.tables(model, _MODEL_GRAPHS, "Graphs", "model")
        self.n_graphs = len(graph_tables)
        if self.n_graphs == 0:
            self.fail("model has no graph")
        metadata = self._metadata(model)
        graphs = [self._graph(g, gi) for gi, g in enumerate(graph_tables)]
        check_bodies_tree(graphs, self.where)
        return Net(
            graphs=graphs,
            metadata=metadata,
            producer_name=self.string(model.string(_MODEL_PRODUCER), "model"),
            producer_version=self.string(model.string(_MODEL_PRODUCER_VERSION), "model"),
            format_version=version,
        )

    def _buffer(self, b: FlatTable, i: int) -> tuple[int, int]:
        """(offset, size) of Buffer ``i``: aligned and inside the file."""
        off, size = b.scalar(_BUFFER_OFFSET, _U64, 0), b.scalar(_BUFFER_SIZE, _U64, 0)
        if off % self.align or off + size > self.n:
            self.fail(f"buffer {i}: offset {off} size {size} is misaligned or beyond the file ({self.n} bytes)")
        return off, size

    def _metadata(self, model: FlatTable) -> dict[str, str]:
        metadata = {}
        for i, kv in enumerate(self.tables(model, _MODEL_METADATA, "Metadata", "model")):
            metadata[self.string(kv.string(_KV_KEY), f"metadata {i}")] = self.string(kv.string(_KV_VALUE), f"metadata {i}")
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
    def _graph(self, g: FlatTable, gi: int) -> Graph:
        gname = self.string(g.string(_GRAPH_NAME), f"graph {gi}")
        where = f"graph {gi} ('{_short(gname)}')"
        tensor_tables = self.tables(g, _GRAPH_TENSORS, "Tensors", where)
        tensors = [self._tensor(t, f"{where} tensor {ti}") for ti, t in enumerate(tensor_tables)]
        op_tables = self.tables(g, _GRAPH_OPS, "Ops", where)
        ops = [self._op(o, f"{where} op {oi}", len(tensors), gi) for oi, o in enumerate(op_tables)]
        inputs = self._indices(g, _GRAPH_INPUTS, "Inputs", where, len(tensors))
        outputs = self._indices(g, _GRAPH_OUTPUTS, "Outputs", where, len(tensors))
        graph = Graph(gname, tensors, ops, inputs, outputs)
        check_graph(graph, f"{self.where}: {where}")
        return graph

    def _indices(self, t: FlatTable, field: int, name: str, what: str, n_tensors: int, allow_absent: bool = False) -> list[int]:
        """Tensor indices in vector ``field`` (named ``name``), each in range (or -1 where ``allow_absent``)."""
        start, n = self.vec(t, field, name, what, 4)
        if n <= SMALL_VECTOR:  # a few indices: struct is faster than a NumPy view
            if start + 4 * n > self.n:
                self.fail(f"{what}: vector '{name}' runs past the end of the file")
            out = list(_int32s(n).unpack_from(self.buf, start)) if n else []
            lowest = -1 if allow_absent else 0
            if out and (min(out) < lowest or max(out) >= n_tensors):
                bad = next(i for i in out if i < lowest or i >= n_tensors)
                self.fail(f"{what}: {name.lower()} index {bad} out of range ({n_tensors} tensors)")
            return out
        arr = self.numbers(t, field, name, what)
        bad = (arr < (-1 if allow_absent else 0)) | (arr >= n_tensors)
        if bad.any():
            self.fail(f"{what}: {name.lower()} index {arr[bad.argmax()]} out of range ({n_tensors} tensors)")
        return arr.tolist()

    def _tensor(self, t: FlatTable, at: str) -> TensorDesc:
        name = self.string(t.string(_TENSOR_NAME), at)
        what = f"{at} ('{_short(name)}')"
        dtype = dtypes.from_code(t.scalar(_TENSOR_DTYPE, _I8, 0), what)
        shape = self._shape(t, what) if t.scalar(_TENSOR_HAS_SHAPE, _U8, 0) else None
        kind = t.scalar(_TENSOR_KIND, _I8, 0)
        if not 0 <= kind < len(TENSOR_KINDS):
            self.fail(f"{what}: unknown tensor kind code {kind} (0: tensor, 1: sequence)")
        data = None
        buffer = t.scalar(_TENSOR_BUFFER, _I32, -1)
        if buffer != -1:
            if shape is None:
                self.fail(f"{what}: a constant needs a shape")
            if kind != 0:
                self.fail(f"{what}: a sequence cannot be a constant")
            data = self._constant(buffer, dtype, shape, what)
        return TensorDesc(name, dtype, shape, data, TENSOR_KINDS[kind])

    def _shape(self, t: FlatTable, what: str) -> tuple:
        """Dims: sizes >= 0, names (str) or None for an unnamed dynamic dim (stored as -1)."""
        shape = []
        rank = t.vector(_TENSOR_SHAPE)[1]
        if rank > MAX_RANK:
            self.fail(f"{what}: rank {rank} exceeds {MAX_RANK}, NumPy's most dimensions")
        buf, n = self.buf, self.n
        for di, pos in enumerate(self.table_positions(t, _TENSOR_SHAPE, "Shape", what)):
            fields = flat_table.slots(buf, n, pos)  # a Dim: (value, param); most dims are a value alone
            v = _I64.unpack_from(buf, pos + fields[_DIM_VALUE])[0] if fields and fields[_DIM_VALUE] else -1
            if v < -1:
                self.fail(f"{what}: dim {di} is {v}")
            shape.append(v if v >= 0 else (self.string(FlatTable(buf, n, pos).string(_DIM_PARAM), what) or None))
        return tuple(shape)

    # ------------------------------------------------------------------------- op
    def _op(self, o: FlatTable, at: str, n_tensors: int, gi: int) -> Op:
        op_type = self.string(o.string(_OP_TYPE), at)
        name = self.string(o.string(_OP_NAME), at)
        what = f"{at} ({_short(op_type)} '{_short(name)}')"
        schema = get_schema(op_type)
        if schema is None:
            self.fail(f"{what}: unknown op type '{op_type}'")
        inputs = self._indices(o, _OP_INPUTS, "Inputs", what, n_tensors, allow_absent=True)
        outputs = self._indices(o, _OP_OUTPUTS, "Outputs", what, n_tensors, allow_absent=True)
        attrs = {}
        for a in self.tables(o, _OP_ATTRIBUTES, "Attributes", what):
            key = self.string(a.string(_ATTR_NAME), what)
            if key in attrs:
                self.fail(f"{what}: attribute '{_short(key)}' given twice")
            attrs[key] = self._attribute(a, f"{what} attribute '{_short(key)}'", gi)
        schema.check_arity(len(inputs), len(outputs), what)
        for k, t in enumerate(inputs):
            spec = schema.input_spec(k)
            if t == -1 and not (spec and spec.optional):
                self.fail(f"{what}: required input {k} is absent")
        return Op(op_type, name, inputs, outputs, attrs, schema.resolve_attrs(attrs, what))

    def _attribute(self, a: FlatTable, what: str, gi: int) -> Any:
        """The value of one attribute of an op in graph ``gi``, by its type code."""
        kind = a.scalar(_ATTR_TYPE, _I8, 0)
        if kind == AttrType.INT:
            return a.scalar(_ATTR_I, _I64, 0)
        if kind == AttrType.FLOAT:
            return a.scalar(_ATTR_F, _F32, 0.0)
        if kind == AttrType.STRING:
            return self.string(a.string(_ATTR_S), what)
        if kind == AttrType.INTS:
            return self._list(a, _ATTR_INTS, "Ints", what, _INT64).tolist()
        if kind == AttrType.FLOATS:
            return self._list(a, _ATTR_FLOATS, "Floats", what, _FLOAT32).tolist()
        if kind == AttrType.STRINGS:
            start, n = self.vec(a, _ATTR_STRINGS, "Strings", what)
            if n > MAX_ATTR_LIST:
                self.fail(f"{what}: {n} elements, more than an attribute list may hold ({MAX_ATTR_LIST})")
            return [self.string(v, what) for v in a.strings(start, n)]
        if kind == AttrType.TENSOR:
            shape = tuple(self.numbers(a, _ATTR_INTS, "Ints", what, _INT64).tolist())
            dtype = dtypes.from_code(a.scalar(_ATTR_I, _I64, 0), what)
            return self._constant(a.scalar(_ATTR_TENSOR, _I32, -1), dtype, shape, what)
        if kind == AttrType.GRAPH:
            return self._graph_ref(a.scalar(_ATTR_GRAPH, _I32, -1), what, gi)
        self.fail(f"{what}: unknown attribute type code {kind}")

    def _list(self, a: FlatTable, field: int, name: str, what: str, dtype: np.dtype) -> np.ndarray:
        """An ints/floats attribute's values (a view of the file), at most ``MAX_ATTR_LIST`` of them."""
        values = self.numbers(a, field, name, what, dtype)
        if values.size > MAX_ATTR_LIST:
            self.fail(f"{what}: {values.size} elements, more than an attribute list may hold ({MAX_ATTR_LIST})")
        return values

    def _graph_ref(self, g: int, what: str, gi: int) -> GraphRef:
        """A body graph: another graph than ``gi``, never the main graph (0)."""
        if not 0 < g < self.n_graphs or g == gi:
            self.fail(f"{what}: graph index {g} out of range or self-referencing")
        return GraphRef(g)


SMALL_VECTOR = 64  # index vectors up to this length are read with struct


@functools.lru_cache(maxsize=SMALL_VECTOR + 1)
def _int32s(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}i")


def _short(text: str, most: int = 120) -> str:
    """``text`` for an error message: at most ``most`` characters (a name may be megabytes)."""
    return text if len(text) <= most else f"{text[:most]}... ({len(text)} characters)"


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
    """Graph inputs and outputs named apart, one producer per tensor, every tensor read
    defined, acyclic; sorts ``g.ops`` topologically.

    ``where`` (file and graph) prefixes the ``ModelFormatError`` raised.
    """
    for kind, indices in (("inputs", g.inputs), ("outputs", g.outputs)):
        names: dict[str, int] = {}
        for t in indices:
            if names.setdefault(g.tensors[t].name, t) != t:  # run() takes and returns them by name
                raise ModelFormatError(f"{where}: two graph {kind} are named '{_short(g.tensors[t].name)}'")
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

"""ONNX ModelProto -> mnnpy Net: one converter function per ONNX op, canonical forms.

Supported: ONNX default-domain opsets 7 through ``onnx.defs.onnx_opset_version()``.
Before converting anything, every node (subgraphs included) is checked; ops without
a converter raise one ``UnsupportedOperatorError`` listing each type with its count.

Control-flow bodies (``If``/``Loop``/``Scan``, ``converter/onnx_ops/control_flow.py``) become
further graphs of the ``Net``, nested to ``MAX_NESTING`` levels. A body reads nothing of
another graph: the names it reads from enclosing graphs (its free names, found through its
nested bodies too) become the op's trailing captured inputs and the body's trailing graph
inputs, in one order; an enclosing constant is copied into the body instead. Values of
ONNX sequence type (graph inputs and outputs, value_info, the sequence ops' outputs) get
``TensorDesc.kind = "sequence"``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper

from mnnpy import dtypes
from mnnpy.converter.registry import converters
from mnnpy.errors import ModelFormatError, UnsupportedOperatorError
from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc
from mnnpy.ops.control_flow import MAX_NESTING

MIN_OPSET = 7


class ConvertContext:
    """State while converting one graph: names -> tensor indices, emitted ops, the opset.

    The main graph's context has no ``parent``; a control-flow body's context (``body``,
    ``new_body``) has the context of the graph that encloses it, and every context of one
    model shares ``graphs`` (``Net.graphs``: the main graph first, then the bodies in the order
    their conversion started) and its nesting ``depth`` (main: 0).
    """

    def __init__(self, opset: int, parent: ConvertContext | None = None, name: str = "main", model=None):
        self.opset = opset
        self.parent = parent
        self.graph = Graph(name)
        self.graphs: list[Graph] = parent.graphs if parent is not None else [self.graph]
        self.depth = parent.depth + 1 if parent is not None else 0
        self.index: dict[str, int] = {}
        self._fresh = 0
        self._root = parent._root if parent is not None else self
        self._model, self._types = model, None

    # tensors ---------------------------------------------------------------------------
    def tensor(self, name: str, dtype=np.float32, shape=None, data: np.ndarray | None = None) -> int:
        """Index of tensor ``name`` (created on first use)."""
        if name not in self.index:
            self.index[name] = self.graph.add_tensor(TensorDesc(name, np.dtype(dtype), shape, data))
        return self.index[name]

    def desc(self, name: str) -> TensorDesc:
        """The ``TensorDesc`` of tensor ``name`` (created on first use, as ``tensor`` does)."""
        return self.graph.tensors[self.tensor(name)]

    def const(self, value: Any, name: str | None = None, dtype=None) -> str:
        """Add a constant tensor and return its name."""
        arr = np.asarray(value, dtype=dtype)
        name = name or self.fresh("const")
        arr = np.require(arr, requirements="C")  # np.ascontiguousarray would make 0-d arrays 1-d
        self.index[name] = self.graph.add_tensor(TensorDesc(name, arr.dtype, tuple(arr.shape), arr))
        return name

    def fresh(self, hint: str) -> str:
        """A new unused tensor name."""
        while True:
            self._fresh += 1
            name = f"{hint}__{self._fresh}"
            if name not in self.index:
                return name

    def value(self, name: str) -> np.ndarray | None:
        """Contents of constant ``name`` (``None`` when not a constant or empty name)."""
        if not name or name not in self.index:
            return None
        return self.graph.tensors[self.index[name]].data

    # ops -------------------------------------------------------------------------------
    def emit(self, type: str, inputs: list[str], outputs: list[str], attrs: dict | None = None, name: str = "") -> None:
        """Append a canonical op; empty input names are absent optional inputs (-1)."""
        ins = [self.tensor(n) if n else -1 for n in inputs]
        outs = [self.tensor(n) if n else -1 for n in outputs]
        self.graph.ops.append(Op(type, name or outputs[0], ins, outs, dict(attrs or {})))

    @staticmethod
    def attrs(node: onnx.NodeProto) -> dict[str, Any]:
        """A node's attributes as Python values (tensors as ndarrays, graphs as ``GraphProto``).
        ``ModelFormatError`` for an attribute without a type (``UNDEFINED``), undecodable
        strings and tensors whose data do not fit their shape (``tensor_array``)."""
        out = {}
        for a in node.attribute:
            where = f"node '{label(node)}' ({node.op_type}): attribute '{a.name}'"
            if a.type == onnx.AttributeProto.UNDEFINED:
                raise ModelFormatError(f"{where} has no type (AttributeProto.type UNDEFINED)")
            try:
                v = onnx.helper.get_attribute_value(a)
                if isinstance(v, bytes):
                    v = v.decode("utf-8")
                elif isinstance(v, list) and v and isinstance(v[0], bytes):
                    v = [s.decode("utf-8") for s in v]
            except (ValueError, TypeError, UnicodeDecodeError) as e:
                raise ModelFormatError(f"{where}: {e}") from e
            if isinstance(v, onnx.TensorProto):
                v = tensor_array(v, where)
            elif isinstance(v, list) and v and isinstance(v[0], onnx.TensorProto):
                v = [tensor_array(t, where) for t in v]
            out[a.name] = v
        return out

    # control-flow bodies -----------------------------------------------------------------
    def captures(self, *bodies: onnx.GraphProto) -> list[str]:
        """The values ``bodies`` read from this graph or above (their free names, in order of first
        reading, without duplicates) that are not constants here: the op's captured inputs.

        Raises ``ModelFormatError`` for a name no enclosing graph defines.
        """
        out: list[str] = []
        for body in bodies:
            for name in free_names(body):
                if name not in self.index:
                    raise ModelFormatError(f"graph '{body.name}' reads '{name}', which no enclosing graph defines")
                if self.value(name) is None and name not in out:
                    out.append(name)
        return out

    def new_body(self, name: str) -> tuple[ConvertContext, GraphRef]:
        """A context for a new, empty body graph named ``name`` (appended to ``graphs``) and its
        reference; ``ModelFormatError`` beyond ``MAX_NESTING`` levels."""
        child = ConvertContext(self.opset, self, name)
        if child.depth > MAX_NESTING:
            raise ModelFormatError(f"graph '{name}' is nested {child.depth} levels deep (at most {MAX_NESTING})")
        self.graphs.append(child.graph)
        return child, GraphRef(len(self.graphs) - 1)

    def input(self, name: str, dtype, shape=None, kind: str = "tensor") -> str:
        """Add graph input ``name`` (``dtype``, ``shape``, ``kind``) to this graph; returns its name."""
        t = self.tensor(name, dtype, shape)
        self.graph.tensors[t].kind = kind
        self.graph.inputs.append(t)
        return name

    def value_type(self, name: str) -> tuple[str, np.dtype] | None:
        """``(kind, dtype)`` of value ``name`` as ONNX's type inference gives it (any graph of the
        model; run once, when first asked), or ``None``. A body's inputs and outputs take their
        types from it where the model declares none, and its captured values where they are
        intermediate tensors of the enclosing graph (whose ``TensorDesc.dtype`` the converter
        does not know: the SizeComputer derives those)."""
        root = self._root
        if root._types is None:
            root._types = _inferred_types(root._model) if root._model is not None else {}
        return root._types.get(name)

    def typed(self, name: str) -> TensorDesc:
        """This graph's tensor ``name`` with the kind and dtype that are known for it: its own for a
        graph input or constant, else what type inference gives (a copy; shape kept)."""
        d = self.desc(name)
        known = self.index[name] in self.graph.inputs or d.data is not None
        t = None if known else self.value_type(name)
        return d if t is None else TensorDesc(d.name, t[1], d.shape, None, t[0])

    def body(self, proto: onnx.GraphProto, name: str, captured: list[str], fallback: list[TensorDesc] = ()) -> GraphRef:
        """Convert body ``proto`` into a new graph named ``name``; returns its reference.

        Its graph inputs are ``proto``'s declared inputs (an input whose type declares no
        element type takes ``fallback[k]``'s dtype and kind), then one per ``captured`` name
        (this graph's tensor of that name: same name, dtype, shape, kind). Constants of this
        graph that ``proto`` reads are copied into it (the same array, so written once).
        """
        child, ref = self.new_body(name)
        for name_ in free_names(proto):
            if self.value(name_) is not None:
                d = self.graph.tensors[self.index[name_]]
                child.index[name_] = child.graph.add_tensor(TensorDesc(d.name, d.dtype, d.shape, d.data))
        extra = [self.typed(n) for n in captured]
        convert_graph(child, proto, fallback, extra)
        return ref

    def type_from_body(self, outputs: list[str], ref: GraphRef, positions) -> None:
        """Give the op outputs ``outputs`` the dtype and kind of body ``ref``'s outputs at ``positions``."""
        body = self.graphs[ref.index]
        for name, k in zip(outputs, positions):
            if name:
                src, dst = body.tensors[body.outputs[k]], self.desc(name)
                dst.dtype, dst.kind = src.dtype, src.kind


def tensor_array(proto: onnx.TensorProto, where: str) -> np.ndarray:
    """The contents of a ``TensorProto`` as an ndarray. ``ModelFormatError`` naming ``where``
    for data that do not fit the declared shape and dtype (short ``raw_data``, wrong counts),
    and for data kept in an external file: ``to_net`` loads those from a model's path; given
    bytes or a ``ModelProto``, there is no folder to look in (ONNX would read the current one)."""
    if external_data_helper.uses_external_data(proto):
        location = next((e.value for e in proto.external_data if e.key == "location"), "?")
        raise ModelFormatError(
            f"{where}: tensor '{proto.name}' keeps its data in the external file '{location}'; "
            "convert the model from its path (the file is looked for beside it)"
        )
    try:
        return numpy_helper.to_array(proto)
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, MemoryError, onnx.checker.ValidationError) as e:
        raise ModelFormatError(f"{where}: tensor '{proto.name}' {list(proto.dims)} is malformed: {e}") from e


def label(node: onnx.NodeProto) -> str:
    """A node's name for messages and op names: its name, else its first output, else its type."""
    return node.name or next((o for o in node.output if o), node.op_type)


def free_names(graph: onnx.GraphProto) -> list[str]:
    """Names ``graph`` reads (its nodes' inputs, its nested bodies' free names, its outputs)
    without defining them (as inputs, initializers or node outputs), in order of first reading."""
    defined = {vi.name for vi in graph.input} | {i.name for i in graph.initializer}
    defined |= {o for n in graph.node for o in n.output}
    out: list[str] = []
    seen: set[str] = set()

    def read(name: str) -> None:
        if name and name not in defined and name not in seen:
            seen.add(name)
            out.append(name)

    for node in graph.node:
        for name in node.input:
            read(name)
        for a in node.attribute:
            for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                for name in free_names(g):
                    read(name)
    for vi in graph.output:
        read(vi.name)
    return out


def _inferred_types(model: onnx.ModelProto) -> dict[str, tuple[str, np.dtype]]:
    """Value name -> ``(kind, dtype)`` over every graph of ``model`` from ONNX's type inference
    (empty where inference fails; values of types mnnpy does not hold are left out)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - inference is a help here, never a requirement
        return {}
    out: dict[str, tuple[str, np.dtype]] = {}
    todo = [inferred.graph]
    while todo:
        g = todo.pop()
        for vi in [*g.input, *g.output, *g.value_info]:
            try:
                kind, dt, _ = value_type(vi, vi.name)
            except ModelFormatError:
                continue
            if dt is not None:
                out.setdefault(vi.name, (kind, dt))
        for n in g.node:
            todo += [a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
            todo += [x for a in n.attribute if a.type == onnx.AttributeProto.GRAPHS for x in a.graphs]
    return out


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    yield from _all_nodes(g)


def _check_names(graph: onnx.GraphProto) -> None:
    """Every name and op type of ``graph`` and its subgraphs must be text: protobuf hands a
    string field that is not valid UTF-8 over as ``bytes``. Raises ``ModelFormatError``."""
    for g in [graph, *(a.g for n in _all_nodes(graph) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)]:
        values = [*g.input, *g.output, *g.value_info]
        names = [g.name, *(v.name for v in values), *(t.name for t in g.initializer)]
        for n in g.node:
            names += [n.op_type, n.domain, n.name, *n.input, *n.output, *(a.name for a in n.attribute)]
        bad = next((x for x in names if not isinstance(x, str)), None)
        if bad is not None:
            raise ModelFormatError(f"ONNX graph '{g.name!r}': name or op type {bad!r} is not UTF-8 text")


def value_type(vi: onnx.ValueInfoProto, where: str) -> tuple[str, np.dtype | None, tuple | None]:
    """``(kind, dtype, shape)`` of a declared value: ``"tensor"`` or ``"sequence"`` (of tensors:
    dtype and shape are the elements'); dtype ``None`` when undeclared, shape ``None`` when the
    rank is unknown. ``ModelFormatError`` for maps, optionals and sequences of non-tensors."""
    kind, t = "tensor", vi.type
    if t.WhichOneof("value") == "sequence_type":
        kind, t = "sequence", t.sequence_type.elem_type
    which = t.WhichOneof("value")
    if which not in (None, "tensor_type"):
        what = f"sequences of {which}" if kind == "sequence" else f"{which} values"
        raise ModelFormatError(f"{where}: {what} are not supported (tensors and sequences of tensors are)")
    tt = t.tensor_type
    dtype = dtypes.from_onnx(tt.elem_type, where) if tt.elem_type else None
    shape = None
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return kind, dtype, shape


def _check_old_opset(model: onnx.ModelProto, opset: int) -> None:
    """A model declaring an opset below ``MIN_OPSET`` converts when each of its ops is the
    same at that opset as at ``MIN_OPSET`` (e.g. Not, unchanged since opset 1)."""
    changed = set()
    for n in _all_nodes(model.graph):
        try:
            old = onnx.defs.get_schema(n.op_type, opset).since_version
            new = onnx.defs.get_schema(n.op_type, MIN_OPSET).since_version
        except onnx.defs.SchemaError:
            changed.add(n.op_type)
            continue
        if old != new:
            changed.add(n.op_type)
    if changed:
        raise ModelFormatError(
            f"ONNX opset {opset} not supported for {sorted(changed)}: their form changed before opset {MIN_OPSET} "
            f"(supported: {MIN_OPSET}..{onnx.defs.onnx_opset_version()}, and older models whose ops did not change)"
        )


def _check_attributes(model: onnx.ModelProto, opset: int) -> None:
    """``ModelFormatError`` for a node attribute that its op does not define at the model's
    opset (ONNX operators.md per version; onnxruntime refuses such a model too), e.g.
    ReduceSum-13's ``axes``, an input since opset 13: ignoring it would reduce other axes."""
    for n in _all_nodes(model.graph):
        if n.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(n.op_type, opset)
        except onnx.defs.SchemaError:
            raise ModelFormatError(
                f"node '{label(n)}' ({n.op_type}): {n.op_type} does not exist at the model's opset {opset}"
                f"{_first_opset(n.op_type)}"
            ) from None
        unknown = sorted({a.name for a in n.attribute} - set(schema.attributes))
        if unknown:
            raise ModelFormatError(
                f"node '{label(n)}' ({n.op_type}): attribute(s) {unknown} are not "
                f"defined by {n.op_type}-{schema.since_version}, the version of opset {opset}"
            )


def _first_opset(op_type: str) -> str:
    """`` (it first appears in opset N)`` for an ONNX op type, or ``""``."""
    versions = [s.since_version for s in onnx.defs.get_all_schemas_with_history() if s.name == op_type]
    return f" (it first appears in opset {min(versions)})" if versions else ""


def import_onnx(model: onnx.ModelProto) -> Net:
    """Convert a ModelProto to a Net (no optimisation passes; see ``optimize``)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise ModelFormatError("ONNX model declares no default-domain opset")
    newest = onnx.defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise ModelFormatError(f"ONNX opset {opset} not supported (supported: {MIN_OPSET}..{newest})")
    _check_names(model.graph)
    table = converters()
    if opset < MIN_OPSET:
        _check_old_opset(model, opset)
    missing = Counter(
        (n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}")
        for n in _all_nodes(model.graph)
        if n.domain not in ("", "ai.onnx") or n.op_type not in table
    )
    if missing:
        raise UnsupportedOperatorError(missing, where=f"ONNX model '{model.graph.name}'")
    _check_attributes(model, opset)
    ctx = ConvertContext(opset, model=model)
    convert_graph(ctx, model.graph)
    ctx.graph.name = model.graph.name or "main"
    return Net(graphs=ctx.graphs, metadata={p.key: p.value for p in model.metadata_props})


_DTYPES = {
    np.dtype(t)
    for t in (
        np.float32,
        np.float16,
        np.float64,
        np.int8,
        np.uint8,
        np.int16,
        np.uint16,
        np.int32,
        np.int64,
        np.uint32,
        np.uint64,
        np.bool_,
    )
}


def convert_node(converter, node: onnx.NodeProto, ctx: ConvertContext) -> None:
    """Apply ``converter`` to ``node``. ``ModelFormatError`` naming the node for a node without
    outputs, and for what a converter function raises on a node it cannot make sense of
    (inputs missing, attribute values of the wrong kind or size)."""
    if not any(node.output):
        raise ModelFormatError(f"node '{label(node)}' ({node.op_type}) has no outputs")
    try:
        converter(node, ctx)
    except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError, AttributeError) as e:
        raise ModelFormatError(f"node '{label(node)}' ({node.op_type}): cannot convert it: {type(e).__name__}: {e}") from e


def _check_single_writer(g: onnx.GraphProto) -> None:
    """``ModelFormatError`` where two nodes of graph ``g`` write the same value, or a node
    writes one of ``g``'s inputs or initializers (ONNX IR.md, "Names Within a Graph": every
    name is assigned once; the onnx checker and onnxruntime refuse such graphs, whereas
    converting them made the last writer win)."""
    writer = {i.name: f"graph input '{i.name}'" for i in g.input}
    writer.update({i.name: f"initializer '{i.name}'" for i in g.initializer})
    for node in g.node:
        for name in node.output:
            if not name:
                continue
            if name in writer:
                raise ModelFormatError(
                    f"graph '{g.name}': node '{label(node)}' ({node.op_type}) writes '{name}', "
                    f"which {writer[name]} already defines (each value has one writer)"
                )
            writer[name] = f"node '{label(node)}' ({node.op_type})"


def convert_graph(ctx: ConvertContext, g: onnx.GraphProto, fallback=(), extra: list[TensorDesc] = ()) -> None:
    """Convert graph ``g`` into ``ctx.graph``: initializers, declared inputs, ``extra`` inputs
    (a body's captured values), every node, the outputs; value_info marks sequences.

    A declared input without an element type takes the dtype and kind of ``fallback[k]``
    (bodies: what the op passes in); the main graph's inputs must declare theirs.
    """
    table = converters()
    for init in list(g.initializer):
        arr = tensor_array(init, f"graph '{g.name}': initializer '{init.name}'")
        if arr.dtype not in _DTYPES:
            raise ModelFormatError(f"initializer '{init.name}': dtype {arr.dtype} is not supported")
        ctx.const(arr, init.name)
    inits = {i.name for i in g.initializer}
    for k, vi in enumerate(v for v in g.input if v.name not in inits):
        where = f"graph input '{vi.name}'"
        kind, dt, shape = value_type(vi, where)
        if dt is None:
            if k >= len(fallback):
                dtypes.from_onnx(0, where)  # raises: an input must declare its element type
            kind, dt = ctx.value_type(vi.name) or (fallback[k].kind, fallback[k].dtype)
        ctx.input(vi.name, dt, shape, kind)
    for d in extra:
        ctx.input(d.name, d.dtype, d.shape, d.kind)
    _check_single_writer(g)
    for node in g.node:
        convert_node(table[node.op_type], node, ctx)
    for vi in g.value_info:
        if vi.type.WhichOneof("value") == "sequence_type" and vi.name in ctx.index and ctx.value(vi.name) is None:
            _, dt, _ = value_type(vi, f"value '{vi.name}'")
            desc = ctx.desc(vi.name)
            desc.kind, desc.dtype = "sequence", dt or desc.dtype
    for op in ctx.graph.ops:  # Identity passes a sequence on as a sequence
        if op.type == "Identity" and op.inputs[0] >= 0 and op.outputs[0] >= 0:
            src, dst = ctx.graph.tensors[op.inputs[0]], ctx.graph.tensors[op.outputs[0]]
            if src.kind == "sequence":
                dst.kind, dst.dtype = src.kind, src.dtype
    for vi in g.output:
        if vi.name not in ctx.index:
            raise ModelFormatError(f"graph output '{vi.name}' is not produced by any node")
        t = ctx.index[vi.name]
        desc = ctx.graph.tensors[t]
        if desc.data is None:  # a constant (Constant node, initializer) keeps its data's dtype and shape
            kind, dt, shape = value_type(vi, f"graph output '{vi.name}'")
            if dt is None and ctx.parent is not None:
                kind, dt = ctx.value_type(vi.name) or (kind, None)
            desc.kind, desc.dtype, desc.shape = kind, dt or desc.dtype, shape
        ctx.graph.outputs.append(t)

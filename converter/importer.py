"""ONNX ModelProto -> mnnpy Net: one converter function per ONNX op, canonical forms.

Supported: ONNX default-domain opsets 7 through ``onnx.defs.onnx_opset_version()``.
Before converting anything, every node (subgraphs included) is checked; ops without
a converter raise one ``UnsupportedOperatorError`` listing each type with its count.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from mnnpy import dtypes
from mnnpy.converter.registry import converters
from mnnpy.errors import ModelFormatError, UnsupportedOperatorError
from mnnpy.ir import Graph, Net, Op, TensorDesc

MIN_OPSET = 7


class ConvertContext:
    """State while converting one graph: names -> tensor indices, emitted ops, the opset."""

    def __init__(self, opset: int):
        self.opset = opset
        self.graph = Graph()
        self.index: dict[str, int] = {}
        self._fresh = 0

    # tensors ---------------------------------------------------------------------------
    def tensor(self, name: str, dtype=np.float32, shape=None, data: np.ndarray | None = None) -> int:
        """Index of tensor ``name`` (created on first use)."""
        if name not in self.index:
            self.index[name] = self.graph.add_tensor(TensorDesc(name, np.dtype(dtype), shape, data))
        return self.index[name]

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
        """A node's attributes as Python values (tensors as ndarrays)."""
        out = {}
        for a in node.attribute:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8")
            elif isinstance(v, onnx.TensorProto):
                v = numpy_helper.to_array(v)
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [s.decode("utf-8") for s in v]
            out[a.name] = v
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


def _shape(vi: onnx.ValueInfoProto):
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)


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
        schema = onnx.defs.get_schema(n.op_type, opset)
        unknown = sorted({a.name for a in n.attribute} - set(schema.attributes))
        if unknown:
            label = n.name or (n.output[0] if n.output else n.op_type)
            raise ModelFormatError(
                f"node '{label}' ({n.op_type}): attribute(s) {unknown} are not "
                f"defined by {n.op_type}-{schema.since_version}, the version of opset {opset}"
            )


def import_onnx(model: onnx.ModelProto) -> Net:
    """Convert a ModelProto to a Net (no optimisation passes; see ``optimize``)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise ModelFormatError("ONNX model declares no default-domain opset")
    newest = onnx.defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise ModelFormatError(f"ONNX opset {opset} not supported (supported: {MIN_OPSET}..{newest})")
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
    ctx = ConvertContext(opset)
    g = model.graph
    for init in list(g.initializer):
        arr = numpy_helper.to_array(init)
        if arr.dtype not in (
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
        ):
            raise ModelFormatError(f"initializer '{init.name}': dtype {arr.dtype} is not supported")
        ctx.const(arr, init.name)
    inits = {i.name for i in g.initializer}
    for vi in g.input:
        if vi.name in inits:
            continue
        dt = dtypes.from_onnx(vi.type.tensor_type.elem_type, f"graph input '{vi.name}'")
        ctx.graph.inputs.append(ctx.tensor(vi.name, dt, _shape(vi)))
    for node in g.node:
        table[node.op_type](node, ctx)
    for vi in g.output:
        if vi.name not in ctx.index:
            raise ModelFormatError(f"graph output '{vi.name}' is not produced by any node")
        t = ctx.index[vi.name]
        desc = ctx.graph.tensors[t]
        if desc.data is None:  # a constant (Constant node, initializer) keeps its data's dtype and shape
            if vi.type.tensor_type.elem_type:
                desc.dtype = dtypes.from_onnx(vi.type.tensor_type.elem_type, f"graph output '{vi.name}'")
            desc.shape = _shape(vi)
        ctx.graph.outputs.append(t)
    ctx.graph.name = g.name or "main"
    return Net(graphs=[ctx.graph], metadata={p.key: p.value for p in model.metadata_props})

"""Test helper: a Net back to ONNX (opset 18), fused Conv activations expanded into nodes.

Lets onnxruntime check an optimised graph op-for-op, independent of mnnpy's kernels.
Control-flow bodies become ONNX subgraphs again: a body's captured inputs are dropped from
its ONNX inputs and read by their outer names (outer scope), its other tensors are named
``g<graph index>_<name>``, and an output the body does not compute (an input, a captured
value, a constant, or one given twice) is copied by an ``Identity``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from mnnpy import dtypes
from mnnpy.ir import Graph, Net, Op

OPSET = 18


def _dims(shape):
    return None if shape is None else [d if isinstance(d, int) else (d or None) for d in shape]


def to_onnx(net: Net) -> onnx.ModelProto:
    """``net`` as a ModelProto (canonical mnnpy ops are ONNX opset-18 ops; bodies as subgraphs)."""
    graph = _Renderer(net).graph(0, {})
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)


def _value_info(name: str, desc, typed: bool = True):
    if desc.kind == "sequence":
        return helper.make_tensor_sequence_value_info(name, dtypes.to_onnx(desc.dtype), None)
    if not typed:
        return helper.make_empty_tensor_value_info(name)
    return helper.make_tensor_value_info(name, dtypes.to_onnx(desc.dtype), _dims(desc.shape))


class _Renderer:
    def __init__(self, net: Net):
        self.net = net

    def graph(self, gi: int, outer: dict[int, str]) -> onnx.GraphProto:
        """Graph ``gi`` as a GraphProto; ``outer`` maps its captured input indices to outer names."""
        g = self.net.graphs[gi]
        name = lambda t: "" if t < 0 else outer.get(t) or (g.tensors[t].name if gi == 0 else f"g{gi}_{g.tensors[t].name}")
        inits = [numpy_helper.from_array(np.asarray(d.data), name(t)) for t, d in enumerate(g.tensors) if d.data is not None]
        nodes = []
        for op in g.ops:
            nodes += self.node(g, op, name, inits)
        produced = {t for op in g.ops for t in op.outputs}
        outs, seen = [], set()
        for t in g.outputs:
            if gi and (t not in produced or t in seen):
                copy = f"{name(t)}__out{len(outs)}"
                nodes.append(helper.make_node("Identity", [name(t)], [copy]))
                outs.append(_value_info(copy, g.tensors[t], typed=False))
            else:
                outs.append(_value_info(name(t), g.tensors[t], typed=gi == 0))
            seen.add(t)
        ins = [_value_info(name(t), g.tensors[t]) for t in g.inputs if t not in outer]
        return helper.make_graph(nodes, g.name, ins, outs, inits)

    def node(self, g: Graph, op: Op, name, inits: list) -> list[onnx.NodeProto]:
        if op.type == "Swish" and op.attrs.get("alpha", 1.0) == 1.0:  # opset-24 op: as Sigmoid and Mul
            x, y = name(op.inputs[0]), name(op.outputs[0])
            return [helper.make_node("Sigmoid", [x], [y + "__sig"]), helper.make_node("Mul", [x, y + "__sig"], [y])]
        if op.type == "HardSwish":
            a = op.attrs
            return _hardswish(name(op.inputs[0]), name(op.outputs[0]), a.get("scale", 1.0), a.get("shift", 0.0), inits)
        skip = ("activation", "activation_params", "captures")
        attrs = {k: v for k, v in op.attrs.items() if k not in skip and not (isinstance(v, list) and not v)}
        attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in attrs.items()}
        ins = [name(t) for t in op.inputs]
        if op.type in ("If", "Loop", "Scan"):
            ins, attrs = self.control_flow(op, ins, attrs)
        outs = [name(t) for t in op.outputs]
        act = op.attrs.get("activation", "")
        if act:
            final, outs = outs[0], [outs[0] + "__preact"]
        nodes = [helper.make_node(op.type, ins, outs, name=op.name, **attrs)]
        if act:
            p = list(op.attrs.get("activation_params", []))
            extra, a_ins = {}, [outs[0]]
            if act == "Clip":
                for k, v in zip(("lo", "hi"), p):
                    inits.append(numpy_helper.from_array(np.array(v, np.float32), f"{final}__{k}"))
                    a_ins.append(f"{final}__{k}")
            elif act == "HardSigmoid":
                extra = {"alpha": p[0], "beta": p[1]}
            elif act == "LeakyRelu":
                extra = {"alpha": p[0]}
            elif act == "HardSwish":
                return nodes + _hardswish(outs[0], final, *p, inits)
            nodes.append(helper.make_node(act, a_ins, [final], **extra))
        return nodes

    def control_flow(self, op: Op, ins: list[str], attrs: dict) -> tuple[list[str], dict]:
        """The ONNX node inputs (captured ones dropped) and attributes (bodies as GraphProtos)."""
        k = len(ins) - 1 if op.type == "If" else op.attrs.get("captures", 0)
        captured = ins[len(ins) - k :]
        for key, ref in [(a, v) for a, v in op.attrs.items() if hasattr(v, "index") and not isinstance(v, list)]:
            body = self.net.graphs[ref.index]
            outer = dict(zip(body.inputs[len(body.inputs) - k :], captured))
            attrs[key] = self.graph(ref.index, outer)
        if op.type == "Scan":  # empty lists were dropped with the other empty attributes
            attrs.update({a: op.attrs[a] for a in op.attrs if a.startswith("scan_") and op.attrs[a]})
        return ins[: len(ins) - k], attrs


def _hardswish(x: str, y: str, scale: float, shift: float, inits: list) -> list[onnx.NodeProto]:
    """mnnpy's ``HardSwish`` with ``scale``/``shift`` as ONNX nodes: HardSwish, then Mul, Add."""
    h = y + "__hs"
    inits.append(numpy_helper.from_array(np.array(scale, np.float32), h + "_scale"))
    inits.append(numpy_helper.from_array(np.array(shift, np.float32), h + "_shift"))
    return [
        helper.make_node("HardSwish", [x], [h]),
        helper.make_node("Mul", [h, h + "_scale"], [h + "_scaled"]),
        helper.make_node("Add", [h + "_scaled", h + "_shift"], [y]),
    ]

"""Test helper: a Net back to ONNX (opset 18), fused Conv activations expanded into nodes.

Lets onnxruntime check an optimised graph op-for-op, independent of mnnpy's kernels.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from mnnpy import dtypes
from mnnpy.ir import Net

OPSET = 18


def _dims(shape):
    return None if shape is None else [d if isinstance(d, int) else (d or None) for d in shape]


def to_onnx(net: Net) -> onnx.ModelProto:
    """The main graph of ``net`` as a ModelProto (canonical mnnpy ops are ONNX opset-18 ops)."""
    g = net.main
    name = lambda t: g.tensors[t].name if t >= 0 else ""
    inits = [numpy_helper.from_array(np.asarray(d.data), d.name) for d in g.tensors if d.data is not None]
    nodes = []
    for op in g.ops:
        if op.type == "Swish" and op.attrs.get("alpha", 1.0) == 1.0:  # opset-24 op: as Sigmoid and Mul
            x, y = name(op.inputs[0]), name(op.outputs[0])
            nodes += [helper.make_node("Sigmoid", [x], [y + "__sig"]), helper.make_node("Mul", [x, y + "__sig"], [y])]
            continue
        attrs = {k: v for k, v in op.attrs.items() if k not in ("activation", "activation_params") and v != []}
        outs = [name(t) for t in op.outputs]
        act = op.attrs.get("activation", "")
        if act:
            final, outs = outs[0], [outs[0] + "__preact"]
        nodes.append(helper.make_node(op.type, [name(t) for t in op.inputs], outs, name=op.name, **attrs))
        if act:
            p = list(op.attrs.get("activation_params", []))
            extra, ins = {}, [outs[0]]
            if act == "Clip":
                for k, v in zip(("lo", "hi"), p):
                    inits.append(numpy_helper.from_array(np.array(v, np.float32), f"{final}__{k}"))
                    ins.append(f"{final}__{k}")
            elif act == "HardSigmoid":
                extra = {"alpha": p[0], "beta": p[1]}
            elif act == "LeakyRelu":
                extra = {"alpha": p[0]}
            nodes.append(helper.make_node(act, ins, [final], **extra))
    io = lambda t: helper.make_tensor_value_info(g.tensors[t].name, dtypes.to_onnx(g.tensors[t].dtype), _dims(g.tensors[t].shape))
    graph = helper.make_graph(nodes, g.name, [io(t) for t in g.inputs], [io(t) for t in g.outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=9)

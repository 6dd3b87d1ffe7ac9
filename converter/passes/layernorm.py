"""Recognise layer normalisation and swish written with elementwise ops; replace each by one op.

LayerNormalization (ONNX operators.md #LayerNormalization), as exporters write it::

    m = ReduceMean(x, axes)            d = Sub(x, m)          v = ReduceMean(Pow(d, 2), axes)
    n = Div(d, Sqrt(Add(v, eps)))      y = Add(Mul(n, gamma), beta)      (Mul, Add optional)

with ``axes`` the last k axes given as negative numbers (-k..-1), keepdims, and every
intermediate read only inside the pattern; becomes ``LayerNormalization(x, gamma, beta,
axis=-k, epsilon=eps)``. Swish: ``x * Sigmoid(x)`` becomes ``Swish(x)`` (opset-24 op).
"""

from __future__ import annotations

import numpy as np

from mnnpy.ir import Graph

from .common import GraphView, scalar


def _only_read_by(v: GraphView, t: int, ops: list) -> bool:
    """Whether every reader of intermediate ``t`` is one of ``ops`` (and ``t`` is not an output)."""
    if t in v.outputs or t in v.inputs or v.g.tensors[t].name in v.keep_names:
        return False
    readers = {id(v.g.ops[i]) for i in v.consumers.get(t, ())}
    return readers <= {id(op) for op in ops}


def _reduce_axes(v: GraphView, op) -> tuple[int, ...] | None:
    """The negative axes -k..-1 of a keepdims ReduceMean, else ``None``."""
    if op is None or op.type != "ReduceMean" or op.attrs.get("keepdims", 1) != 1 or len(op.inputs) < 2:
        return None
    axes = v.const(op.inputs[1])
    if axes is None or axes.size == 0:
        return None
    axes = tuple(sorted(int(a) for a in axes.reshape(-1)))
    return axes if axes == tuple(range(-len(axes), 0)) else None


def _operand(v: GraphView, op, type_: str, other: int):
    """``op``'s operand other than tensor ``other`` when ``op`` is a binary ``type_`` reading it."""
    if op is None or op.type != type_ or len(op.inputs) != 2 or other not in op.inputs:
        return None
    return op.inputs[1 - op.inputs.index(other)]


def _reader(v: GraphView, t: int, type_: str):
    """The single op of ``type_`` reading ``t``, or ``None``."""
    readers = [v.g.ops[i] for i in v.consumers.get(t, ())]
    return readers[0] if len(readers) == 1 and readers[0].type == type_ else None


def _layernorm_at(v: GraphView, mean_op) -> bool:
    axes = _reduce_axes(v, mean_op)
    if axes is None:
        return False
    x, m = mean_op.inputs[0], mean_op.outputs[0]
    sub = _reader(v, m, "Sub")
    if sub is None or sub.inputs != [x, m]:
        return False
    d = sub.outputs[0]
    readers = [v.g.ops[i] for i in v.consumers.get(d, ())]
    pow_ = next((r for r in readers if r.type == "Pow" and r.inputs[0] == d and scalar(v.const(r.inputs[1])) == 2.0), None)
    div = next((r for r in readers if r.type == "Div" and r.inputs[0] == d), None)
    if pow_ is None or div is None or len(readers) != 2:
        return False
    var_op = _reader(v, pow_.outputs[0], "ReduceMean")
    if _reduce_axes(v, var_op) != axes:
        return False
    add = _reader(v, var_op.outputs[0], "Add")
    eps_t = _operand(v, add, "Add", var_op.outputs[0])
    eps = scalar(v.const(eps_t)) if eps_t is not None else None
    sqrt = _reader(v, add.outputs[0], "Sqrt") if add is not None else None
    if eps is None or sqrt is None or div.inputs[1] != sqrt.outputs[0]:
        return False
    pattern = [mean_op, sub, pow_, var_op, add, sqrt, div]
    last, gamma, beta = div, None, None
    mul = _reader(v, div.outputs[0], "Mul")
    g = _operand(v, mul, "Mul", div.outputs[0]) if mul is not None else None
    if g is not None and v.const(g) is not None and v.const(g).ndim <= len(axes):
        last, gamma = mul, g
        pattern.append(mul)
        add_b = _reader(v, mul.outputs[0], "Add")
        b = _operand(v, add_b, "Add", mul.outputs[0]) if add_b is not None else None
        if b is not None and v.const(b) is not None and v.const(b).ndim <= len(axes):
            last, beta = add_b, b
            pattern.append(add_b)
    inner = [op.outputs[0] for op in pattern if op is not last]
    if not all(_only_read_by(v, t, pattern) for t in inner):
        return False
    dtype = v.g.tensors[x].dtype
    if gamma is None:
        gamma = v.add_const(np.array(1, dtype), "layernorm_scale")
    out = last.outputs[0]
    for op in pattern:
        if op is not last:
            v.kill(op)
    last.type, last.name = "LayerNormalization", last.name
    last.inputs = [x, gamma] + ([beta] if beta is not None else [])
    last.outputs = [out]
    last.attrs = {"axis": -len(axes), "epsilon": eps}
    v.refresh()
    return True


def fuse_layernorm(graph: Graph, keep_names=frozenset()) -> int:
    """Replace each layer-normalisation pattern (module docstring); returns how many."""
    v = GraphView(graph, keep_names)
    count = sum(_layernorm_at(v, op) for op in list(graph.ops) if op.type == "ReduceMean")
    v.finish()
    return count


def fuse_swish(graph: Graph, keep_names=frozenset()) -> int:
    """Replace ``x * Sigmoid(x)`` (either operand order) by ``Swish(x)``; returns how many."""
    v = GraphView(graph, keep_names)
    count = 0
    for op in list(graph.ops):
        if op.type != "Mul" or len(op.inputs) != 2:
            continue
        for k in (0, 1):
            sig = v.producer(op.inputs[k])
            if sig is not None and sig.type == "Sigmoid" and sig.inputs[0] == op.inputs[1 - k] and v.private(op.inputs[k]):
                x = sig.inputs[0]
                v.kill(sig)
                op.type, op.inputs, op.attrs = "Swish", [x], {"alpha": 1.0}
                v.refresh()
                count += 1
                break
    v.finish()
    return count

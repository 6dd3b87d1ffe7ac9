"""No-op removal and dead-code elimination.

``remove_noops``: ``Identity(x)``, and ``x * 1``, ``1 * x``, ``x / 1``, ``x + 0``, ``0 + x``,
``x - 0`` with a one-element constant whose rank cannot grow ``x``'s (checked with a
lower bound on ``x``'s rank), are dropped and their readers read ``x``. When the no-op
writes a graph output, ``x``'s producer writes that output instead (names seen by
users never change); when that is impossible (``x`` is a graph input, a constant or
another graph output) the op stays.

``eliminate_dead_code``: ops whose outputs nobody reads (and that are not graph
outputs) are removed, then every tensor that no op, graph input or output refers to
is dropped and the rest renumbered.
"""

from __future__ import annotations

from mnnpy.ir import Graph
from mnnpy.ops import get_schema

from .common import GraphView

_NEUTRAL = {"Mul": (1.0, (0, 1)), "Div": (1.0, (0,)), "Add": (0.0, (0, 1)), "Sub": (0.0, (0,))}


def rank_lower_bounds(graph: Graph) -> dict[int, int]:
    """A lower bound on each tensor's rank (0 when nothing is known): declared shapes, then
    each op's output 0 from its inputs (``OpSchema.same_rank``; MatMul, constant Reshape)."""
    lb: dict[int, int] = {}
    for t, d in enumerate(graph.tensors):
        if d.data is not None:
            lb[t] = d.data.ndim
        elif d.shape is not None:
            lb[t] = len(d.shape)
    for op in graph.ops:
        ins = [lb.get(t, 0) if t >= 0 else 0 for t in op.inputs]
        same = get_schema(op.type).rank_inputs(len(op.inputs))  # output 0 has these inputs' rank
        if same:
            r = max(ins[k] for k in same)
        elif op.type == "MatMul" and len(ins) == 2:
            r = max(max(ins) - 1, 0)
        elif op.type == "Reshape" and len(op.inputs) > 1 and graph.tensors[op.inputs[1]].data is not None:
            r = int(graph.tensors[op.inputs[1]].data.size)
        else:
            r = 0
        if op.outputs and op.outputs[0] >= 0:
            lb[op.outputs[0]] = max(lb.get(op.outputs[0], 0), r)
    return lb


def _noop_source(v: GraphView, op, lb: dict[int, int]) -> int | None:
    """The tensor a no-op ``op`` passes through unchanged, else ``None``."""
    if op.type == "Identity" and len(op.inputs) == 1:
        return op.inputs[0]
    if op.type not in _NEUTRAL or len(op.inputs) != 2:
        return None
    neutral, positions = _NEUTRAL[op.type]
    for k in positions:
        x, c = op.inputs[k], v.const(op.inputs[1 - k])
        if c is None or c.size != 1 or c.ndim > lb.get(x, 0) or c.dtype.kind not in "fiu":
            continue
        if v.g.tensors[x].data is None and float(c.reshape(())) == neutral:
            return x
    return None


def remove_noops(graph: Graph, keep_names=frozenset()) -> int:
    """Drop Identity and arithmetic no-ops (see module docstring); returns how many."""
    v = GraphView(graph, keep_names)
    lb = rank_lower_bounds(graph)
    for op in list(graph.ops):
        x = _noop_source(v, op, lb)
        if x is None or x < 0 or not op.outputs or op.outputs[0] < 0:
            continue
        y = op.outputs[0]
        if graph.tensors[y].name in keep_names:
            continue
        if y not in v.outputs:
            _redirect(graph, y, x)
        else:
            p = v.producer(x)
            if p is None or x in v.outputs or x in v.inputs or graph.tensors[x].name in keep_names:
                continue
            p.outputs = [y if t == x else t for t in p.outputs]
            _redirect(graph, x, y)
        v.kill(op)
    return v.finish()


def _redirect(graph: Graph, old: int, new: int) -> None:
    """Every op reading ``old`` reads ``new`` instead."""
    for op in graph.ops:
        if old in op.inputs:
            op.inputs = [new if t == old else t for t in op.inputs]


def eliminate_dead_code(graph: Graph, keep_names=frozenset()) -> int:
    """Remove unread ops and unreferenced tensors (renumbering the rest); returns ops removed."""
    live = set(graph.outputs) | {t for t, d in enumerate(graph.tensors) if d.name in keep_names}
    kept = []
    for op in reversed(graph.ops):
        if any(t >= 0 and t in live for t in op.outputs):
            kept.append(op)
            live.update(t for t in op.inputs if t >= 0)
    removed = len(graph.ops) - len(kept)
    graph.ops = kept[::-1]
    used = set(graph.inputs) | set(graph.outputs) | {t for t, d in enumerate(graph.tensors) if d.name in keep_names}
    for op in graph.ops:
        used.update(t for t in op.inputs + op.outputs if t >= 0)
    order = sorted(used)
    new_index = {t: i for i, t in enumerate(order)}
    graph.tensors = [graph.tensors[t] for t in order]
    for op in graph.ops:
        op.inputs = [new_index[t] if t >= 0 else -1 for t in op.inputs]
        op.outputs = [new_index[t] if t >= 0 else -1 for t in op.outputs]
    graph.inputs = [new_index[t] for t in graph.inputs]
    graph.outputs = [new_index[t] for t in graph.outputs]
    return removed

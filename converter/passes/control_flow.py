"""Passes over control-flow ops and their bodies (``mnnpy/ops/control_flow.py`` has the forms).

- ``fold_constant_ifs``: an ``If`` whose ``cond`` is a constant is replaced by the ops of the
  branch it takes, inlined into its graph: the branch's inputs become the If's captured
  inputs, its outputs the If's output tensors (an output the branch does not compute, a
  pass-through input or a constant, is copied there by an ``Identity``), its other tensors
  new tensors named ``<If name>/<name>`` (unique in the graph). Bodies nested in the branch
  stay where they are, now referenced from this graph.
- ``capture_constants``: a captured input that is a constant of the op's graph (after
  folding) is copied into the bodies as a constant, so that folding continues inside them;
  the op loses that input (Loop/Scan: ``captures`` one less).
- ``drop_unused_captures``: a captured input that no body reads (nor gives as an output) is
  removed from the op and its bodies.
- ``prune_graphs``: graphs no op references any more (the branches of folded Ifs) are removed
  and the ``GraphRef`` attributes renumbered.
- ``graph_order``: every graph reachable from the main one, each before its bodies.
"""

from __future__ import annotations

from mnnpy.ir import Graph, GraphRef, Net, Op, TensorDesc
from mnnpy.ops.control_flow import CONTROL_FLOW, body_refs


def children(graph: Graph) -> list[int]:
    """Indices of the bodies the ops of ``graph`` reference, in op order."""
    return [i for op in graph.ops for _, i in body_refs(op)]


def graph_order(net: Net) -> list[int]:
    """Indices of the graphs reachable from the main graph, each before the bodies it references."""
    order, seen, k = [0], {0}, 0
    while k < len(order):
        for i in children(net.graphs[order[k]]):
            if i not in seen:
                seen.add(i)
                order.append(i)
        k += 1
    return order


# ------------------------------------------------------------------- constant If
def fold_constant_ifs(net: Net, graph: Graph) -> int:
    """Inline the taken branch of every If of ``graph`` whose ``cond`` is a one-element constant;
    returns how many were folded."""
    ops, count = [], 0
    for op in graph.ops:
        c = graph.tensors[op.inputs[0]].data if op.type == "If" and op.inputs and op.inputs[0] >= 0 else None
        if c is None or c.size != 1:
            ops.append(op)
            continue
        taken = op.attrs["then_branch" if bool(c.reshape(())) else "else_branch"]
        ops += _inline(graph, net.graphs[taken.index], op)
        count += 1
    graph.ops = ops
    return count


def _inline(graph: Graph, branch: Graph, op: Op) -> list[Op]:
    """The ops of ``branch`` rewritten into ``graph`` in place of If ``op`` (module docstring)."""
    names = {t.name for t in graph.tensors}

    def unique(name: str) -> str:
        out, k = f"{op.name}/{name}", 0
        while out in names:
            k += 1
            out = f"{op.name}/{name}_{k}"
        names.add(out)
        return out

    to: dict[int, int] = dict(zip(branch.inputs, op.inputs[1:]))
    produced = {t for o in branch.ops for t in o.outputs if t >= 0}
    copies = []
    for t, dst in zip(branch.outputs, op.outputs):
        if dst < 0:
            continue
        src, out = branch.tensors[t], graph.tensors[dst]
        out.dtype, out.kind, out.shape = src.dtype, src.kind, out.shape if out.shape is not None else src.shape
        if t in produced and t not in to:
            to[t] = dst
        else:
            copies.append((t, dst))
    for t, d in enumerate(branch.tensors):
        if t not in to:
            to[t] = graph.add_tensor(TensorDesc(unique(d.name), d.dtype, d.shape, d.data, d.kind))
    moved = lambda ts: [to[t] if t >= 0 else -1 for t in ts]
    new = [Op(o.type, f"{op.name}/{o.name}", moved(o.inputs), moved(o.outputs), dict(o.attrs)) for o in branch.ops]
    return new + [Op("Identity", f"{op.name}/{graph.tensors[dst].name}", [to[t]], [dst], {}) for t, dst in copies]


# --------------------------------------------------------------------- captures
def _captured(net: Net, op: Op) -> tuple[int, int, list[Graph]]:
    """``(K, offset, bodies)``: op input ``len(op.inputs) - K + j`` is body input ``len(body.inputs) - K + j``
    of each body, for the K captured values."""
    bodies = [net.graphs[i] for _, i in body_refs(op)]
    k = len(op.inputs) - 1 if op.type == "If" else op.attrs.get("captures", 0)
    return k, len(op.inputs) - k, bodies


def _remove_capture(op: Op, bodies: list[Graph], j: int, k: int) -> None:
    """Remove captured value ``j`` of ``k`` from ``op`` and its ``bodies``."""
    del op.inputs[len(op.inputs) - k + j]
    for b in bodies:
        del b.inputs[len(b.inputs) - k + j]
    if op.type != "If":
        op.attrs["captures"] = k - 1
        if op.resolved is not None:
            op.resolved["captures"] = k - 1


def capture_constants(net: Net, graph: Graph) -> int:
    """Copy captured constants of ``graph``'s control-flow ops into their bodies; returns how many."""
    count = 0
    for op in graph.ops:
        if op.type not in CONTROL_FLOW:
            continue
        k, first, bodies = _captured(net, op)
        for j in reversed(range(k)):
            data = graph.tensors[op.inputs[first + j]].data
            if data is None:
                continue
            for b in bodies:
                d = b.tensors[b.inputs[len(b.inputs) - k + j]]
                d.data, d.dtype, d.shape, d.kind = data, data.dtype, tuple(data.shape), "tensor"
            _remove_capture(op, bodies, j, k)
            k -= 1
            count += 1
    return count


def drop_unused_captures(net: Net, graph: Graph) -> int:
    """Remove the captured inputs of ``graph``'s control-flow ops that no body uses; returns how many.

    The bodies keep the tensors (dead-code elimination drops them)."""
    count = 0
    for op in graph.ops:
        if op.type not in CONTROL_FLOW:
            continue
        k, _, bodies = _captured(net, op)
        read = [{t for o in b.ops for t in o.inputs} | set(b.outputs) for b in bodies]
        for j in reversed(range(k)):
            if all(b.inputs[len(b.inputs) - k + j] not in r for b, r in zip(bodies, read)):
                _remove_capture(op, bodies, j, k)
                k -= 1
                count += 1
    return count


# ------------------------------------------------------------------------ graphs
def prune_graphs(net: Net) -> int:
    """Remove the graphs not reachable from the main graph, renumbering ``GraphRef`` attributes
    (in ``attrs`` and, where set, ``resolved``); returns how many were removed."""
    order = graph_order(net)
    kept = sorted(order)
    if len(kept) == len(net.graphs):
        return 0
    new = {old: i for i, old in enumerate(kept)}
    for gi in kept:
        for op in net.graphs[gi].ops:
            for attrs in (op.attrs, op.resolved or {}):
                for key, v in attrs.items():
                    if isinstance(v, GraphRef):
                        attrs[key] = GraphRef(new[v.index])
    removed = len(net.graphs) - len(kept)
    net.graphs = [net.graphs[i] for i in kept]
    return removed

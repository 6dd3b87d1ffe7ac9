"""A graph runner's schedule as text and as Graphviz: every segment's partitions, the ops run
on the host (control flow, sequence ops) and, nested under each control-flow op, its bodies'
schedules once they ran (``Session.partitions``, ``Session.dot``, ``mnnpy info``)."""

from __future__ import annotations

from mnnpy.schedule import BACKEND_COLORS, merge_schedules, quote_dot
from mnnpy.schedule import to_dot as schedule_dot

HOST_COLOR = "#ffffff"


def _graph_attrs(op) -> list[str]:
    """Names of ``op``'s graph attributes (its bodies), in a stable order."""
    return sorted(k for k, v in (op.resolved or op.attrs).items() if hasattr(v, "index"))


def describe(runner, plans: list) -> str:
    """``plans`` (segments of ``runner``, or one described segment) as text: the merged
    Schedule's listing, each host op with its bodies, and where scheduling continues at run
    time."""
    g = runner.graph
    lines = [merge_schedules([p.schedule for p in plans]).describe(g)]
    for p in plans:
        if p.sizes.dynamic is not None:
            lines += _host_lines(runner, p.sizes.dynamic)
    last = plans[-1].sizes
    if last.barrier is not None and last.barrier < len(g.ops):
        if last.dynamic is not None:
            op = g.ops[last.dynamic]
            lines.append(f"ops after {op.type} '{op.name}' are scheduled at run time (they follow what it computes)")
        else:
            op = g.ops[last.barrier]
            lines.append(f"ops from {op.type} '{op.name}' on are scheduled at run time (their shapes depend on computed values)")
    return "\n".join(lines)


def _host_lines(runner, i: int, indent: str = "") -> list[str]:
    op = runner.graph.ops[i]
    lines = [f"{indent}on the host: {op.type} '{op.name}'"]
    for attr in _graph_attrs(op):
        body = runner.bodies().get((i, attr))
        plans = (body.segments or ([body.plan] if body.plan is not None else [])) if body is not None else []
        if not plans:
            lines.append(f"{indent}  {attr}: not run yet")
            continue
        lines.append(f"{indent}  {attr}:")
        lines += [f"{indent}    {line}" for line in describe(body, plans).splitlines()]
    return lines


def to_dot(runner, plans: list) -> str:
    """Graphviz (dot) text of ``plans``: the merged Schedule's graph (ops coloured by
    backend, copies dashed, fallback reasons as tooltips), each host op as a diamond with
    edges from and to the ops around it, and each body that ran as a cluster of its ops."""
    g = runner.graph
    merged = merge_schedules([p.schedule for p in plans])
    lines = schedule_dot(merged, g).rstrip().removesuffix("}").rstrip().splitlines()
    producer = {t: i for i in merged.backend_of for t in g.ops[i].outputs if t >= 0}
    hosts = [p.sizes.dynamic for p in plans if p.sizes.dynamic is not None]
    producer.update({t: i for i in hosts for t in g.ops[i].outputs if t >= 0})
    for i in hosts:
        op = g.ops[i]
        label = quote_dot("\n".join((op.type, op.name, "on the host")))
        lines.append(f"  op{i} [label={label}, shape=diamond, fillcolor={quote_dot(HOST_COLOR)}];")
        lines += [f"  op{producer[t]} -> op{i};" for t in op.inputs if t in producer]
        readers = [j for j in merged.backend_of if any(t in op.outputs for t in g.ops[j].inputs if t >= 0)]
        lines += [f"  op{i} -> op{j};" for j in readers]
        lines += _body_clusters(runner, i, f"op{i}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _body_clusters(runner, i: int, anchor: str) -> list[str]:
    """One cluster per body of op ``i`` that ran: its ops, coloured by backend."""
    lines = []
    for attr in _graph_attrs(runner.graph.ops[i]):
        body = runner.bodies().get((i, attr))
        plans = (body.segments or ([body.plan] if body.plan is not None else [])) if body is not None else []
        if not plans:
            continue
        merged = merge_schedules([p.schedule for p in plans])
        prefix = f"{anchor}_{attr}"
        lines.append(f"  subgraph cluster_{prefix} {{ label={quote_dot(attr)}; style=dashed;")
        for j in merged.backend_of:
            bop, backend = body.graph.ops[j], merged.backend_names[merged.backend_of[j]]
            color = quote_dot(BACKEND_COLORS.get(backend, HOST_COLOR))
            label = quote_dot("\n".join((bop.type, bop.name)))
            lines.append(f"    {prefix}_{j} [label={label}, fillcolor={color}];")
        hosts = [p.sizes.dynamic for p in plans if p.sizes.dynamic is not None]
        for j in hosts:  # a control-flow op inside the body: its node, and its bodies nested
            bop = body.graph.ops[j]
            label = quote_dot("\n".join((bop.type, bop.name, "on the host")))
            lines.append(f"    {prefix}_{j} [label={label}, shape=diamond, fillcolor={quote_dot(HOST_COLOR)}];")
        lines.append("  }")
        for j in hosts:
            lines += _body_clusters(body, j, f"{prefix}_{j}")
        first = next(iter(merged.backend_of), hosts[0] if hosts else None)
        if first is not None:
            lines.append(f"  {anchor} -> {prefix}_{first} [style=dotted, label={quote_dot(attr)}];")
    return lines


def op_mflops(runner, prefix: str = "") -> list[tuple[str, str, float]]:
    """``Session.op_mflops`` of one runner's last plans, bodies nested under their op."""
    plans = runner.segments or ([runner.plan] if runner.plan is not None else [])
    ops, out = runner.graph.ops, []
    for p in plans:
        out += [(prefix + ops[i].name, ops[i].type, p.sizes.mflops[i]) for i in p.sizes.runtime_ops]
        if p.sizes.dynamic is not None:
            i = p.sizes.dynamic
            for (j, attr), body in runner.bodies().items():
                if j == i:
                    out += op_mflops(body, f"{prefix}{ops[i].name}/{attr}/")
    return out

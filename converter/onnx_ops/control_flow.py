"""If, Loop, Scan -> the canonical forms of ``mnnpy/ops/control_flow.py``, bodies as further graphs.

Version history (ONNX Changelog.md): If 1, 11, 13, 16, 19, 21, 23, 24, 25; Loop the same;
Scan 8, 9, 11, 16, 19, 21, 23, 24, 25. After If-1/Loop-1 and Scan-9 only the types the
values may have changed (sequences, optionals, new dtypes; If-11 let the branches' shapes
differ), so one function converts each op from opset 9 (Scan) or 1 on.

Each body's free names (read, not defined inside, through nested bodies too) are the op's
captured values (``ConvertContext.captures``); an If's two branches both take the union.

Scan-8 (a leading batch axis on every state, scan input and output, and an optional
``sequence_lens``) has no direct canonical form. Without ``sequence_lens`` it is exactly
a Loop over the batch items whose body runs opset 9's Scan on item ``b`` (``Gather`` at
``iteration_num``) and gives the final states and scan outputs as the Loop's scan outputs,
stacked on axis 0: the batch axis. With ``sequence_lens`` (items of different lengths, the
outputs of shorter items padded) it is refused with ``UnsupportedOperatorError``.
"""

from __future__ import annotations

import numpy as np
import onnx

from mnnpy.converter.importer import free_names, label
from mnnpy.converter.registry import onnx_op
from mnnpy.errors import ModelFormatError, UnsupportedOperatorError
from mnnpy.ir import TensorDesc

I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def _required(node, a: dict, graphs: tuple[str, ...] = (), ints: tuple[str, ...] = (), inputs: int = 0) -> None:
    """The node has its required graph attributes (GraphProtos), int attributes and at least
    ``inputs`` inputs; else ``ModelFormatError`` naming the node and what is missing."""
    where = f"node '{label(node)}' ({node.op_type})"
    for k in graphs:
        if not isinstance(a.get(k), onnx.GraphProto):
            raise ModelFormatError(f"{where}: attribute '{k}' must be a graph, got {type(a.get(k)).__name__}")
    for k in ints:
        if isinstance(a.get(k), bool) or not isinstance(a.get(k), int):
            raise ModelFormatError(f"{where}: attribute '{k}' must be an int, got {type(a.get(k)).__name__}")
    if len(node.input) < inputs or (inputs and not node.input[0]):
        raise ModelFormatError(f"{where}: needs its first {inputs} input(s), got {list(node.input)}")


def _outputs(node, ctx, count: int) -> list[str]:
    """The node's output names, padded with fresh names to the ``count`` its body gives."""
    names = list(node.output)
    if len(names) > count:
        raise ModelFormatError(f"node '{label(node)}' ({node.op_type}): {len(names)} outputs, but its body gives {count}")
    return names + [ctx.fresh(f"{label(node)}_unused") for _ in range(count - len(names))]


@onnx_op("If")
def if_(node, ctx):
    """If(cond) -> If(cond, captured...) with both branches taking the captured values."""
    a, name = ctx.attrs(node), label(node)
    _required(node, a, graphs=("then_branch", "else_branch"), inputs=1)
    branches = {k: a[k] for k in ("then_branch", "else_branch")}
    captured = ctx.captures(*branches.values())
    refs = {k: ctx.body(g, f"{name}.{k}", captured) for k, g in branches.items()}
    for k, ref in refs.items():
        n = len(ctx.graphs[ref.index].outputs)
        if n != len(node.output):
            raise ModelFormatError(f"node '{name}' (If): {k} gives {n} outputs, the node has {len(node.output)}")
    ctx.emit("If", [node.input[0], *captured], list(node.output), refs, name)
    ctx.type_from_body(list(node.output), refs["then_branch"], range(len(node.output)))


@onnx_op("Loop")
def loop(node, ctx):
    """Loop(M, cond, v_initial...) -> Loop(M, cond, v_initial..., captured...; captures=K)."""
    a, name = ctx.attrs(node), label(node)
    _required(node, a, graphs=("body",))
    ins = list(node.input) + [""] * max(0, 2 - len(node.input))
    carried = ins[2:]
    captured = ctx.captures(a["body"])
    fallback = [TensorDesc("iteration_num", I64), TensorDesc("cond", BOOL)] + [ctx.typed(n) for n in carried]
    ref = ctx.body(a["body"], f"{name}.body", captured, fallback)
    g = ctx.graphs[ref.index]
    n, k = len(carried), len(captured)
    if len(g.inputs) != 2 + n + k or len(g.outputs) < 1 + n:
        raise ModelFormatError(
            f"node '{name}' (Loop): its body takes {len(g.inputs) - k} inputs and gives {len(g.outputs)} outputs; "
            f"with {n} carried values it must take {2 + n} (iteration_num, cond, carried...) and give at least {1 + n}"
        )
    outputs = _outputs(node, ctx, len(g.outputs) - 1)
    if not outputs:
        return  # nothing leaves the loop: it has no effect
    ctx.emit("Loop", ins[:2] + carried + captured, outputs, {"body": ref, "captures": k}, name)
    ctx.type_from_body(outputs, ref, range(1, len(g.outputs)))


def _filled(a: dict, key: str, count: int, name: str) -> list[int]:
    """Attribute ``key`` as a list of ``count`` ints (absent: zeros, the default)."""
    value = [int(v) for v in a.get(key, [0] * count)]
    if len(value) != count:
        raise ModelFormatError(f"node '{name}' (Scan): {key} has {len(value)} entries, expected {count}")
    return value


@onnx_op("Scan")
def scan(node, ctx):
    """Scan-9+ -> Scan(states..., scan inputs..., captured...) with every list attribute filled;
    Scan-8 -> a Loop over the batch (module docstring)."""
    if ctx.opset < 9:
        return _scan8(node, ctx)
    a, name = ctx.attrs(node), label(node)
    _required(node, a, graphs=("body",), ints=("num_scan_inputs",))
    m = a["num_scan_inputs"]
    n = len(node.input) - m
    if m < 1 or n < 0:
        raise ModelFormatError(f"node '{name}' (Scan): num_scan_inputs={m} does not fit {len(node.input)} inputs")
    captured = ctx.captures(a["body"])
    ref = ctx.body(a["body"], f"{name}.body", captured, [ctx.typed(x) for x in node.input])
    outputs = _outputs(node, ctx, _scan_body(name, ctx.graphs[ref.index], n, m, len(captured)))
    attrs = _scan_attrs(a, ref, n, m, len(outputs) - n, len(captured), name)
    ctx.emit("Scan", list(node.input) + captured, outputs, attrs, name)
    ctx.type_from_body(outputs, ref, range(len(outputs)))


def _scan_body(name: str, g, n: int, m: int, k: int) -> int:
    """The number of outputs of Scan body ``g`` after checking its arity (n states, m slices, k captured)."""
    if len(g.inputs) != n + m + k or len(g.outputs) < n:
        raise ModelFormatError(
            f"node '{name}' (Scan): its body takes {len(g.inputs) - k} inputs and gives {len(g.outputs)} outputs; "
            f"with {n} states and {m} scan inputs it must take {n + m} and give at least {n}"
        )
    return len(g.outputs)


def _scan_attrs(a: dict, ref, n: int, m: int, s: int, k: int, name: str, directions=None) -> dict:
    """The canonical Scan attributes (every list filled to its length)."""
    return {
        "body": ref,
        "num_scan_inputs": m,
        "scan_input_axes": _filled(a, "scan_input_axes", m, name),
        "scan_input_directions": directions if directions is not None else _filled(a, "scan_input_directions", m, name),
        "scan_output_axes": _filled(a, "scan_output_axes", s, name),
        "scan_output_directions": _filled(a, "scan_output_directions", s, name),
        "captures": k,
    }


def _scan8(node, ctx) -> None:
    """Scan-8 without ``sequence_lens`` as ``Loop(M=batch) { Scan-9 on item iteration_num }``."""
    a, name = ctx.attrs(node), label(node)
    _required(node, a, graphs=("body",), ints=("num_scan_inputs",))
    if node.input and node.input[0]:
        raise UnsupportedOperatorError(
            {"Scan-8 with sequence_lens": 1},
            where=f"node '{name}' (per-item sequence lengths have no exact form in opset 9's Scan, which has no batch axis)",
        )
    xs, m = list(node.input[1:]), a["num_scan_inputs"]
    n = len(xs) - m
    if m < 1 or n < 0:
        raise ModelFormatError(f"node '{name}' (Scan): num_scan_inputs={m} does not fit {len(xs)} inputs")
    directions = _filled(a, "directions", m, name)
    captured = ctx.captures(a["body"])
    shape, batch = ctx.fresh(f"{name}_shape"), ctx.fresh(f"{name}_batch")
    ctx.emit("Shape", [xs[0]], [shape], {}, shape)
    ctx.emit("Gather", [shape, ctx.const(np.array(0, np.int64))], [batch], {"axis": 0}, batch)
    outer = list(dict.fromkeys(xs + captured))  # the Loop captures each value once
    lb, loop_ref = ctx.new_body(f"{name}.batch")
    i, c = lb.input(lb.fresh("iteration_num"), I64, ()), lb.input(lb.fresh("cond"), BOOL, ())
    for x in outer:
        d = ctx.typed(x)
        lb.input(x, d.dtype, d.shape, d.kind)
    for x in _constants_read(ctx, a["body"]):
        lb.index[x] = lb.graph.add_tensor(TensorDesc(x, ctx.desc(x).dtype, ctx.desc(x).shape, ctx.value(x)))
    items = []
    for x in xs:
        items.append(lb.fresh(f"{x}_item"))
        lb.emit("Gather", [x, i], [items[-1]], {"axis": 0}, items[-1])
    ref = lb.body(a["body"], f"{name}.body", captured, [ctx.typed(x) for x in xs])
    outs = [lb.fresh(f"{name}_item_out") for _ in range(_scan_body(name, lb.graphs[ref.index], n, m, len(captured)))]
    attrs = _scan_attrs({}, ref, n, m, len(outs) - n, len(captured), name, directions)
    lb.emit("Scan", items + captured, outs, attrs, f"{name}.item")
    lb.type_from_body(outs, ref, range(len(outs)))
    lb.graph.outputs = [lb.index[c]] + [lb.index[o] for o in outs]
    outputs = _outputs(node, ctx, len(outs))
    ctx.emit("Loop", [batch, "", *outer], outputs, {"body": loop_ref, "captures": len(outer)}, name)
    ctx.type_from_body(outputs, loop_ref, range(1, len(outs) + 1))


def _constants_read(ctx, body) -> list[str]:
    """The free names of ``body`` that are constants of ``ctx``'s graph."""
    return [x for x in free_names(body) if ctx.value(x) is not None]

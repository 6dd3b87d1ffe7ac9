"""Control flow (ONNX operators.md #If, #Loop, #Scan; NNAPI's IF and WHILE): schemas and the
arity rules that tie each op to its bodies.

A body is another graph of the same ``Net``, named by a ``GraphRef`` attribute. A body never
reads a tensor of another graph: the values it reads from enclosing graphs ("captured") are
extra trailing inputs of the op and extra trailing graph inputs of the body, in the same
order (the converter finds them; a constant of the enclosing graph is copied into the body
instead). Canonical forms:

- ``If(cond, captured...) -> outputs...``: ``then_branch`` and ``else_branch`` each take the
  captured values as their graph inputs and give as many outputs as the op.
- ``Loop(M, cond, v_initial..., captured...) -> (v_final..., scan_outputs...)``: ``M``
  (int64 scalar trip count) and ``cond`` (bool scalar) may be absent (-1); ``captures`` = K,
  the number of captured values, so N = inputs - 2 - K carried values. ``body`` takes
  ``(iteration_num: int64 scalar, cond_in: bool scalar, carried..., captured...)`` and gives
  ``(cond_out, carried..., scan...)``: S = body outputs - 1 - N scan outputs, each the
  per-iteration values stacked on a new axis 0.
- ``Scan(initial_state..., scan_input..., captured...) -> (final_state..., scan_output...)``
  (the opset-9+ form): ``num_scan_inputs`` = M, ``captures`` = K, N = inputs - M - K states;
  ``body`` takes ``(state..., slice..., captured...)`` and gives ``(state..., scan slice...)``;
  ``scan_input_axes``/``scan_input_directions`` have M entries, ``scan_output_axes``/
  ``scan_output_directions`` S entries (filled with their defaults, 0, by the converter).

These ops are ``dynamic``: their outputs are known only after they ran (the engine runs the
bodies). Their shape functions check what the inputs tell (arity, dtypes, scalar
conditions, axes against known ranks) and return ``(None, dtype)`` per output, ``dtype``
``None`` where only the bodies know it (the op's output ``TensorDesc`` carries the dtype the
converter read from the body). ``check_bodies`` checks an op against its bodies when a file
is loaded (``mnnpy.model_reader``).
"""

from __future__ import annotations

import numpy as np

from mnnpy.errors import ModelFormatError
from mnnpy.ir import GraphRef
from mnnpy.ops.registry import Attr, In, op_schema

CONTROL_FLOW = ("If", "Loop", "Scan")  # op types run by the engine (their bodies), not by a kernel

MAX_NESTING = 32  # bodies inside bodies: the deepest level a model may have (main graph: 0)

I64 = np.dtype(np.int64)
BOOL = np.dtype(np.bool_)


def _bodies_flops(ctx, outs) -> float:
    """none here (the ops of its bodies are counted where they run)"""
    return 0.0


def _scalar_input(ctx, i: int, name: str, dtypes: tuple[np.dtype, ...]) -> None:
    """Input ``i`` (when present): one element, of one of ``dtypes``."""
    if not ctx.has(i):
        return
    if ctx.dtypes[i] is not None and ctx.dtypes[i] not in dtypes:
        ctx.fail(f"'{name}' must be {' or '.join(map(str, dtypes))}, got {ctx.dtypes[i]}")
    shape = ctx.shapes[i]
    if all(isinstance(d, int) for d in shape) and int(np.prod(shape)) != 1:
        ctx.fail(f"'{name}' must have one element, got shape {shape}")


def _dtype(ctx, i: int):
    return ctx.dtypes[i] if i < len(ctx.dtypes) else None


@op_schema(
    "If",
    [In("cond"), In("captured", variadic=True)],
    ["outputs"],
    attrs={"then_branch": Attr("graph"), "else_branch": Attr("graph")},
    variadic_outputs=True,
    flops=_bodies_flops,
    dynamic=True,
)
def if_(ctx):
    """If: ``outputs = then_branch(captured...)`` when ``cond`` (bool, one element) is true, else
    ``else_branch(captured...)``; the branches may give different shapes."""
    _scalar_input(ctx, 0, "cond", (BOOL,))
    return [(None, None) for _ in ctx.op.outputs]


@op_schema(
    "Loop",
    [In("M", optional=True), In("cond", optional=True), In("v_initial", variadic=True)],
    ["outputs"],
    attrs={"body": Attr("graph"), "captures": Attr("int", 0)},
    variadic_outputs=True,
    flops=_bodies_flops,
    dynamic=True,
)
def loop(ctx):
    """Loop: ``v = v_initial; i = 0; c = cond``; while ``i < M`` (when given) and ``c`` (when given):
    ``c, v, scan_i = body(i, c, v..., captured...)``, ``i += 1``. Outputs: the final ``v...``, then each
    scan output's per-iteration values stacked on a new axis 0 (trip count 0: empty)."""
    _scalar_input(ctx, 0, "M", (I64,))
    _scalar_input(ctx, 1, "cond", (BOOL,))
    n = len(ctx.op.inputs) - 2 - ctx.attrs["captures"]
    if n < 0:
        ctx.fail(f"captures={ctx.attrs['captures']} is more than the {len(ctx.op.inputs) - 2} inputs after M and cond")
    return [(None, _dtype(ctx, 2 + k) if k < n else None) for k in range(len(ctx.op.outputs))]


@op_schema(
    "Scan",
    [In("initial_state_and_scan_inputs", variadic=True)],
    ["final_state_and_scan_outputs"],
    attrs={
        "body": Attr("graph"),
        "num_scan_inputs": Attr("int"),
        "scan_input_axes": Attr("ints"),
        "scan_input_directions": Attr("ints"),
        "scan_output_axes": Attr("ints"),
        "scan_output_directions": Attr("ints"),
        "captures": Attr("int", 0),
    },
    variadic_outputs=True,
    flops=_bodies_flops,
    dynamic=True,
)
def scan(ctx):
    """Scan: for ``t`` in ``0..T-1`` (each scan input read forward or reversed along its axis,
    ``T`` its length there, the same for all): ``state..., y_t... = body(state..., slice_t..., captured...)``.
    Outputs: the final states, then each ``y`` stacked along its ``scan_output_axes`` entry
    (reversed when its direction is 1)."""
    m, k = ctx.attrs["num_scan_inputs"], ctx.attrs["captures"]
    n = len(ctx.op.inputs) - m - k
    if m < 1 or n < 0:
        ctx.fail(f"num_scan_inputs={m} and captures={k} do not fit {len(ctx.op.inputs)} inputs")
    lengths = set()
    for j, axis in enumerate(ctx.attrs["scan_input_axes"]):
        shape = ctx.shapes[n + j] if n + j < len(ctx.shapes) else None
        if shape is None:
            continue
        if not -len(shape) <= axis < len(shape):
            ctx.fail(f"scan input {j}: axis {axis} out of range for rank {len(shape)}")
        if isinstance(shape[axis], int):
            lengths.add(shape[axis])
    if len(lengths) > 1:
        ctx.fail(f"scan inputs have different lengths along their scan axes: {sorted(lengths)}")
    return [(None, _dtype(ctx, j) if j < n else None) for j in range(len(ctx.op.outputs))]


# ------------------------------------------------------------------------ bodies
def body_refs(op) -> list[tuple[str, int]]:
    """``(attribute name, graph index)`` of every body ``op`` names, in attribute order."""
    return [(k, v.index) for k, v in op.attrs.items() if isinstance(v, GraphRef)]


def check_bodies(op, graphs, where: str, parent=None) -> None:
    """The arity rules of control-flow ``op`` against its bodies ``graphs[i]`` (rules in the module
    docstring); ``ModelFormatError`` prefixed with ``where`` (the op) naming the body otherwise.
    With ``parent`` (the op's graph): each body output that becomes an op output has its kind
    (tensor or sequence) and dtype, and a Loop's ``cond_out`` is a bool tensor.

    ``op.resolved`` must be set (attributes checked); an op of another type passes.
    """
    a = op.resolved
    n_in, n_out = len(op.inputs), len(op.outputs)

    def body(attr: str):
        g = graphs[a[attr].index]
        return g, f"{where}: body '{attr}' (graph {a[attr].index} '{g.name}')"

    def need(ok: bool, what: str, msg: str) -> None:
        if not ok:
            raise ModelFormatError(f"{what}: {msg}")

    if op.type == "If":
        for attr in ("then_branch", "else_branch"):
            g, what = body(attr)
            need(len(g.inputs) == n_in - 1, what, f"has {len(g.inputs)} inputs, the op captures {n_in - 1} values")
            need(len(g.outputs) == n_out, what, f"has {len(g.outputs)} outputs, the op {n_out}")
            _check_outputs(parent, op, g, what, [(j, j, "") for j in range(n_out)])
    elif op.type == "Loop":
        g, what = body("body")
        k = a["captures"]
        n = n_in - 2 - k
        need(k >= 0 and n >= 0, where, f"captures={k} does not fit {n_in} inputs (M, cond, carried..., captured...)")
        need(len(g.inputs) == 2 + n + k, what, f"has {len(g.inputs)} inputs, expected 2 + {n} carried + {k} captured")
        s = len(g.outputs) - 1 - n
        need(s >= 0, what, f"has {len(g.outputs)} outputs, expected cond + {n} carried + scan outputs")
        need(n + s == n_out, what, f"gives {n} carried + {s} scan outputs, the op has {n_out} outputs")
        _check_scalar_input(g, 0, what, "iteration_num", I64)
        _check_scalar_input(g, 1, what, "cond_in", BOOL)
        _check_kinds(g, what, [(2 + j, 1 + j) for j in range(n)])
        _check_scalar_output(g, 0, what, "cond_out", BOOL)
        _check_outputs(parent, op, g, what, [(1 + j, j, "") for j in range(n)] + [(1 + n + j, n + j, "scan") for j in range(s)])
    elif op.type == "Scan":
        g, what = body("body")
        m, k = a["num_scan_inputs"], a["captures"]
        n = n_in - m - k
        need(m >= 1 and k >= 0 and n >= 0, where, f"num_scan_inputs={m}, captures={k} do not fit {n_in} inputs")
        need(len(g.inputs) == n + m + k, what, f"has {len(g.inputs)} inputs, expected {n} states + {m} slices + {k} captured")
        s = len(g.outputs) - n
        need(s >= 0 and n + s == n_out, what, f"has {len(g.outputs)} outputs, expected {n} states + {n_out - n} scan outputs")
        lengths = {"scan_input_axes": m, "scan_input_directions": m, "scan_output_axes": s, "scan_output_directions": s}
        for attr, count in lengths.items():
            need(len(a[attr]) == count, where, f"{attr} has {len(a[attr])} entries, expected {count}")
        for attr in ("scan_input_directions", "scan_output_directions"):
            need(all(d in (0, 1) for d in a[attr]), where, f"{attr} {list(a[attr])}: each must be 0 or 1")
        _check_kinds(g, what, [(j, j) for j in range(n)])
        _check_outputs(parent, op, g, what, [(j, j, "") for j in range(n)] + [(n + j, n + j, "scan") for j in range(s)])


def _check_outputs(parent, op, g, what: str, pairs: list[tuple[int, int, str]]) -> None:
    """Body output ``b`` and op output ``o`` agree in kind and dtype for each ``(b, o, role)``;
    a ``"scan"`` output (stacked per step) must be a tensor. Nothing to check without
    ``parent`` or for an unused op output."""
    if parent is None:
        return
    for b, o, role in pairs:
        t = op.outputs[o]
        if t < 0:
            continue
        tb, to = g.tensors[g.outputs[b]], parent.tensors[t]
        if role == "scan" and tb.kind != "tensor":
            raise ModelFormatError(f"{what}: scan output '{tb.name}' is a {tb.kind}; scan outputs are stacked tensors")
        if tb.kind != to.kind or tb.dtype != to.dtype:
            raise ModelFormatError(
                f"{what}: output '{tb.name}' is a {tb.kind} of {tb.dtype}, the op's output '{to.name}' a {to.kind} of {to.dtype}"
            )


def _check_scalar_output(g, o: int, what: str, name: str, dtype: np.dtype) -> None:
    """Body output ``o`` is a tensor of ``dtype``."""
    t = g.tensors[g.outputs[o]]
    if t.kind != "tensor" or t.dtype != dtype:
        raise ModelFormatError(f"{what}: output {o} ('{t.name}', {name}) must be a {dtype} tensor, got {t.kind} of {t.dtype}")


def _check_scalar_input(g, i: int, what: str, name: str, dtype: np.dtype) -> None:
    """Body input ``i`` is a tensor of ``dtype`` whose shape, when known, is a scalar or one element."""
    t = g.tensors[g.inputs[i]]
    if t.kind != "tensor" or t.dtype != dtype or (t.shape is not None and len(t.shape) > 1):
        raise ModelFormatError(f"{what}: input {i} ('{t.name}', {name}) must be a {dtype} scalar, got {t.kind} of {t.dtype}")


def _check_kinds(g, what: str, pairs: list[tuple[int, int]]) -> None:
    """Each carried value (body input, body output) is a tensor in both or a sequence in both."""
    for i, o in pairs:
        ti, to = g.tensors[g.inputs[i]], g.tensors[g.outputs[o]]
        if ti.kind != to.kind:
            raise ModelFormatError(f"{what}: carried value '{ti.name}' is a {ti.kind} in and a {to.kind} out")

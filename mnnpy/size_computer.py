"""SizeComputer: every tensor's shape and dtype for one set of input shapes (at resize).

Walks the graph once in topological order and applies each op's shape function
(``mnnpy.ops``). Values that shape functions read (Reshape's shape, Slice's starts,
Resize's sizes...) are known at resize when they are constants, published by a
shape function (``Shape``), or computed here by evaluating small ops whose inputs
are all known (MNN computes such "shape tensors" on the CPU during resize the same
way). Ops folded this way are left out of the run-time schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mnnpy import limits
from mnnpy.backend import OpInfo, TensorInfo
from mnnpy.errors import ShapeError
from mnnpy.ir import Graph
from mnnpy.ops import ShapeContext, get_schema

FOLD_LIMIT = 1 << 14  # elements: larger outputs are computed at run time, not at resize


@dataclass
class SizeResult:
    """Shapes/dtypes per tensor, values known at resize, each op's derived geometry (what its
    shape function recorded with ``ShapeContext.derive``) and MFLOPs (its schema's FLOPs
    rule, as MNN's SizeComputer reports them), ops left to run."""

    graph: Graph
    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    dtypes: dict[int, np.dtype] = field(default_factory=dict)
    values: dict[int, np.ndarray] = field(default_factory=dict)
    geometry: dict[int, dict] = field(default_factory=dict)
    mflops: dict[int, float] = field(default_factory=dict)
    runtime_ops: list[int] = field(default_factory=list)
    barrier: int | None = None  # first op of the next segment (its values or shapes are only known at run)
    dynamic: int | None = None  # a dynamic op ending this segment, run on the host (``OpSchema.dynamic``)
    _infos: dict | None = field(default=None, repr=False, compare=False)  # tensor -> TensorInfo once frozen

    def tensor(self, t: int) -> TensorInfo | None:
        """The ``TensorInfo`` of tensor ``t`` (``None`` for -1, an absent slot, or a tensor
        not inferred); once ``freeze`` was called, one object per tensor."""
        memo = self._infos
        if memo is not None and t in memo:
            return memo[t]
        if t < 0 or t not in self.shapes:
            return None
        info = TensorInfo(t, self.graph.tensors[t].name, self.shapes[t], self.dtypes[t], self.values.get(t))
        if memo is not None:
            memo[t] = info
        return info

    def freeze(self) -> SizeResult:
        """Mark the result complete (the planner's, once inferred or loaded): ``tensor`` then
        makes each ``TensorInfo`` once (the ops' infos and the handles share them; PP-OCRv4
        rec: 827 made per resize for 300 tensors)."""
        self._infos = {}
        return self

    def op_info(self, i: int) -> OpInfo:
        """The ``OpInfo`` of op ``i``: resolved attributes, tensor infos per slot, geometry."""
        op = self.graph.ops[i]
        ins = tuple(self.tensor(t) for t in op.inputs)
        outs = tuple(self.tensor(t) for t in op.outputs)
        return OpInfo(i, op, op.resolved, ins, outs, self.geometry.get(i, {}))


Evaluate = Callable[[OpInfo], list[np.ndarray]]


def compute_sizes(
    graph: Graph,
    input_shapes: dict[int, tuple[int, ...]],
    evaluate: Evaluate,
    input_values: dict[int, np.ndarray] | None = None,
    start: int = 0,
    input_dtypes: dict[int, np.dtype] | None = None,
) -> SizeResult:
    """Infer the tensors of ``graph`` for ``input_shapes`` (tensor index -> shape), from op
    ``start`` on (0: the whole graph; later: the rest after a data-dependent barrier).

    ``input_values``: known contents of inputs that shape functions read (see
    ``value_inputs``); ``input_dtypes``: dtypes of inputs that are not graph inputs.
    ``evaluate(op_info)`` computes a small op whose inputs are all known at resize (the
    CPU backend provides it); attributes are each op's ``resolved`` ones (set at load).
    The walk stops at the first op whose value inputs are unknown (``barrier``: the
    session runs what comes before, then resizes the rest with the values computed), or
    after a dynamic op (``OpSchema.dynamic``: control flow, sequence ops), whose outputs'
    shapes only its run gives (``dynamic``; ``barrier`` is the op after it). A sequence
    input's shape is ``()`` (its value is a list). Every input and output is checked
    (``limits.check_tensor``: rank, exact bytes within the current plan's memory limit).
    Raises ``ShapeError`` naming the op, its input shapes and the bytes asked for.
    """
    r = graph_constants(graph)
    for t, shape in input_shapes.items():
        r.shapes[t] = tuple(int(d) for d in shape)
        r.dtypes[t] = (input_dtypes or {}).get(t, graph.tensors[t].dtype)
        limits.check_tensor(r.shapes[t], r.dtypes[t], f"input '{graph.tensors[t].name}'")
    for t, value in (input_values or {}).items():
        r.values[t] = value
    for i in range(start, len(graph.ops)):
        op = graph.ops[i]
        schema = get_schema(op.type)
        if any(op.inputs[k] >= 0 and op.inputs[k] not in r.values for k in schema.value_inputs(len(op.inputs))):
            r.barrier = i
            break
        if schema.dynamic:
            _infer(r, i, dynamic=True)
            r.dynamic, r.barrier = i, i + 1
            break
        ctx = _infer(r, i)
        if not _fold(r, i, ctx, evaluate):
            r.runtime_ops.append(i)
    return r


def graph_constants(graph: Graph) -> SizeResult:
    """A ``SizeResult`` of ``graph`` that holds its constants only: the shape, dtype and value
    (the graph's own array) of each tensor with data."""
    r = SizeResult(graph)
    for t, desc in enumerate(graph.tensors):
        if desc.data is not None:
            r.shapes[t], r.dtypes[t], r.values[t] = tuple(desc.data.shape), desc.data.dtype, desc.data
    return r


def _infer(r: SizeResult, i: int, dynamic: bool = False) -> ShapeContext:
    """Apply op ``i``'s shape function: its outputs' shapes and dtypes into ``r``, its
    derived geometry kept; returns the context (with any values it published). A
    ``dynamic`` op's function checks its inputs and gives its outputs' dtypes only."""
    op = r.graph.ops[i]
    shapes = [r.shapes.get(t) if t >= 0 else None for t in op.inputs]
    dtypes = [r.dtypes.get(t) if t >= 0 else None for t in op.inputs]
    values = [r.values.get(t) if t >= 0 else None for t in op.inputs]
    for t, s in zip(op.inputs, shapes):
        if t >= 0 and s is None:
            raise ShapeError(f"{op.type} '{op.name}': input '{r.graph.tensors[t].name}' has no shape (not produced before use)")
    ctx = ShapeContext(op, get_schema(op.type), shapes, dtypes, values, op.resolved)
    try:
        outs = ctx.schema.infer(ctx)
    except ShapeError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, OverflowError, ZeroDivisionError) as e:
        raise ShapeError(f"{op.type} '{op.name}' with input shapes {shapes}: {e}") from e
    if dynamic:  # dtypes only; where the shape function leaves one to the bodies, the declared one
        for k, t in enumerate(op.outputs):
            if t >= 0 and k < len(outs):
                r.dtypes[t] = np.dtype(outs[k][1] if outs[k][1] is not None else r.graph.tensors[t].dtype)
        return ctx
    for k, t in enumerate(op.outputs):
        if t >= 0 and k < len(outs):
            r.shapes[t], r.dtypes[t] = tuple(int(d) for d in outs[k][0]), np.dtype(outs[k][1])
            if any(d < 0 for d in r.shapes[t]):
                raise ShapeError(f"{op.type} '{op.name}': negative output dim {r.shapes[t]}")
            limits.check_tensor(r.shapes[t], r.dtypes[t], f"{op.type} '{op.name}' with input shapes {shapes}")
    if ctx.geometry:
        r.geometry[i] = ctx.geometry
    r.mflops[i] = ctx.schema.mflops(ctx, [r.shapes.get(t, ()) if t >= 0 else () for t in op.outputs])
    return ctx


def _fold(r: SizeResult, i: int, ctx: ShapeContext, evaluate: Evaluate) -> bool:
    """Whether op ``i``'s outputs are known at resize, recording them in ``r.values``: values
    its shape function published (``Shape``), or computed by ``evaluate`` when every input is
    known and the outputs hold at most ``FOLD_LIMIT`` elements."""
    op = r.graph.ops[i]
    live = [(k, t) for k, t in enumerate(op.outputs) if t >= 0]
    if op.type == "Identity" and isinstance(ctx.values[0], list):  # a sequence passes through
        r.values[live[0][1]] = ctx.values[0]
        return True
    if ctx.out_values and all(k in ctx.out_values for k, _ in live):
        for k, t in live:
            r.values[t] = np.asarray(ctx.out_values[k]).astype(r.dtypes[t], copy=False).reshape(r.shapes[t])
        return True
    known = all(v is not None for t, v in zip(op.inputs, ctx.values) if t >= 0)
    if not (known and op.inputs and sum(math.prod(r.shapes[t]) for _, t in live) <= FOLD_LIMIT):
        return False
    for t, v in zip(op.outputs, evaluate(r.op_info(i))):
        if t >= 0:
            r.values[t] = v
    return True


def value_inputs(graph: Graph) -> set[int]:
    """Graph inputs whose *contents* the SizeComputer reads: those from which a value input
    of some op (Reshape's shape, Resize's scales, NonZero's data...) is computed, not
    counting paths through ops whose output values follow from shapes alone (Shape).

    A plan then depends on these inputs' values as well as on the input shapes (MNN treats
    such "shape tensors" the same way).
    """
    producer = graph.producers()
    inputs = set(graph.inputs)
    slots: dict[tuple[str, int], list[int]] = {}  # (op type, inputs) -> value-input slots, asked once each
    stack = []
    for op in graph.ops:
        kind = (op.type, len(op.inputs))
        if kind not in slots:
            slots[kind] = get_schema(op.type).value_inputs(kind[1])
        stack += [op.inputs[i] for i in slots[kind] if op.inputs[i] >= 0]
    seen: set[int] = set()
    found: set[int] = set()
    while stack:
        t = stack.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in inputs:
            found.add(t)
        elif t in producer:
            op = graph.ops[producer[t]]
            if not get_schema(op.type).value_from_shape:
                stack.extend(x for x in op.inputs if x >= 0)
    return found

"""SizeComputer: every tensor's shape and dtype for one set of input shapes (at resize).

Walks the graph once in topological order and applies each op's shape function
(``mnnpy.ops``). Values that shape functions read (Reshape's shape, Slice's starts,
Resize's sizes...) are known at resize when they are constants, published by a
shape function (``Shape``), or computed here by evaluating small ops whose inputs
are all known (MNN computes such "shape tensors" on the CPU during resize the same
way). Ops folded this way are left out of the run-time schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mnnpy.errors import ShapeError
from mnnpy.ir import Graph
from mnnpy.ops import ShapeContext, get_schema

FOLD_LIMIT = 1 << 14  # elements: larger outputs are computed at run time, not at resize


@dataclass
class SizeResult:
    """Shapes/dtypes per tensor, values known at resize, resolved attrs per op, ops left to run."""

    shapes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    dtypes: dict[int, np.dtype] = field(default_factory=dict)
    values: dict[int, np.ndarray] = field(default_factory=dict)
    attrs: list[dict] = field(default_factory=list)
    runtime_ops: list[int] = field(default_factory=list)
    barrier: int | None = None  # first op whose value inputs are only known at run (data-dependent)


Evaluate = Callable[[int, dict, list[np.ndarray], list[tuple[tuple[int, ...], np.dtype]]], list[np.ndarray]]


def compute_sizes(
    graph: Graph,
    input_shapes: dict[int, tuple[int, ...]],
    resolved_attrs: list[dict],
    evaluate: Evaluate,
    input_values: dict[int, np.ndarray] | None = None,
    start: int = 0,
    input_dtypes: dict[int, np.dtype] | None = None,
) -> SizeResult:
    """Infer the tensors of ``graph`` for ``input_shapes`` (tensor index -> shape), from op
    ``start`` on (0: the whole graph; later: the rest after a data-dependent barrier).

    ``input_values``: known contents of inputs that shape functions read (see
    ``value_inputs``); ``input_dtypes``: dtypes of inputs that are not graph inputs.
    ``evaluate(op_index, attrs, input_values, output_specs)`` computes a small op at
    resize (the CPU backend provides it). The walk stops at the first op whose value
    inputs are unknown (``barrier``): the session runs what comes before, then resizes
    the rest with the values computed. Raises ``ShapeError`` naming the op.
    """
    r = SizeResult(attrs=resolved_attrs)
    for t, desc in enumerate(graph.tensors):
        if desc.data is not None:
            r.shapes[t], r.dtypes[t], r.values[t] = tuple(desc.data.shape), desc.data.dtype, desc.data
    for t, shape in input_shapes.items():
        r.shapes[t] = tuple(int(d) for d in shape)
        r.dtypes[t] = (input_dtypes or {}).get(t, graph.tensors[t].dtype)
    for t, value in (input_values or {}).items():
        r.values[t] = value
    for i in range(start, len(graph.ops)):
        op = graph.ops[i]
        schema = get_schema(op.type)
        if any(op.inputs[k] >= 0 and op.inputs[k] not in r.values for k in schema.value_inputs(len(op.inputs))):
            r.barrier = i
            break
        shapes = [r.shapes.get(t) if t >= 0 else None for t in op.inputs]
        dtypes = [r.dtypes.get(t) if t >= 0 else None for t in op.inputs]
        values = [r.values.get(t) if t >= 0 else None for t in op.inputs]
        for t, s in zip(op.inputs, shapes):
            if t >= 0 and s is None:
                raise ShapeError(f"{op.type} '{op.name}': input '{graph.tensors[t].name}' has no shape (not produced before use)")
        ctx = ShapeContext(op, schema, shapes, dtypes, values, resolved_attrs[i])
        try:
            outs = schema.infer(ctx)
        except ShapeError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, OverflowError, ZeroDivisionError) as e:
            raise ShapeError(f"{op.type} '{op.name}' with input shapes {shapes}: {e}") from e
        for k, t in enumerate(op.outputs):
            if t >= 0 and k < len(outs):
                r.shapes[t], r.dtypes[t] = tuple(int(d) for d in outs[k][0]), np.dtype(outs[k][1])
                if any(d < 0 for d in r.shapes[t]):
                    raise ShapeError(f"{op.type} '{op.name}': negative output dim {r.shapes[t]}")
        live_outs = [t for t in op.outputs if t >= 0]
        if ctx.out_values and all(k in ctx.out_values for k, t in enumerate(op.outputs) if t >= 0):
            for k, t in enumerate(op.outputs):
                if t >= 0:
                    r.values[t] = np.asarray(ctx.out_values[k]).astype(r.dtypes[t], copy=False).reshape(r.shapes[t])
            continue
        known = all(v is not None for t, v in zip(op.inputs, values) if t >= 0)
        small = sum(int(np.prod(r.shapes[t])) for t in live_outs) <= FOLD_LIMIT
        if known and small and op.inputs:
            specs = [(r.shapes[t], r.dtypes[t]) if t >= 0 else None for t in op.outputs]
            results = evaluate(i, resolved_attrs[i], values, specs)
            for t, v in zip(op.outputs, results):
                if t >= 0:
                    r.values[t] = v
            continue
        r.runtime_ops.append(i)
    return r


def value_inputs(graph: Graph) -> set[int]:
    """Graph inputs whose *contents* the SizeComputer reads: those from which a value input
    of some op (Reshape's shape, Resize's scales, NonZero's data...) is computed, not
    counting paths through ops whose output values follow from shapes alone (Shape).

    A plan then depends on these inputs' values as well as on the input shapes (MNN treats
    such "shape tensors" the same way).
    """
    producer = graph.producers()
    inputs = set(graph.inputs)
    stack = [op.inputs[i] for op in graph.ops for i in get_schema(op.type).value_inputs(len(op.inputs)) if op.inputs[i] >= 0]
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

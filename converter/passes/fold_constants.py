"""Constant folding: an op whose inputs are all constants is computed now and stored.

One topological sweep reaches the fixed point (a folded output is a constant by the
time its readers are visited). Each op is computed by the CPU backend's
``evaluate`` with output shapes/dtypes from the op's schema (as the SizeComputer
does at resize). Ops are left alone when: an input is not constant, the op has no
CPU kernel, its output would exceed ``MAX_ELEMENTS`` elements, it would inflate the
file (output over ``MAX_GROWTH_BYTES`` and more than 4x its inputs), or computing it
fails (the error then surfaces at resize, with the user's shapes).
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.backend import BackendConfig, OpInfo, TensorInfo, get_runtime
from mnnpy.backends.cpu.registry import executions
from mnnpy.errors import MnnpyError
from mnnpy.ir import Graph
from mnnpy.ops import ShapeContext, get_schema

MAX_ELEMENTS = 64 << 20
MAX_GROWTH_BYTES = 16 << 20


def fold_constants(graph: Graph) -> int:
    """Replace constant-input ops of ``graph`` by constant tensors; returns how many were folded."""
    backend = None
    dead: set[int] = set()
    for i, op in enumerate(graph.ops):
        live_in = [t for t in op.inputs if t >= 0]
        if not live_in or any(graph.tensors[t].data is None for t in live_in):
            continue
        if op.type not in executions():
            continue
        backend = backend or get_runtime("cpu").create_backend(BackendConfig())
        results = _evaluate(backend, graph, i)
        if results is None:
            continue
        for t, value in zip(op.outputs, results):
            if t >= 0:
                desc = graph.tensors[t]
                value = np.require(value, requirements="C")  # keeps 0-d scalars 0-d
                desc.data, desc.dtype, desc.shape = value, value.dtype, tuple(value.shape)
        dead.add(i)
    graph.ops = [op for i, op in enumerate(graph.ops) if i not in dead]
    return len(dead)


def _evaluate(backend, graph: Graph, i: int) -> list[np.ndarray] | None:
    """Outputs of op ``i`` computed on ``backend``, or ``None`` when it should stay in the graph."""
    op = graph.ops[i]
    schema = get_schema(op.type)
    values = [graph.tensors[t].data if t >= 0 else None for t in op.inputs]
    shapes = [tuple(v.shape) if v is not None else None for v in values]
    dts = [v.dtype if v is not None else None for v in values]
    try:
        attrs = schema.resolve_attrs(op.attrs, f"op '{op.name}'")
        ctx = ShapeContext(op, schema, shapes, dts, values, attrs)
        specs = [(tuple(int(d) for d in s), np.dtype(dt)) for s, dt in schema.infer(ctx)]
        if any(k >= len(specs) for k, t in enumerate(op.outputs) if t >= 0):
            return None
        out_elems = sum(math.prod(s) for s, _ in specs)
        out_bytes = sum(math.prod(s) * dt.itemsize for s, dt in specs)
        in_bytes = sum(v.nbytes for v in values if v is not None)
        if out_elems > MAX_ELEMENTS or (out_bytes > MAX_GROWTH_BYTES and out_bytes > 4 * in_bytes):
            return None
        if ctx.out_values and all(k in ctx.out_values for k, t in enumerate(op.outputs) if t >= 0):
            return [
                np.asarray(ctx.out_values[k]).astype(specs[k][1]).reshape(specs[k][0]) if t >= 0 else None
                for k, t in enumerate(op.outputs)
            ]
        ins = tuple(TensorInfo(t, "", v.shape, v.dtype, v) if v is not None else None for t, v in zip(op.inputs, values))
        outs = tuple(TensorInfo(t, "", *specs[k]) if t >= 0 else None for k, t in enumerate(op.outputs))
        return backend.evaluate(OpInfo(i, op, attrs, ins, outs, ctx.geometry))
    except (MnnpyError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError, FloatingPointError):
        return None

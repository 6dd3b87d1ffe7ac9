"""Control flow at run time: ONNX If, Loop and Scan (NNAPI's IF and WHILE), run on the host.

Each is the host step ending its segment (``OpSchema.dynamic``): its condition or trip
count crosses to the host with one small read, and its bodies run through their own
``GraphRunner`` on the session's backends: planned by the same planner as the main graph,
once per distinct set of input shapes, each body op placed by the same rule (NNAPI: a body's
ops go to a device that supports them, the rest to the CPU). Bodies receive the op's
captured outer-scope values as their trailing inputs (the converter makes them explicit).

Formulas: ONNX operators.md #If, #Loop, #Scan (opset 9+ form); NNAPI's loop time-out
(``RunContext.loop_timeout``, default 2 s, at most 15 s) bounds each Loop.
"""

from __future__ import annotations

import time

import numpy as np

from mnnpy.errors import LoopTimeoutError, ShapeError


def run_body(body, values: list, context) -> list:
    """The outputs of body graph ``body`` (a ``GraphRunner``) on its inputs ``values``, in
    the order of its graph inputs. Raises ``ShapeError`` when the count differs."""
    g = body.graph
    if len(values) != len(g.inputs):
        raise ShapeError(f"body '{g.name}' takes {len(g.inputs)} inputs, got {len(values)}")
    results = body.run(dict(zip(g.inputs, values)), list(g.outputs), context)
    return [results[t] for t in g.outputs]


def _flag(value, what: str) -> bool:
    """A condition: a tensor of one element, as a bool."""
    a = np.asarray(value)
    if a.size != 1:
        raise ShapeError(f"{what} must hold one element, got shape {a.shape}")
    return bool(a.reshape(-1)[0])


def run_if(runner, info, inputs: list, context) -> list:
    """If: the outputs of ``then_branch`` when ``cond`` is true, else of ``else_branch``, on
    the captured values (the op's inputs after ``cond``). The branches may give shapes that
    differ; the rest of the graph is planned with those taken."""
    cond = _flag(inputs[0], f"If '{info.op.name}': cond")
    body = runner.body(info.index, "then_branch" if cond else "else_branch")
    return run_body(body, inputs[1:], context)


def run_loop(runner, info, inputs: list, context) -> list:
    """Loop: ``M`` (trip count, optional), ``cond`` (optional), N carried values, K captured.

    Iteration ``i`` runs the body on ``(i, cond, carried..., captured...)``; it gives
    ``(cond, carried..., scan...)``. The loop runs while ``i < M`` (when given) and the
    condition holds (when given). Outputs: the final carried values, then each scan output
    stacked on a new axis 0 (0 iterations: empty, shaped from the body's plan). Raises
    ``LoopTimeoutError`` past ``context.loop_timeout`` and ``ShapeError`` when the scan
    outputs and their stacked copies would pass the session's memory limit with what its
    plans hold (``runner.budget``)."""
    op, body = info.op, runner.body(info.index, "body")
    try:
        return _loop(op, body, info, inputs, context)
    except MemoryError as e:
        raise ShapeError(f"Loop '{op.name}' needs more memory than this machine has: {e}") from None


def _check_scans(budget, held: int, what: str) -> None:
    """``ShapeError`` (naming ``what``) when scan outputs of ``held`` bytes, and the stacked
    copy that ends the op, do not fit the session's ``budget`` beside its plans."""
    budget.check(2 * held, f"{what}: its scan outputs ({held} bytes so far) and their stacked copy")


def _loop(op, body, info, inputs: list, context) -> list:
    """``run_loop``'s iterations; the deadline is this loop's own, or an enclosing loop's if
    sooner (a nested loop stops at the outer loop's limit too)."""
    n_carried = len(inputs) - 2 - info.attrs["captures"]
    trips = None if inputs[0] is None else int(np.asarray(inputs[0]).reshape(-1)[0])
    keep = True if inputs[1] is None else _flag(inputs[1], f"Loop '{op.name}': cond")
    carried, captured = list(inputs[2 : 2 + n_carried]), list(inputs[2 + n_carried :])
    scans: list[list] = [[] for _ in range(len(op.outputs) - n_carried)]
    held, i = 0, 0
    outer = context.deadline
    deadline = time.perf_counter() + context.loop_timeout
    context.deadline = deadline if outer is None else min(deadline, outer)
    try:
        while (trips is None or i < trips) and keep:
            if time.perf_counter() > context.deadline:
                raise LoopTimeoutError(
                    f"Loop '{op.name}' ran past loop_timeout={context.loop_timeout:g} s at iteration {i}"
                    + (f" of {trips}" if trips is not None else "")
                    + (" (an enclosing loop's limit)" if outer is not None and outer < deadline else "")
                )
            keep, carried, held = _iterate(op, body, i, keep, carried, captured, scans, held, context)
            _check_scans(body.budget, held, f"Loop '{op.name}' at iteration {i}")
            i += 1
    finally:
        context.deadline = outer
    empty = _empty_scans(body, info, inputs, n_carried) if i == 0 else None
    return [*carried, *(np.stack(s) if s else empty[k] for k, s in enumerate(scans))]


def _iterate(op, body, i: int, keep: bool, carried: list, captured: list, scans: list, held: int, context):
    """Iteration ``i``: ``(cond, carried, bytes the scan outputs hold)`` after it."""
    n_carried = len(carried)
    outs = run_body(body, [np.array(i, np.int64), np.array(keep), *carried, *captured], context)
    for scan, v in zip(scans, outs[1 + n_carried :]):
        scan.append(v)
        held += np.asarray(v).nbytes
    return _flag(outs[0], f"Loop '{op.name}' body: cond_out"), outs[1 : 1 + n_carried], held


def _empty_scans(body, info, inputs: list, n_carried: int) -> list[np.ndarray]:
    """Scan outputs of a Loop that ran 0 times: ``(0, *element shape)``."""
    values = [np.array(0, np.int64), np.array(True), *inputs[2:]]
    specs = _element_specs(body, [np.shape(v) for v in values], [np.asarray(v).dtype for v in values], 1 + n_carried)
    return [np.empty((0, *shape), dtype) for shape, dtype in specs]


def _element_specs(body, shapes: list, dtypes: list, first: int) -> list[tuple[tuple[int, ...], np.dtype]]:
    """``(shape, dtype)`` of the body's outputs from index ``first`` on, for inputs of these
    shapes and dtypes, from the body's SizeComputer without running it (where the shape
    depends on values: the declared one, its dynamic dims 0)."""
    g = body.graph
    try:
        sizes = body.planner.infer(dict(zip(g.inputs, map(tuple, shapes))), dtypes=dict(zip(g.inputs, dtypes)))
    except ShapeError:
        sizes = None
    out = []
    for t in g.outputs[first:]:
        shape = sizes.shapes.get(t) if sizes is not None else None
        if shape is None:  # known only from values: the declared shape, dynamic dims 0
            shape = tuple(d if isinstance(d, int) and d >= 0 else 0 for d in (g.tensors[t].shape or ()))
        dtype = sizes.dtypes.get(t, g.tensors[t].dtype) if sizes is not None else g.tensors[t].dtype
        out.append((shape, np.dtype(dtype)))
    return out


def run_scan(runner, info, inputs: list, context) -> list:
    """Scan (opset 9+): N states, M scan inputs sliced along ``scan_input_axes`` (reversed
    where ``scan_input_directions`` is 1), K captured. Each step runs the body on
    ``(states..., slices..., captured...)`` and gets ``(states..., scan outputs...)``; the
    outputs are the final states, then each scan output's slices stacked along
    ``scan_output_axes`` (in reverse where ``scan_output_directions`` is 1); scan inputs of
    length 0 give the initial states and empty scan outputs. ``ShapeError`` when the scan
    outputs would pass the session's memory limit (as ``run_loop``)."""
    a, op, body = info.attrs, info.op, runner.body(info.index, "body")
    m = a["num_scan_inputs"]
    n = len(inputs) - m - a["captures"]
    states, xs, captured = list(inputs[:n]), inputs[n : n + m], list(inputs[n + m :])
    axes = [int(ax) % max(np.ndim(x), 1) for ax, x in zip(a["scan_input_axes"] or [0] * m, xs)]
    lengths = {np.shape(x)[ax] for x, ax in zip(xs, axes)}
    if len(lengths) != 1:
        raise ShapeError(f"Scan '{op.name}': scan inputs of different lengths {sorted(lengths)} along their axes")
    steps = lengths.pop()
    in_dirs = a["scan_input_directions"] or [0] * m
    scans: list[list] = [[] for _ in range(len(op.outputs) - n)]
    held = 0
    for t in range(steps):
        slices = [np.take(x, steps - 1 - t if d else t, axis=ax) for x, ax, d in zip(xs, axes, in_dirs)]
        outs = run_body(body, [*states, *slices, *captured], context)
        states = outs[:n]
        for scan, v in zip(scans, outs[n:]):
            scan.append(np.asarray(v))
            held += scan[-1].nbytes
        _check_scans(body.budget, held, f"Scan '{op.name}' at step {t}")
    out_axes = a["scan_output_axes"] or [0] * len(scans)
    out_dirs = a["scan_output_directions"] or [0] * len(scans)
    if steps == 0:  # empty scan outputs, shaped from the body's plan for one step's inputs
        slices = [np.shape(x)[:ax] + np.shape(x)[ax + 1 :] for x, ax in zip(xs, axes)]
        shapes = [*map(np.shape, states), *slices, *map(np.shape, captured)]
        dtypes = [np.asarray(v).dtype for v in (*states, *xs, *captured)]
        specs = _element_specs(body, shapes, dtypes, n)
        empty = [
            np.empty(e[: int(ax) % (len(e) + 1)] + (0,) + e[int(ax) % (len(e) + 1) :], dt) for (e, dt), ax in zip(specs, out_axes)
        ]
        return [*states, *empty]
    stacked = []
    for scan, ax, d in zip(scans, out_axes, out_dirs):
        items = scan[::-1] if d else scan
        rank = items[0].ndim + 1
        if not -rank <= int(ax) < rank:
            raise ShapeError(f"Scan '{op.name}': scan_output_axes entry {ax} out of range for its output of rank {rank}")
        stacked.append(np.stack(items, axis=int(ax) % rank))
    return [*states, *stacked]


RUNNERS = {"If": run_if, "Loop": run_loop, "Scan": run_scan}  # op type -> host runner

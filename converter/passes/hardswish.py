"""Recognise hard-swish written with elementwise ops and replace it by one ``HardSwish``.

``HardSwish(x) = x * max(0, min(1, x/6 + 1/2))``. Patterns (either operand order of
each commutative op; every intermediate read only by the pattern):

- ``x * HardSigmoid(x)`` with ``alpha`` = 1/6 and ``beta`` = 0.5 (within 1e-6);
- ``(x * Clip(x + 3, 0, 6)) / 6`` and ``(x * Clip(x + 3, 0, 6)) * (1/6)``
  (Paddle's exporter writes this: ``Add, Clip, Mul, Div``);
- ``x * (Clip(x + 3, 0, 6) / 6)``.

The last op of the pattern becomes ``HardSwish(x)``, keeping its output tensor.

``fold_hardswish_affine``: a scalar scale or shift after a ``HardSwish`` (``y * a``, ``y / a``,
``y + b``, ``y - b``; PP-LCNetV3's learnable affine blocks, PP-OCRv4 det's and rec's backbone)
goes into its mnnpy attributes ``scale`` and ``shift`` (``scale * hardswish(x) + shift``), so a
Conv fusing it computes the affine in its epilogue: ``s * h + t`` then ``* a`` gives scale
``s*a``, shift ``t*a``; ``+ b`` gives shift ``t + b``. Its output is stored once, after the
affine, as before the fold (fp16 storage sees the same values).
"""

from __future__ import annotations

import numpy as np

from mnnpy.ir import Graph

from .common import GraphView, scalar, scalar_step

TOL = 1e-6


def _near(value: float | None, want: float) -> bool:
    return value is not None and abs(value - want) <= TOL * max(1.0, abs(want))


def _is(v: GraphView, t: int, want: float) -> bool:
    """Whether ``t`` is a one-element constant of rank <= 1 (so it cannot grow a shape) near ``want``."""
    c = v.const(t)
    return c is not None and c.ndim <= 1 and _near(scalar(c), want)


def _const_operand(v: GraphView, op, want: float) -> int | None:
    """Index (0/1) of ``op``'s other operand when one operand is the constant ``want``."""
    for k in (0, 1):
        if _is(v, op.inputs[k], want):
            return 1 - k
    return None


def _private_op(v: GraphView, t: int, type_: str):
    """The op of ``type_`` writing ``t`` when ``t`` is read by one op only."""
    if not v.private(t):
        return None
    p = v.producer(t)
    return p if p is not None and p.type == type_ and len(p.inputs) >= 1 else None


def _relu6_of_x_plus_3(v: GraphView, t: int) -> tuple[int, list] | None:
    """``(x, [clip, add])`` when ``t = Clip(x + 3, 0, 6)``."""
    clip = _private_op(v, t, "Clip")
    if clip is None or len(clip.inputs) != 3:
        return None
    if not (_is(v, clip.inputs[1], 0.0) and _is(v, clip.inputs[2], 6.0)):
        return None
    add = _private_op(v, clip.inputs[0], "Add")
    if add is None or len(add.inputs) != 2:
        return None
    k = _const_operand(v, add, 3.0)
    if k is None:
        return None
    return add.inputs[k], [clip, add]


def _match(v: GraphView, op) -> tuple[int, list] | None:
    """``(x, ops to remove)`` when ``op`` ends a hard-swish pattern."""
    if op.type == "Mul" and len(op.inputs) == 2:
        for k in (0, 1):
            x, other = op.inputs[k], op.inputs[1 - k]
            hs = _private_op(v, other, "HardSigmoid")
            if (
                hs is not None
                and hs.inputs[0] == x
                and _near(hs.attrs.get("alpha", 0.2), 1 / 6)
                and _near(hs.attrs.get("beta", 0.5), 0.5)
            ):
                return x, [hs]
            div = _private_op(v, other, "Div")
            if div is not None and len(div.inputs) == 2 and _is(v, div.inputs[1], 6.0):
                inner = _relu6_of_x_plus_3(v, div.inputs[0])
                if inner is not None and inner[0] == x:
                    return x, [div, *inner[1]]
    scale = None
    if op.type == "Div" and len(op.inputs) == 2 and _is(v, op.inputs[1], 6.0):
        scale = 0
    elif op.type == "Mul" and len(op.inputs) == 2:
        scale = _const_operand(v, op, 1 / 6)
    if scale is None:
        return None
    mul = _private_op(v, op.inputs[scale], "Mul")
    if mul is None or len(mul.inputs) != 2:
        return None
    for k in (0, 1):
        inner = _relu6_of_x_plus_3(v, mul.inputs[1 - k])
        if inner is not None and inner[0] == mul.inputs[k]:
            return mul.inputs[k], [mul, *inner[1]]
    return None


def fuse_hardswish(graph: Graph, keep_names=frozenset()) -> int:
    """Replace hard-swish patterns by ``HardSwish`` ops; returns how many."""
    v = GraphView(graph, keep_names)
    count = 0
    for op in list(graph.ops):
        if op.type not in ("Mul", "Div"):
            continue
        found = _match(v, op)
        if found is None:
            continue
        x, ops = found
        op.type, op.inputs, op.attrs = "HardSwish", [x], {}
        for dead in ops:
            v.kill(dead)
        count += 1
    v.finish()
    return count


def fold_hardswish_affine(graph: Graph, keep_names=frozenset()) -> int:
    """Fold each scalar scale/shift read from a ``HardSwish`` (its output's only reader) into the
    HardSwish's ``scale``/``shift`` (module doc); returns how many were folded."""
    v = GraphView(graph, keep_names)
    count = 0
    for op in list(graph.ops):
        step = scalar_step(v, op)
        hs = v.producer(step[0]) if step is not None and v.private(step[0]) else None
        if hs is None or hs.type != "HardSwish" or hs.outputs[0] != step[0]:
            continue
        _, kind, value = step
        scale, shift = float(hs.attrs.get("scale", 1.0)), float(hs.attrs.get("shift", 0.0))
        if kind == "scale":
            scale, shift = scale * value, shift * value
        else:
            shift = shift + value
        if not (np.isfinite(np.float32(scale)) and np.isfinite(np.float32(shift))):
            continue
        hs.attrs = {**hs.attrs, "scale": float(np.float32(scale)), "shift": float(np.float32(shift))}
        hs.outputs = [op.outputs[0]]
        v.kill(op)
        count += 1
    v.finish()
    return count

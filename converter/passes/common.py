"""Helpers shared by the passes: constants, single-consumer checks, rewiring, fresh constants.

Passes edit a ``Graph`` in place and keep it topologically ordered. A fused op takes
over the *last* op's output tensor, so graph output names never change; tensors that
fall out of use are dropped by dead-code elimination at the end.
"""

from __future__ import annotations

import numpy as np

from mnnpy.ir import Graph, Op, TensorDesc

DEAD = "<removed>"


class GraphView:
    """Use counts of a graph, refreshed with ``refresh()`` after edits that add readers."""

    def __init__(self, graph: Graph, keep_names: frozenset[str] = frozenset()):
        self.g = graph
        self.keep_names = keep_names
        self.refresh()

    def refresh(self) -> None:
        self.consumers = self.g.consumers()
        self.producers = self.g.producers()
        self.outputs = set(self.g.outputs)
        self.inputs = set(self.g.inputs)

    def kill(self, op: Op) -> None:
        """Detach ``op`` (no inputs/outputs, removed by ``finish``) and refresh the use counts."""
        op.inputs, op.outputs, op.type = [], [], DEAD
        self.refresh()

    def finish(self) -> int:
        """Remove the ops killed so far; returns how many."""
        n = len(self.g.ops)
        self.g.ops = [op for op in self.g.ops if op.type != DEAD]
        return n - len(self.g.ops)

    def const(self, t: int) -> np.ndarray | None:
        """Contents of tensor ``t`` when it is a constant, else ``None``."""
        return self.g.tensors[t].data if t >= 0 else None

    def producer(self, t: int) -> Op | None:
        """The op writing ``t`` (``None`` for inputs and constants)."""
        i = self.producers.get(t)
        return None if i is None else self.g.ops[i]

    def private(self, t: int) -> bool:
        """Whether ``t`` is an intermediate read by exactly one op (safe to fuse away)."""
        return (
            t >= 0
            and t not in self.outputs
            and t not in self.inputs
            and len(self.consumers.get(t, ())) == 1
            and self.g.tensors[t].name not in self.keep_names
        )

    def add_const(self, value: np.ndarray, hint: str) -> int:
        """A new constant tensor (fresh unique name) holding ``value``; returns its index."""
        names = {t.name for t in self.g.tensors}
        k, name = 0, hint
        while name in names:
            k += 1
            name = f"{hint}_{k}"
        value = np.require(value, requirements="C")  # keeps 0-d scalars 0-d
        return self.g.add_tensor(TensorDesc(name, value.dtype, tuple(value.shape), value))


def scalar(value: np.ndarray | None) -> float | None:
    """The single float value of a one-element constant, else ``None``."""
    if value is None or value.size != 1 or value.dtype.kind not in "fiu":
        return None
    return float(value.reshape(()))


def scalar_step(v: GraphView, op: Op) -> tuple[int, str, float] | None:
    """``(x, kind, value)`` when ``op`` is ``x*a | a*x | x/a`` (kind ``"scale"``, value ``a`` or
    ``1/a``) or ``x+b | b+x | x-b`` (``"shift"``, ``b`` or ``-b``) with a finite float32 scalar
    constant (rank <= 1, so it cannot grow the shape) and ``x`` not a constant; else ``None``
    (also for a division by 0)."""
    if op.type not in ("Mul", "Div", "Add", "Sub") or len(op.inputs) != 2:
        return None
    for k in (0, 1) if op.type in ("Mul", "Add") else (0,):
        c = v.const(op.inputs[1 - k])
        value = scalar(c) if c is not None and c.dtype == np.float32 and c.ndim <= 1 else None
        if value is not None and v.const(op.inputs[k]) is None and np.isfinite(value):
            if op.type == "Div" and value == 0:
                return None
            kind = "scale" if op.type in ("Mul", "Div") else "shift"
            value = 1 / value if op.type == "Div" else -value if op.type == "Sub" else value  # (a Mul by 0 is no error)
            return op.inputs[k], kind, value
    return None

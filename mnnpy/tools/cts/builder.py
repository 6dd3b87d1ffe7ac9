"""The random graph being drawn (``Builder``) and the tensors it may read (``T``).

Validity by construction: each family computes its output shapes by the ONNX rules, keeps
attributes in their legal ranges (pads below the kernel, axes in range, divisors
non-zero), and keeps values where the reference and the engine may be held to the
tolerances:

- *domains*: ``Sqrt``, ``Log``, ``Reciprocal``, ``Pow`` and a ``Div``'s denominator read
  ``Abs(x) + 0.5``, never a value near 0 or below;
- *magnitudes*: each tensor carries a rough bound of its absolute values; ``Exp``,
  ``Sinh``/``Cosh``, ``Pow`` and products take only tensors whose bound keeps the result
  far from float32's range;
- *exactness*: a tensor is exact when only exact ops (data movement, integer ops, ``Max``,
  ``Relu``, comparisons...) lead to it from the inputs, so the engine must reproduce it bit
  for bit. Ops that are discontinuous in their input (``Floor``, ``Ceil``, ``Round``,
  ``Sign``, comparisons, ``Cast`` to int or bool, ``ArgMax``, ``TopK``, ``Hardmax``...) read
  exact tensors only: a rounding difference in a computed float would flip their result
  by a whole step, which no tolerance can judge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ODD = (1, 3, 7, 13)
MAX_ELEMENTS = 16_384  # per tensor: keeps a graph's run in milliseconds
MAX_MAG = 1e4  # the bound past which a float tensor is read only by ops that shrink it
FLOAT, INTS, BOOL = "float32", ("int32", "int64"), "bool"


@dataclass
class T:
    """A tensor the generator may read: name, dtype, shape, whether the engine must
    reproduce it exactly, and a rough bound of its absolute values."""

    name: str
    dtype: str
    shape: tuple
    exact: bool = True
    mag: float = 4.0

    @property
    def size(self) -> int:
        return math.prod(self.shape)


class Builder:
    """The graph being drawn: its spec, the tensors it may read (``pool``), the random
    generator. A body (of If/Loop) is a Builder over the same spec whose nodes go into the
    body and whose pool starts with the body's inputs and the outer tensors it may read."""

    def __init__(self, rng: np.random.Generator, spec: dict, nodes: list | None = None, body: bool = False):
        self.rng, self.spec, self.body = rng, spec, body
        self.nodes = spec["nodes"] if nodes is None else nodes
        self.pool: list[T] = []
        self.shapes = spec.setdefault("_shapes", {})  # every tensor made: its shape and dtype
        self.dtypes = spec.setdefault("_dtypes", {})
        self.counter = spec.setdefault("_counter", [0])

    # -- names, data, nodes ------------------------------------------------------------
    def name(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def input(self, dtype: str, shape: tuple, **dist) -> T:
        """A new graph input (of the main graph) with data drawn as ``dist`` says."""
        t = T(self.name("x"), dtype, tuple(shape), True, dist.pop("mag", 4.0))
        self.spec["inputs"].append({"name": t.name, "dtype": dtype, "shape": list(shape), **dist})
        return t

    def const(self, dtype: str, shape, values=None, **dist) -> str:
        """A new initializer: explicit ``values`` (ints, shapes, axes) or drawn data."""
        name = self.name("c")
        entry = {"name": name, "dtype": dtype, "shape": list(shape)}
        if values is not None:
            entry["values"] = np.asarray(values).reshape(-1).tolist()
        else:
            entry.update(dist or {"dist": "normal"})
        self.spec["constants"].append(entry)
        return name

    def node(self, op: str, inputs: list[str], outs: list[tuple], exact: bool = False, mag: float = 4.0, **attrs) -> list[T]:
        """Add a node; ``outs``: (dtype, shape) per output. Its outputs join the pool
        (empty ones excepted: they may only be graph outputs)."""
        made = [T(self.name("t"), d, tuple(int(x) for x in s), exact, mag) for d, s in outs]
        self.shapes.update((t.name, t.shape) for t in made)
        self.dtypes.update((t.name, t.dtype) for t in made)
        self.nodes.append({"op": op, "inputs": inputs, "outputs": [t.name for t in made], "attrs": attrs})
        self.pool += [t for t in made if t.size > 0]
        if any(t.size == 0 for t in made):
            self.spec.setdefault("_empty", []).extend(t.name for t in made if t.size == 0)
        return made

    # -- picking what to read -------------------------------------------------------------
    def pick(self, pred=lambda t: True, dtype=FLOAT, exact: bool = False, max_mag: float = MAX_MAG) -> T | None:
        """A tensor of the pool satisfying ``pred`` (of ``dtype``: one or a tuple; only exact
        ones if ``exact``; bound at most ``max_mag``): the newest one with probability 0.6,
        else any."""
        dtypes = (dtype,) if isinstance(dtype, str) else dtype
        ok = [t for t in self.pool if t.dtype in dtypes and (t.exact or not exact) and t.mag <= max_mag and pred(t)]
        if not ok:
            return None
        return ok[-1] if self.chance(0.6) else self.choice(ok)

    def positive(self, t: T) -> tuple[str, float]:
        """``Abs(t) + 0.5``: a tensor at least 0.5 everywhere (a domain guard)."""
        (a,) = self.node("Abs", [t.name], [(t.dtype, t.shape)], t.exact, t.mag)
        self.pool.remove(a)
        (p,) = self.node("Add", [a.name, self.const(FLOAT, [], [0.5])], [(t.dtype, t.shape)], False, t.mag + 0.5)
        self.pool.remove(p)
        return p.name, t.mag + 0.5

    def dims(self, rank: int, max_elements: int = MAX_ELEMENTS) -> tuple:
        """A shape of ``rank`` odd sizes (127 now and then), at most ``max_elements``."""
        while True:
            shape = tuple(self.choice(ODD) if not self.chance(0.04) else 127 for _ in range(rank))
            if math.prod(shape) <= max_elements:
                return shape

    def broadcast_shape(self, shape: tuple, grow: bool = True) -> tuple:
        """A shape that broadcasts with ``shape``: some dims 1, leading dims dropped, and
        (``grow``) a 1 of ``shape`` sometimes met by a larger size."""
        out = []
        for d in shape:
            if d == 1 and grow and self.chance(0.3):
                out.append(self.choice((3, 7)))
            else:
                out.append(1 if self.chance(0.4) else d)
        drop = int(self.rng.integers(len(out) + 1)) if self.chance(0.4) else 0
        return tuple(out[drop:])

    def const_like(self, dtype: str, shape: tuple, mag: float = 1.0) -> str:
        """A constant of ``shape`` with moderate values of ``dtype``."""
        if dtype == FLOAT:
            return self.const(dtype, shape, dist="normal", scale=mag)
        if dtype == BOOL:
            return self.const(dtype, shape, dist="bernoulli")
        return self.const(dtype, shape, dist="uniform", low=-int(mag), high=int(mag))


def bshape(*shapes: tuple) -> tuple:
    """numpy's broadcast of shapes (raises ``ValueError`` where they do not broadcast)."""
    return tuple(np.broadcast_shapes(*shapes))


def axis_of(b: Builder, rank: int) -> int:
    """An axis in ``[-rank, rank)``, negative half the time."""
    ax = int(b.rng.integers(rank))
    return ax - rank if b.chance(0.4) else ax

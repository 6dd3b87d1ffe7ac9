"""Graph optimisations on a converted Net: ``optimize(net)`` runs ``PASSES`` on every graph.

Order matters: constants are folded first (so that shape arithmetic and weight
pre-processing disappear), no-ops are removed so that patterns are contiguous, then
BatchNormalization and constant scale/shift are folded into the Conv before, hard-swish
patterns become ``HardSwish`` (before their ``/ 6`` could be taken for a scale) and take
the scalar scale/shift after them into their ``scale``/``shift``, layer
normalisation and swish patterns become one op each, scalar
scale/shift feeding a Conv are folded into it, activations are fused into Convs, and
dead code is dropped last. Every pass keeps graph input/output names and
the graph's results (checked against onnxruntime in ``tests/test_optimize.py``).

Control flow (``passes/control_flow.py``): the graphs are visited from the main graph down,
each before its bodies. In each, after constant folding, every ``If`` with a constant
condition is replaced by its branch (and folding repeated), then captured values that are
constants are copied into the bodies, so folding continues there; a body's inputs and
outputs are kept like a graph's. Afterwards, from the innermost bodies up, captured values
no body reads any more are dropped (and dead code again), and graphs nothing references
(the branches of folded Ifs) are removed. A body reads no tensor of another graph (its
captured values are inputs of its op), so a pass on one graph never breaks another.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from mnnpy.converter.passes.cleanup import eliminate_dead_code, remove_noops
from mnnpy.converter.passes.control_flow import (
    capture_constants,
    children,
    drop_unused_captures,
    fold_constant_ifs,
    prune_graphs,
)
from mnnpy.converter.passes.fold_constants import fold_constants
from mnnpy.converter.passes.fuse_conv import (
    fold_affine,
    fold_affine_into_next,
    fold_batchnorm,
    fuse_activation,
)
from mnnpy.converter.passes.hardswish import fold_hardswish_affine, fuse_hardswish
from mnnpy.converter.passes.layernorm import fuse_layernorm, fuse_swish
from mnnpy.ir import Graph, Net


def _fold(graph: Graph, keep_names) -> int:
    return fold_constants(graph)


def _count(stats: dict[str, int] | None, name: str, n: int) -> None:
    if stats is not None:
        stats[name] = stats.get(name, 0) + n


def _fold_linear(graph: Graph, keep_names) -> int:
    """BatchNormalization and constant scale/shift folded into the Conv before them, repeated
    until nothing changes (``ConvTranspose -> Add bias -> BatchNormalization`` needs the Add
    folded before the BatchNormalization can be)."""
    total = 0
    while n := fold_batchnorm(graph, keep_names) + fold_affine(graph, keep_names):
        total += n
    return total


PASSES: list[tuple[str, Callable[[Graph, frozenset], int]]] = [
    ("fold_constants", _fold),
    ("remove_noops", remove_noops),
    ("fold_batchnorm_affine", _fold_linear),
    ("fuse_hardswish", fuse_hardswish),
    ("fold_hardswish_affine", fold_hardswish_affine),
    ("fuse_layernorm", fuse_layernorm),
    ("fuse_swish", fuse_swish),
    ("fold_affine_into_next", fold_affine_into_next),
    ("fuse_activation", fuse_activation),
    ("eliminate_dead_code", eliminate_dead_code),
]


def optimize(net: Net, stats: dict[str, int] | None = None) -> Net:
    """Run every pass in ``PASSES`` on every graph of ``net`` (in place, control flow as the
    module docstring says) and return ``net``.

    ``stats``, when given, receives the number of rewrites of each pass (summed over graphs),
    and of ``fold_constant_ifs``, ``capture_constants``, ``drop_unused_captures`` and
    ``prune_graphs``.
    """
    order, k = [0], 0
    while k < len(order):  # parents before their bodies: constants flow down into the bodies
        g = net.graphs[order[k]]
        for name, fn in PASSES:
            n = fn(g, frozenset())
            if name == "fold_constants":
                while m := fold_constant_ifs(net, g):
                    _count(stats, "fold_constant_ifs", m)
                    n += fold_constants(g)
                _count(stats, "capture_constants", capture_constants(net, g))
            _count(stats, name, n)
        order += [i for i in children(g) if i not in order]
        k += 1
    for gi in reversed(order):  # innermost first: a body's unused inputs free its op's inputs
        g = net.graphs[gi]
        n = drop_unused_captures(net, g)
        if n:
            for i in children(g):
                eliminate_dead_code(net.graphs[i])
            eliminate_dead_code(g)
        _count(stats, "drop_unused_captures", n)
    _count(stats, "prune_graphs", prune_graphs(net))
    return net


def op_counts(net: Net) -> Counter:
    """Op type -> number of ops in the main graph."""
    return Counter(op.type for op in net.main.ops)

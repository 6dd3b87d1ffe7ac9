"""Graph optimisations on a converted Net: ``optimize(net)`` runs ``PASSES`` on ``net.main``.

Order matters: constants are folded first (so that shape arithmetic and weight
pre-processing disappear), no-ops are removed so that patterns are contiguous, then
BatchNormalization and constant scale/shift are folded into the Conv before, hard-swish
patterns become ``HardSwish`` (before their ``/ 6`` could be taken for a scale), layer
normalisation and swish patterns become one op each, scalar
scale/shift feeding a Conv are folded into it, activations are fused into Convs, and
dead code is dropped last. Every pass keeps graph input/output names and
the graph's results (checked against onnxruntime in ``tests/test_optimize.py``).
Tensors of the main graph whose names appear in other graphs (control-flow bodies
read outer values by name) are never removed or renamed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from mnnpy.converter.passes.cleanup import eliminate_dead_code, remove_noops
from mnnpy.converter.passes.common import subgraph_names
from mnnpy.converter.passes.fold_constants import fold_constants
from mnnpy.converter.passes.fuse_conv import (
    fold_affine,
    fold_affine_into_next,
    fold_batchnorm,
    fuse_activation,
)
from mnnpy.converter.passes.hardswish import fuse_hardswish
from mnnpy.converter.passes.layernorm import fuse_layernorm, fuse_swish
from mnnpy.ir import Graph, Net


def _fold(graph: Graph, keep_names) -> int:
    return fold_constants(graph)


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
    ("fuse_layernorm", fuse_layernorm),
    ("fuse_swish", fuse_swish),
    ("fold_affine_into_next", fold_affine_into_next),
    ("fuse_activation", fuse_activation),
    ("eliminate_dead_code", eliminate_dead_code),
]


def optimize(net: Net, stats: dict[str, int] | None = None) -> Net:
    """Run every pass in ``PASSES`` on ``net.main`` (in place) and return ``net``.

    ``stats``, when given, receives the number of rewrites of each pass.
    """
    keep = subgraph_names(net)
    for name, fn in PASSES:
        n = fn(net.main, keep)
        if stats is not None:
            stats[name] = stats.get(name, 0) + n
    return net


def op_counts(net: Net) -> Counter:
    """Op type -> number of ops in the main graph."""
    return Counter(op.type for op in net.main.ops)

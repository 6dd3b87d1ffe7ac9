"""Graph optimisations on a converted Net (each a small pass; ``optimize`` runs them in order)."""

from __future__ import annotations

from mnnpy.ir import Net

PASSES: list = []


def optimize(net: Net) -> Net:
    """Run every pass in ``PASSES`` on ``net.main`` (in place) and return ``net``."""
    for p in PASSES:
        p(net)
    return net

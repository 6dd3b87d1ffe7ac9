"""Graph optimisation passes, each ``fn(graph) -> int`` (number of rewrites), run by ``optimize``."""

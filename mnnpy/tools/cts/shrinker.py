"""Shrink a failing spec to a small reproduction (delta debugging, after Zeller's ddmin:
keep a change while the spec still fails the same way).

A candidate is kept when onnxruntime still runs it (it is valid) and the backend still
fails with the same ``Outcome.signature`` (a mismatch stays a mismatch; an error or crash
keeps its exception class). The passes, repeated until none changes anything or the
budget of attempts is spent:

1. keep one failing output (and drop the nodes nothing reads any more);
2. cut: a tensor a node reads becomes a graph input holding the reference's values for
   it (listed where it has at most ``LISTED`` elements, else drawn uniformly between its
   reference minimum and maximum, so domain guards still hold), which drops the nodes
   that only fed it; the cut nearest the failure is tried first;
3. bypass: a node whose output has its first input's dtype and shape is removed and its
   readers read that input;
4. drop each attribute (its default applies);
5. shrink the dims of drawn inputs and constants (to 1, else halved).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mnnpy.tools.cts import spec as specs
from mnnpy.tools.cts.judge import Outcome, reference, run_backend

LISTED = 256  # a cut tensor up to this many elements keeps its exact values


class Shrinker:
    """Shrinks one failing spec on one backend (``run``); counts its attempts."""

    def __init__(self, spec: dict, backend: str, outcome: Outcome, budget: int = 300, progress: Callable | None = None):
        self.backend, self.target, self.budget, self.attempts = backend, outcome.signature, budget, 0
        self.progress = progress
        self.spec, self.outcome = spec, outcome
        self.ref = reference(spec)

    def attempt(self, cand: dict) -> bool:
        """Whether ``cand`` is valid and fails as the original did; if so it becomes the current spec."""
        if self.attempts >= self.budget:
            return False
        self.attempts += 1
        if self.progress:
            self.progress()
        prune(cand)
        if not cand["nodes"]:
            return False
        try:
            ref = reference(cand)
        except Exception:  # noqa: BLE001 - invalid candidate
            return False
        out = run_backend(cand, self.backend, ref)
        if out.signature != self.target:
            return False
        self.spec, self.ref, self.outcome = cand, ref, out
        return True

    def run(self) -> tuple[dict, Outcome]:
        """The smallest failing spec found and its outcome."""
        changed = True
        while changed and self.attempts < self.budget:
            changed = self.outputs() | self.cuts() | self.bypasses() | self.attributes() | self.shapes()
        return self.spec, self.outcome

    def outputs(self) -> bool:
        failing = self.outcome.failing or self.spec["outputs"]
        if len(self.spec["outputs"]) == 1:
            return False
        return any(self.attempt({**specs.clone(self.spec), "outputs": [o]}) for o in failing)

    def cuts(self) -> bool:
        changed = False
        i = len(self.spec["nodes"]) - 1
        while i >= 0:
            nodes = self.spec["nodes"]
            if i < len(nodes):
                made = {o for n in nodes for o in n["outputs"]}
                fed = sorted(t for t in specs.reads(nodes[i]) if t in made)
                if fed and self.attempt(cut(self.spec, fed, self.ref.values)):
                    changed, i = True, len(self.spec["nodes"])
                elif len(fed) > 1:
                    for t in fed:
                        if self.attempt(cut(self.spec, [t], self.ref.values)):
                            changed = True
                            break
            i -= 1
        return changed

    def bypasses(self) -> bool:
        changed = False
        for i in reversed(range(len(self.spec["nodes"]))):
            nodes = self.spec["nodes"]
            if i >= len(nodes) or not nodes[i]["inputs"] or len(nodes[i]["outputs"]) != 1:
                continue
            src, out = nodes[i]["inputs"][0], nodes[i]["outputs"][0]
            a, b = self.ref.values.get(src), self.ref.values.get(out)
            if a is None or b is None or a.dtype != b.dtype or a.shape != b.shape:
                continue
            changed |= self.attempt(bypass(self.spec, i))
        return changed

    def attributes(self) -> bool:
        changed = False
        for i, node in enumerate(self.spec["nodes"]):
            for key in [k for k, v in node["attrs"].items() if not (isinstance(v, dict) and "graph" in v)]:
                cand = specs.clone(self.spec)
                if i < len(cand["nodes"]) and key in cand["nodes"][i]["attrs"]:
                    del cand["nodes"][i]["attrs"][key]
                    changed |= self.attempt(cand)
        return changed

    def shapes(self) -> bool:
        changed = False
        for kind in ("inputs", "constants"):
            for j in range(len(self.spec[kind])):
                for d in range(len(self.spec[kind][j]["shape"]) if j < len(self.spec[kind]) else 0):
                    entry = self.spec[kind][j]
                    size = entry["shape"][d]
                    if "values" in entry or size <= 1:
                        continue
                    for smaller in dict.fromkeys((1, size // 2)):
                        cand = specs.clone(self.spec)
                        cand[kind][j]["shape"][d] = smaller
                        if self.attempt(cand):
                            changed = True
                            break
        return changed


def prune(spec: dict) -> None:
    """Drop (in place) the nodes no output depends on, and unused inputs and constants."""
    needed = set(spec["outputs"])
    keep = []
    for node in reversed(spec["nodes"]):
        if any(o in needed for o in node["outputs"]):
            keep.append(node)
            needed |= specs.reads(node)
    spec["nodes"] = keep[::-1]
    spec["inputs"] = [e for e in spec["inputs"] if e["name"] in needed]
    spec["constants"] = [e for e in spec["constants"] if e["name"] in needed]
    if "output_types" in spec:
        spec["output_types"] = {k: v for k, v in spec["output_types"].items() if k in spec["outputs"]}


def cut(spec: dict, tensors: list[str], values: dict) -> dict:
    """A copy of ``spec`` where each of ``tensors`` is a graph input holding (or drawn like)
    its reference values; a node still needed for other outputs keeps a renamed one."""
    cand = specs.clone(spec)
    for t in tensors:
        v = np.asarray(values[t])
        entry = {"name": t, "dtype": str(v.dtype), "shape": list(v.shape)}
        if v.size <= LISTED or v.dtype == bool:
            entry["values"] = v.reshape(-1).tolist()
        elif np.issubdtype(v.dtype, np.floating):
            finite = v[np.isfinite(v)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
            entry.update(dist="uniform", low=lo, high=hi)
        else:
            entry.update(dist="uniform", low=int(v.min()), high=int(v.max()))
        cand["inputs"].append(entry)
        for node in cand["nodes"]:
            node["outputs"] = [f"{o}_unused" if o == t else o for o in node["outputs"]]
    return cand


def bypass(spec: dict, i: int) -> dict:
    """A copy of ``spec`` without node ``i``: what read its output reads its first input."""
    cand = specs.clone(spec)
    node = cand["nodes"].pop(i)
    src, out = node["inputs"][0], node["outputs"][0]
    rename(cand["nodes"], out, src)
    cand["outputs"] = list(dict.fromkeys(src if o == out else o for o in cand["outputs"]))
    if "output_types" in cand and out in cand["output_types"]:
        cand["output_types"][src] = cand["output_types"].pop(out)
    return cand


def rename(nodes: list[dict], old: str, new: str) -> None:
    """Every read of ``old`` in ``nodes`` (bodies included) reads ``new``."""
    for n in nodes:
        n["inputs"] = [new if x == old else x for x in n["inputs"]]
        for body in specs.bodies(n):
            rename(body["nodes"], old, new)
            for o in body["outputs"]:
                if o["name"] == old:
                    o["name"] = new


def shrink(
    spec: dict, backend: str, outcome: Outcome, budget: int = 300, progress: Callable | None = None
) -> tuple[dict, Outcome]:
    """The smallest spec found (within ``budget`` attempts) that still fails on ``backend``
    as ``outcome`` says ``spec`` did, and its outcome. ``progress``: called per attempt."""
    return Shrinker(specs.clone(spec), backend, outcome, budget, progress).run()

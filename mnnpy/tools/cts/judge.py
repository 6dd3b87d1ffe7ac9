"""Run a spec on onnxruntime (the reference) and on an mnnpy backend, and judge the outputs.

Tolerances are DESIGN.md's (``mnnpy.tools.tolerances``), per op: ``EXACT`` for data
movement, integer and bool results and the float ops that select a value rather than
compute one (``Relu``, ``Max``, ``MaxPool``, ``ReduceMax``, ``Where``, nearest ``Resize``...),
``ACCUMULATE`` for ``ACCUMULATING`` ops, ``ELEMENTWISE`` for the other float ops. A graph
output's tolerance follows the ops of its cone (every op it depends on):

    atol = T.atol * n * s * a,   rtol = T.rtol * n

with ``T`` the loosest tolerance of the cone's ops, ``n`` the number of computing (non-exact)
ops on its longest path from the inputs (a Loop counts its body ``trip count`` times, an If
its longer branch) and ``s = max(1, largest |value| of any float tensor in the cone)``
(read from the reference run). The reasoning is first-order error propagation: each op
may add its own tolerance's worth of error, relative to the size of what it reads, and a
chain adds them up; ``s`` makes the absolute part relative to the cone's largest value
(``a - b`` of two values near 100 may lose what 100's rounding holds). ``a`` is the
largest product of the amplifications (``amplification``) of the cone's ops along a path:
a normalisation divides what its input's rounding left by the standard deviation of its
group, a division by its denominator, which the reference run shows. An output whose cone
holds only exact ops (``n = 0``) must be equal bit for bit.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import onnx

from mnnpy.errors import MnnpyError
from mnnpy.tools.cts import spec as specs
from mnnpy.tools.tolerances import ACCUMULATE, ELEMENTWISE, EXACT

ACCUMULATING = {
    "Conv", "ConvTranspose", "Gemm", "MatMul", "AveragePool", "LpPool", "GlobalAveragePool", "Softmax", "LogSoftmax",
    "LayerNormalization", "BatchNormalization", "InstanceNormalization", "LpNormalization", "MeanVarianceNormalization",
    "LRN", "CumSum", "Resize", "Mean", "Sum", "Einsum",
    *(f"Reduce{r}" for r in ("Sum", "Mean", "Prod", "L1", "L2", "SumSquare", "LogSumExp", "LogSum")),
}  # fmt: skip
SELECTING = {
    "Relu", "Abs", "Neg", "Max", "Min", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Where", "Clip", "Cast",
    "Floor", "Ceil", "Round", "Sign", "ThresholdedRelu", "Hardmax", "TopK", "ArgMax", "ArgMin", "Identity", "Reshape",
    "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Concat", "Split", "Gather", "GatherElements", "Pad",
    "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Trilu", "GatherND", "OneHot", "Shape", "Size", "ConstantOfShape",
    "Compress", "ReverseSequence", "Range",
}  # fmt: skip
CLASSES = {"exact": EXACT, "elementwise": ELEMENTWISE, "accumulate": ACCUMULATE}  # loosest last
RANK = {name: i for i, name in enumerate(CLASSES)}
STATUSES = ("pass", "mismatch", "error", "crash", "invalid")


@dataclass
class Reference:
    """A spec's ONNX model, its feeds, and every main-graph tensor's reference value."""

    model: onnx.ModelProto
    feeds: dict
    values: dict
    seconds: float = 0.0


@dataclass
class Outcome:
    """One spec on one backend. ``status``: ``pass``, ``mismatch`` (an output off its
    tolerance, or of another shape or dtype), ``error`` (an ``MnnpyError`` on a graph
    onnxruntime runs), ``crash`` (any other exception), ``invalid`` (the checker or
    onnxruntime refused the graph: a generator fault, not the engine's). ``failing``: the
    outputs off; ``worst``: the largest ``|actual - expected| / (atol + rtol*|expected|)``
    (above 1 is a mismatch); ``placement``: backend name -> op type -> ops that ran there."""

    backend: str
    status: str
    detail: str = ""
    failing: list = field(default_factory=list)
    worst: float = 0.0
    placement: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def signature(self) -> str:
        """What kind of failure this is (the shrinker keeps it): the status, and for an
        error or crash the exception's class."""
        return self.status if self.status in ("pass", "mismatch", "invalid") else f"{self.status}:{self.detail.split(':')[0]}"


def reference(spec: dict) -> Reference:
    """Check the spec's model with ``onnx.checker`` (full check) and run it on onnxruntime
    (one thread, graph optimisations off, every main-graph tensor an output). Raises
    whatever the checker or onnxruntime raise on an invalid graph."""
    from mnnpy.apps.reference import onnxruntime_session

    start = time.perf_counter()
    outputs = set(spec["outputs"])
    extra = [o for n in spec["nodes"] for o in n["outputs"] if o and o not in outputs]
    model = specs.to_model(spec)
    onnx.checker.check_model(model, full_check=True)
    wide = specs.to_model(spec, extra)
    # quiet: an invalid candidate's error is an outcome, not a log line
    session = onnxruntime_session(wide.SerializeToString(), 1, optimize=False, quiet=True)
    feeds = specs.feeds(spec)
    got = session.run(None, feeds)
    values = {e["name"]: specs.entry_array(spec, e) for e in spec["constants"]}
    values.update(feeds)
    values.update(zip([*spec["outputs"], *extra], got))
    return Reference(model, feeds, values, time.perf_counter() - start)


def op_class(node: dict) -> str:
    """The tolerance class (a key of ``CLASSES``) of one node's float results (see the module doc)."""
    op = node["op"]
    if op in ("If", "Loop"):
        return max((op_class(n) for b in specs.bodies(node) for n in b["nodes"]), key=RANK.get, default="exact")
    if op == "Resize":
        return "exact" if node["attrs"].get("mode", "nearest") == "nearest" else "accumulate"
    if op in ("ScatterElements", "ScatterND"):  # distinct indices: one value or one rounding per element
        return "exact" if node["attrs"].get("reduction", "none") in ("none", "max", "min") else "elementwise"
    return "exact" if op in SELECTING else "accumulate" if op in ACCUMULATING else "elementwise"


def op_depth(node: dict, spec: dict) -> int:
    """Computing ops ``node`` stands for on a path: 0 for an exact op, 1 for another, an If
    its longer branch's, a Loop its body's times its trip count (a constant)."""
    op = node["op"]
    if op in ("If", "Loop"):
        depth = max((sum(op_depth(n, spec) for n in b["nodes"]) for b in specs.bodies(node)), default=0)
        if op == "Loop":
            trips = next((c.get("values", [1])[0] for c in spec["constants"] if c["name"] == node["inputs"][0]), 1)
            depth *= max(1, int(trips))
        return depth
    return 0 if op_class(node) == "exact" else 1


def tolerances(spec: dict, values: dict) -> dict[str, tuple[float, float]]:
    """``(atol, rtol)`` of every tensor of the main graph (see the module doc); integer and
    bool tensors ``(0, 0)``."""
    cone = {}  # tensor -> (loosest tolerance, path depth, scale, amplification)
    for name, v in values.items():
        cone[name] = ("exact", 0, _scale(v), 1.0)
    for node in spec["nodes"]:
        reads = [cone[i] for i in specs.reads(node) if i in cone]
        tol = max([op_class(node), *(r[0] for r in reads)], key=RANK.get)
        depth = max([0, *(r[1] for r in reads)]) + op_depth(node, spec)
        scale = max([1.0, *(r[2] for r in reads)])
        amp = max([1.0, *(r[3] for r in reads)]) * amplification(node, values)
        for o in node["outputs"]:
            if o:
                cone[o] = (tol, depth, max(scale, _scale(values.get(o))), amp)
    out = {}
    for name, (tol, depth, scale, amp) in cone.items():
        v = values.get(name)
        if v is None or not np.issubdtype(np.asarray(v).dtype, np.floating) or depth == 0:
            out[name] = (0.0, 0.0)
        else:
            out[name] = (CLASSES[tol]["atol"] * depth * scale * amp, CLASSES[tol]["rtol"] * depth)
    return out


MAX_AMPLIFICATION = 1e6


def amplification(node: dict, values: dict) -> float:
    """How much ``node`` may magnify an absolute error of its input, from the reference
    values (1 where it does not): a normalisation by ``1/std`` of its smallest group
    (LayerNormalization, InstanceNormalization, MeanVarianceNormalization; LpNormalization
    by ``1/norm``), Div by ``1/min |denominator|``, Reciprocal by ``1/min x^2``, Log by
    ``1/min |x|``, Sqrt by ``1/(2 sqrt(min x))``. At most ``MAX_AMPLIFICATION``."""
    op, attrs = node["op"], node["attrs"]
    x = values.get(node["inputs"][0]) if node["inputs"] else None
    if x is None or not np.issubdtype(np.asarray(x).dtype, np.floating) or np.asarray(x).size == 0:
        return 1.0
    x = np.asarray(x, np.float64)
    rank = x.ndim
    if op in ("LayerNormalization", "InstanceNormalization", "MeanVarianceNormalization"):
        if op == "LayerNormalization":
            axes = tuple(range(attrs.get("axis", -1) % rank, rank))
        elif op == "InstanceNormalization":
            axes = tuple(range(2, rank))
        else:
            axes = tuple(attrs.get("axes", [0, 2, 3]))
        eps = attrs.get("epsilon", 1e-5) if op != "MeanVarianceNormalization" else 0.0
        tiny = float(np.sqrt(x.var(axis=axes).min() + eps))
    elif op == "LpNormalization":
        tiny = float(np.linalg.norm(x, ord=attrs.get("p", 2), axis=attrs.get("axis", -1)).min())
    elif op == "Div" and node["inputs"][1] in values:
        tiny = float(np.abs(np.asarray(values[node["inputs"][1]], np.float64)).min())
    elif op in ("Reciprocal", "Log", "Sqrt"):
        low = float(np.abs(x).min())
        tiny = {"Reciprocal": low * low, "Log": low, "Sqrt": 2 * np.sqrt(low)}[op]
    else:
        return 1.0
    return min(MAX_AMPLIFICATION, max(1.0, 1.0 / tiny if tiny > 0 else MAX_AMPLIFICATION))


def _scale(v) -> float:
    if v is None or not np.issubdtype(np.asarray(v).dtype, np.floating) or np.asarray(v).size == 0:
        return 0.0
    finite = np.abs(np.asarray(v, np.float64))
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if finite.size else 0.0


def compare(expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float) -> float:
    """The largest ``|actual - expected| / (atol + rtol*|expected|)`` (``inf`` where a value
    differs under a zero tolerance, where NaN or inf patterns differ, or shapes or dtypes
    do); 0 where equal."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.shape != a.shape or e.dtype != a.dtype:
        return math.inf
    if e.size == 0:
        return 0.0
    if not np.issubdtype(e.dtype, np.floating):
        return 0.0 if np.array_equal(e, a) else math.inf
    same = (e == a) | (np.isnan(e) & np.isnan(a))
    if same.all():
        return 0.0
    if not (np.isfinite(e) == np.isfinite(a)).all() or (atol == 0 and rtol == 0):
        return math.inf
    diff = np.abs(e.astype(np.float64) - a)[~same]
    return float((diff / (atol + rtol * np.abs(e.astype(np.float64))[~same])).max())


def placement(session) -> dict[str, Counter]:
    """Backend name -> Counter of the op types that ran on it in ``session``'s last run
    (bodies of control-flow ops included; ops on the host as ``host``)."""
    out: dict[str, Counter] = {}

    def walk(runner):
        plans = runner.segments or ([runner.plan] if runner.plan is not None else [])
        for plan in plans:
            sched = plan.schedule
            for i, b in sched.backend_of.items():
                out.setdefault(sched.backend_names[b], Counter())[runner.graph.ops[i].type] += 1
            if plan.sizes.dynamic is not None:
                out.setdefault("host", Counter())[runner.graph.ops[plan.sizes.dynamic].type] += 1
        for body in runner.bodies().values():
            walk(body)

    walk(session.runner)
    return out


def run_backend(spec: dict, backend: str, ref: Reference) -> Outcome:
    """Run ``spec`` on mnnpy's ``backend`` (a GPU backend with the CPU as fallback; converted
    through the file format) and judge it against ``ref``. The session runs twice on copies
    of the feeds: the second run must give the first's outputs bit for bit and neither may
    change its inputs (else a ``mismatch`` saying so)."""
    import mnnpy
    from mnnpy.converter import convert

    start = time.perf_counter()
    try:  # NumPy's warnings off: x / 0 is inf by IEEE 754 (as ONNX and onnxruntime have it), judged as a value
        with np.errstate(all="ignore"):
            where = backend if backend == "cpu" else [backend, "cpu"]
            session = mnnpy.Interpreter(convert(ref.model)).create_session(backend=where)
            feeds = {k: v.copy() for k, v in ref.feeds.items()}
            got = {k: np.array(v, copy=True) for k, v in session.run(feeds).items()}
            again = session.run(feeds)
    except MnnpyError as e:
        return Outcome(backend, "error", f"{type(e).__name__}: {e}"[:500], seconds=time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 - anything else is what the CTS looks for
        return Outcome(backend, "crash", f"{type(e).__name__}: {e}"[:500], seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    tols = tolerances(spec, ref.values)
    failing, worst, details = [], 0.0, []
    for name in spec["outputs"]:
        e, a = ref.values[name], got.get(name)
        atol, rtol = tols.get(name, (0.0, 0.0))
        r = math.inf if a is None else compare(e, a, atol, rtol)
        worst = max(worst, r)
        if r > 1:
            failing.append(name)
            details.append(_describe(name, e, a, atol, rtol))
    for name in spec["outputs"]:
        if name in got and not np.array_equal(got[name], again.get(name), equal_nan=True):
            failing.append(name)
            details.append(f"{name}: the second run differs from the first")
    details += [f"input {k} changed by the run" for k, v in feeds.items() if not np.array_equal(v, ref.feeds[k], equal_nan=True)]
    status = "mismatch" if details else "pass"
    return Outcome(backend, status, "; ".join(details)[:1000], failing, worst, placement(session), seconds)


def _describe(name, e, a, atol, rtol) -> str:
    if a is None:
        return f"{name}: missing"
    a = np.asarray(a)
    if e.shape != a.shape or e.dtype != a.dtype:
        return f"{name}: {a.dtype}{list(a.shape)} where onnxruntime gives {e.dtype}{list(e.shape)}"
    if not np.issubdtype(e.dtype, np.floating) or e.size == 0:
        return f"{name}: {int((e != a).sum())} of {e.size} values differ"
    diff = np.abs(e.astype(np.float64) - a)
    diff[np.isnan(diff)] = np.inf
    i = np.unravel_index(int(np.argmax(diff)), e.shape)
    where = list(map(int, i))
    return f"{name}: max |diff| {diff[i]:.3g} at {where} ({float(a[i])!r} vs {float(e[i])!r}; atol {atol:.2g}, rtol {rtol:.2g})"


def judge(spec: dict, backends: list[str]) -> list[Outcome]:
    """``spec`` on every backend of ``backends``, against one reference run. A graph the
    checker or onnxruntime refuses gives ``invalid`` outcomes."""
    try:
        ref = reference(spec)
    except Exception as e:  # noqa: BLE001 - the checker's and onnxruntime's errors: the graph is invalid
        return [Outcome(b, "invalid", f"{type(e).__name__}: {e}"[:500]) for b in backends]
    return [run_backend(spec, b, ref) for b in backends]

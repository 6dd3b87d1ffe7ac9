"""Random-graph differential tests (issue 12, item 3; ``mnnpy.tools.cts``).

A bounded, seeded series of random graphs per backend (``SUITE``) must match onnxruntime
within DESIGN.md's tolerances; every saved spec in ``tests/cts_specs/`` (shrunk
reproductions of what the CTS found) is replayed on every backend; failures left are listed
with their reasons in ``tests/cts_expected_failures.json``. The rest checks the tool itself:
the generator, the judge (it must see a wrong value), the shrinker and the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mnnpy.errors import ModelFormatError
from mnnpy.tools.cts import expected as expectations
from mnnpy.tools.cts import generate, judge, shrink
from mnnpy.tools.cts import spec as specs
from mnnpy.tools.cts.__main__ import main
from mnnpy.tools.cts.judge import Outcome, reference, run_backend, tolerances
from mnnpy.tools.tolerances import ACCUMULATE, ELEMENTWISE
from tests.backend_compare import backends

HERE = Path(__file__).parent
SPECS = sorted((HERE / "cts_specs").glob("*.json"))
EXPECTED = HERE / "cts_expected_failures.json"
SEED = 2026  # the suite's series: graph i is generate(SEED, i)
SUITE = {"cpu": 100, "opencl": 30, "vulkan": 30}  # graphs per backend: 1-3 s each here (cold kernel caches: ~25 s in all)


def known() -> dict:
    return expectations.load(EXPECTED)


@pytest.mark.parametrize("backend", backends())
def test_random_graphs(backend):
    """``SUITE[backend]`` seeded graphs match onnxruntime (a listed graph may fail, with its
    reason); a GPU backend runs some of their ops itself."""
    failures, on_device = [], 0
    for i in range(SUITE[backend]):
        spec = generate(SEED, i)
        (out,) = judge(spec, [backend])
        on_device += sum(out.placement.get(backend, {}).values())
        if out.status != "pass" and not expectations.reason(known(), f"s{SEED}_g{i}", backend):
            failures.append(f"graph {i} ({', '.join(specs.op_types(spec))}): {out.status}: {out.detail}")
    assert not failures, "\n".join(failures)
    assert on_device > SUITE[backend]  # more than one op per graph on average ran on the backend asked for


def _spec_cases():
    return [pytest.param(p, b.values[0], id=f"{p.stem}-{b.id}", marks=b.marks) for p in SPECS for b in backends()]


@pytest.mark.parametrize("path,backend", _spec_cases())
def test_saved_spec(path, backend):
    """A saved reproduction passes, or mismatches as the expected-failures list says (a
    listed one that passes fails the test: take it off the list; one that raises is a new
    defect)."""
    reason = expectations.reason(known(), path.stem, backend)
    (out,) = judge(specs.load(path), [backend])
    assert out.status != "invalid", out.detail
    if reason:
        assert out.status != "pass", f"{path.stem} passes on {backend}: remove it from {EXPECTED.name}"
        assert out.status == "mismatch", f"{out.status}: {out.detail}"
        pytest.xfail(reason)
    assert out.status == "pass", f"{out.status}: {out.detail}"


def test_expected_failures_name_known_graphs():
    """Each entry names a saved spec or a graph of the suite, and a backend (or ``*``)."""
    stems = {p.stem for p in SPECS}
    suite = {f"s{SEED}_g{i}" for i in range(max(SUITE.values()))}
    for key, per_backend in known().items():
        assert key in stems | suite, key
        assert set(per_backend) <= {"cpu", "opencl", "vulkan", "*"}, key


def test_specs_are_small_text():
    """Saved specs are small reproductions: a few nodes, JSON text, data drawn in code."""
    for p in SPECS:
        spec = specs.load(p)
        assert specs.node_count(spec) <= 8 and p.stat().st_size < 20_000, p.name


# -- the generator -------------------------------------------------------------------------


def test_generator_is_seeded():
    """The same (seed, index) gives the same graph and data; another index another graph."""
    a, b, c = generate(7, 3), generate(7, 3), generate(7, 4)
    assert a == b and a != c
    for name, v in specs.feeds(a).items():
        np.testing.assert_array_equal(v, specs.feeds(b)[name])


def test_generator_covers_the_schemas():
    """Across 200 graphs: the op families of the brief, odd sizes, int and bool tensors,
    chains and fan-out, every graph valid (onnx.checker and onnxruntime)."""
    ops, dims, dtypes, fan_out = set(), set(), set(), 0
    for i in range(200):
        spec = generate(11, i)
        ref = reference(spec)  # raises where the checker or onnxruntime refuses it
        ops |= set(specs.op_types(spec))
        dims |= {d for v in ref.values.values() for d in np.shape(v)}
        dtypes |= {str(np.asarray(v).dtype) for v in ref.values.values()}
        reads = [t for n in spec["nodes"] for t in specs.reads(n)]
        fan_out += any(reads.count(t) > 1 for t in set(reads))
    wanted = {
        "Add", "Mul", "Div", "Sigmoid", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "Gemm", "MatMul",
        "ReduceSum", "ReduceMax", "Softmax", "LayerNormalization", "Reshape", "Transpose", "Slice", "Concat",
        "Split", "Gather", "Pad", "Resize", "Cast", "Equal", "Less", "And", "Not", "Where", "If", "Loop",
        "ScatterElements", "ScatterND", "GatherND", "OneHot", "Shape", "Einsum", "IsInf",
    }  # fmt: skip
    assert wanted <= ops, wanted - ops
    assert {1, 3, 7, 13, 127} <= dims
    assert {"float32", "int32", "int64", "bool"} <= dtypes
    assert fan_out > 50


def test_generator_avoids_ill_defined_ties():
    """The symmetric-resize ties whose pick onnxruntime and ONNX's reference implementation
    disagree on (``resize_symmetric_nearest_tie``) are seen, and ordinary ones are not."""
    from mnnpy.tools.cts.movement import _symmetric_tie

    assert _symmetric_tie([7], [4], [0.6], None)  # coordinate 0.5: round_prefer_floor's tie
    assert not _symmetric_tie([7], [4], [0.6], "floor")  # 0.5 is no tie of floor
    assert not _symmetric_tie([7], [14], [2.0], None)  # i/2 - 0.25: never a half
    assert not _symmetric_tie([7], [7], [1.0], None)  # unchanged axis


# -- the judge -----------------------------------------------------------------------------


def _chain():
    """x (1, 3, 7, 7) -> Conv -> Tanh -> Add 1 -> y; a Cast to int64 of x's Relu -> z."""
    return {
        "seed": 1, "graph": 0, "opset": 17,
        "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3, 7, 7], "dist": "normal"}],
        "constants": [
            {"name": "w", "dtype": "float32", "shape": [4, 3, 3, 3], "dist": "normal", "scale": 0.2},
            {"name": "one", "dtype": "float32", "shape": [], "values": [1.0]},
        ],
        "nodes": [
            {"op": "Conv", "inputs": ["x", "w"], "outputs": ["c"], "attrs": {"pads": [1, 1, 1, 1]}},
            {"op": "Tanh", "inputs": ["c"], "outputs": ["t"], "attrs": {}},
            {"op": "Add", "inputs": ["t", "one"], "outputs": ["y"], "attrs": {}},
            {"op": "Relu", "inputs": ["x"], "outputs": ["r"], "attrs": {}},
            {"op": "Cast", "inputs": ["r"], "outputs": ["z"], "attrs": {"to": 7}},
        ],
        "outputs": ["y", "z", "r"],
    }  # fmt: skip


def test_tolerance_follows_the_cone():
    """y's cone: Conv (accumulating), Tanh, Add: 3 computing ops, ACCUMULATE's bound times 3,
    the absolute part times the cone's largest value; Relu's output and integers: exact."""
    spec = _chain()
    ref = reference(spec)
    tol = tolerances(spec, ref.values)
    scale = max(1.0, *(float(np.abs(ref.values[t]).max()) for t in ("x", "w", "c", "t", "y")))
    assert tol["y"] == pytest.approx((ACCUMULATE["atol"] * 3 * scale, ACCUMULATE["rtol"] * 3))
    assert tol["t"][1] == pytest.approx(ACCUMULATE["rtol"] * 2)
    assert tol["r"] == (0.0, 0.0) and tol["z"] == (0.0, 0.0)
    assert ELEMENTWISE["rtol"] < ACCUMULATE["rtol"]


@pytest.mark.parametrize("output,delta", [("y", 2e-3), ("r", 1e-7), ("z", 1)])
def test_judge_sees_a_wrong_value(output, delta):
    """One value of the reference moved past the tolerance (or at all, where exact) is a mismatch."""
    spec = _chain()
    ref = reference(spec)
    assert run_backend(spec, "cpu", ref).status == "pass"
    moved = ref.values[output].copy()
    moved.flat[5] += np.asarray(delta, moved.dtype)
    ref.values[output] = moved
    out = run_backend(spec, "cpu", ref)
    assert out.status == "mismatch" and out.failing == [output], out.detail


@pytest.mark.parametrize("fault", ["output", "input"])
def test_judge_sees_a_run_that_is_not_repeatable(monkeypatch, fault):
    """A second run whose output differs from the first's, or a run that writes into its
    input, is a mismatch naming it."""
    from mnnpy.session import Session

    real, calls = Session.run, []

    def run(self, feeds, *args, **kwargs):
        calls.append(1)
        out = real(self, feeds, *args, **kwargs)
        if len(calls) == 2 and fault == "output":
            out["y"] = out["y"] + 1
        if fault == "input":
            feeds["x"][0, 0, 0, 0] += 1
        return out

    monkeypatch.setattr(Session, "run", run)
    spec = _chain()
    out = run_backend(spec, "cpu", reference(spec))
    wanted = "y: the second run differs" if fault == "output" else "input x changed by the run"
    assert out.status == "mismatch" and wanted in out.detail, out.detail


def test_judge_reports_invalid_and_errors():
    """A graph onnxruntime refuses is ``invalid`` (not the engine's fault); an engine error on
    a valid graph is ``error``, naming the exception."""
    spec = _chain()
    spec["nodes"][0]["attrs"]["kernel_shape"] = [5, 5]  # contradicts the weights
    assert judge(spec, ["cpu"])[0].status == "invalid"
    ok = _chain()
    ref = reference(ok)
    ref.feeds = {"x": ref.feeds["x"][:, :2]}  # a wrong input shape: mnnpy raises InputError
    out = run_backend(ok, "cpu", ref)
    assert out.status == "error" and out.detail.startswith("InputError"), out.detail


# -- the shrinker --------------------------------------------------------------------------


def test_shrink_finds_the_failing_op(monkeypatch):
    """With a backend that 'fails' on any graph holding a Sin, shrinking a 10-op graph
    leaves the Sin alone, reading a small input, without the attributes it can lose."""
    from mnnpy.tools.cts import shrinker as shrinking

    real = shrinking.run_backend

    def fake(spec, backend, ref):
        out = real(spec, backend, ref)
        sins = [n["outputs"][0] for n in spec["nodes"] if n["op"] == "Sin"]
        return Outcome(backend, "mismatch", "Sin", sins[-1:], 2.0) if sins else out

    monkeypatch.setattr(shrinking, "run_backend", fake)
    graphs = (generate(3, i) for i in range(300))  # a Sin in the main graph, not only in a body
    spec = next(s for s in graphs if any(n["op"] == "Sin" for n in s["nodes"]) and len(s["nodes"]) >= 10)
    ref = reference(spec)
    small, out = shrink(spec, "cpu", fake(spec, "cpu", ref))
    assert out.status == "mismatch" and [n["op"] for n in small["nodes"]] == ["Sin"], small["nodes"]
    assert all(d <= 1 or "values" in e for e in small["inputs"] for d in e["shape"]), small["inputs"]


def test_shrunk_spec_round_trips(tmp_path):
    """save/load keep a spec; a file that is not a spec raises ModelFormatError naming it."""
    spec = generate(5, 1)
    assert specs.load(specs.save(spec, tmp_path / "a.json")) == spec
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(ModelFormatError, match="b.json"):
        specs.load(tmp_path / "b.json")
    (tmp_path / "c.json").write_text('{"x": {"cpu": 3}}')
    with pytest.raises(ModelFormatError, match="c.json"):
        expectations.load(tmp_path / "c.json")
    with pytest.raises(ModelFormatError, match="dtype"):
        specs.entry_array(spec, {"name": "q", "dtype": "complex64", "shape": [1]})


# -- the command line ----------------------------------------------------------------------


def test_command_line(tmp_path, capsys):
    """``python -m mnnpy.tools.cts``: a summary per backend and a JSON file; replaying a
    failing spec exits 1 unless the expected-failures file lists it; bad arguments exit 2."""
    summary = tmp_path / "s.json"
    assert main(["--graphs", "4", "--seed", "9", "--backend", "cpu", "--json", str(summary)]) == 0
    data = json.loads(summary.read_text())
    assert data["backends"]["cpu"]["counts"]["pass"] == 4 and data["failures"] == []
    assert "cpu: pass 4" in capsys.readouterr().out
    listed = [p for p in SPECS if "*" in known().get(p.stem, {})]
    if listed:
        assert main(["--replay", str(listed[0]), "--backend", "cpu"]) == 1
        assert main(["--replay", str(listed[0]), "--backend", "cpu", "--expected", str(EXPECTED)]) == 0
    with pytest.raises(SystemExit) as e:
        main(["--graphs", "x"])
    assert e.value.code == 2

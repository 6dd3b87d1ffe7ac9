"""ONNX backend node test cases (generated in memory by ``onnx``), grouped by the op they test.

A case's op is the type of its model's node (a case named ``*_expanded`` tests its base op
through a function expansion; it is grouped under the base op). Each mnnpy backend has a
file ``<backend>_expected_failures.json`` here: ``{case name: reason}``.

A node test feeds its weights as graph inputs (a Conv's ``W``, a Clip's bounds, a Gather's
indices), where a GPU backend takes constants only. ``with_constant_inputs`` gives the case
with such inputs as initializers (``constant_inputs`` says which): the same values, so the
same expected outputs; the GPU backends run that form (``run_case(..., constants=True)``).
"""

from __future__ import annotations

import copy
import functools
import json
import pathlib
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

HERE = pathlib.Path(__file__).resolve().parent


@functools.cache
def all_cases():
    """Every node test case of the installed onnx (about 1,900; ~5 s to generate)."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(load_model_tests(kind="node"))


def case_op(case) -> str:
    """The op a case tests: its model's node type; for ``_expanded`` cases, the base case's op."""
    name = case.name
    if "_expanded" in name:
        base = name.split("_expanded")[0]
        for c in all_cases():
            if c.name == base:
                return case_op(c)
    nodes = case.model.graph.node
    types = [n.op_type for n in nodes]
    return types[0] if len(set(types)) == 1 else types[-1]


@functools.cache
def cases_by_op() -> dict[str, list]:
    """op type -> its cases."""
    out: dict[str, list] = {}
    for c in all_cases():
        out.setdefault(case_op(c), []).append(c)
    return out


def expected_failures(backend: str) -> dict[str, str]:
    """``{case name: reason}`` for ``backend`` (empty when the file does not exist)."""
    path = HERE / f"{backend}_expected_failures.json"
    return json.loads(path.read_text()) if path.exists() else {}


def fixed_inputs(case) -> dict[str, np.ndarray]:
    """Graph inputs that every data set of ``case`` feeds one and the same tensor (not a
    sequence): name -> that value. Inputs that already have an initializer are left out."""
    from mnnpy.onnx_backend import as_array

    g = case.model.graph
    initialized = {t.name for t in g.initializer}
    out = {}
    for k, vi in enumerate(g.input):
        values = [as_array(inputs[k]) if k < len(inputs) else None for inputs, _ in case.data_sets]
        if vi.name in initialized or not all(isinstance(v, np.ndarray) and v.dtype != object for v in values):
            continue
        first = values[0]
        if all(v.dtype == first.dtype and v.shape == first.shape and np.array_equal(v, first, equal_nan=True) for v in values):
            out[vi.name] = first
    return out


def _reads(node: onnx.NodeProto) -> list[str]:
    """Names ``node`` reads: its inputs, and every name read inside its bodies (outer scope)."""
    from mnnpy.converter.importer import _all_nodes

    names = [n for n in node.input if n]
    for a in node.attribute:
        for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
            names += [n for body_node in _all_nodes(g) for n in body_node.input if n]
    return names


def constant_inputs(case) -> dict[str, np.ndarray]:
    """The graph inputs of ``case`` that ``with_constant_inputs`` makes constants: name -> value.

    An input becomes a constant when every data set feeds it the same value (``fixed_inputs``)
    and it is not the data the graph computes on: not the first input of a top-level node,
    not a graph output, and not the last non-constant input of a node (that node, and the
    case with it, would fold into a constant at conversion: of such inputs of a node the
    largest stays an input). So a Conv's ``W`` and ``B``, a Clip's bounds, a Pow's exponent,
    an Add's ``B`` and a Reshape's shape become constants; their ``X`` or ``A`` stays an input.
    """
    g = case.model.graph
    fixed = fixed_inputs(case)
    for name in [o.name for o in g.output] + [n.input[0] for n in g.node if n.input]:
        fixed.pop(name, None)
    computed = {vi.name for vi in g.input if vi.name not in fixed}  # values known only at run
    for node in g.node:  # topological order (the ONNX checker's rule)
        reads = _reads(node)
        if not any(n in computed for n in reads):
            kept = [n for n in reads if n in fixed]
            if kept:
                name = max(kept, key=lambda n: fixed[n].size)
                del fixed[name]
                computed.add(name)
        if any(n in computed for n in reads):
            computed.update(node.output)
    return fixed


def with_constant_inputs(case) -> tuple[onnx.ModelProto, list]:
    """``(model, data_sets)``: ``case`` with its ``constant_inputs`` turned into initializers
    (removed from the graph inputs and from each data set's inputs); expected outputs as given."""
    constants = constant_inputs(case)
    model = copy.deepcopy(case.model)
    g = model.graph
    names = [vi.name for vi in g.input]
    kept = [vi for vi in g.input if vi.name not in constants]
    del g.input[:]
    g.input.extend(kept)
    g.initializer.extend(numpy_helper.from_array(v, n) for n, v in constants.items())
    data_sets = [([v for n, v in zip(names, inputs) if n not in constants], outputs) for inputs, outputs in case.data_sets]
    return model, data_sets


def prepare_case(case, backend: str = "cpu", constants: bool = False):
    """``(rep, data_sets)``: ``case``'s model converted and prepared on ``backend`` (an
    ``mnnpy.onnx_backend.MnnpyRep``) and the data sets to run it on (``constants``: in the form
    of ``with_constant_inputs``)."""
    from mnnpy.onnx_backend import MnnpyBackend

    model, data_sets = with_constant_inputs(case) if constants else (case.model, case.data_sets)
    return MnnpyBackend.prepare(model, backend=backend), data_sets


def check_case(case, rep, data_sets) -> None:
    """Run every data set through ``rep``; assert outputs match (case.rtol/atol)."""
    from mnnpy.onnx_backend import as_array

    for inputs, expected in data_sets:
        with np.errstate(all="ignore"):
            actual = rep.run(inputs)
        assert len(actual) == len(expected), f"{len(actual)} outputs, expected {len(expected)}"
        for k, (e, a) in enumerate(zip(expected, actual)):
            e = as_array(e)
            if isinstance(e, list):  # a sequence: element by element
                assert isinstance(a, list) and len(a) == len(e), (
                    f"output {k}: {type(a).__name__}, expected a sequence of {len(e)}"
                )
                for ei, ai in zip(e, a):
                    _check_equal(ei, ai, case, f"output {k}")
                continue
            _check_equal(e, a, case, f"output {k}")


def run_case(case, backend: str = "cpu", constants: bool = False):
    """``prepare_case`` then ``check_case``; returns the session (its runner holds the plans of
    the last run: where each op ran)."""
    rep, data_sets = prepare_case(case, backend, constants)
    check_case(case, rep, data_sets)
    return rep.session


def _check_equal(e: np.ndarray, a: np.ndarray, case, what: str) -> None:
    """``a`` has ``e``'s shape and dtype and matches it (floats within the case's rtol/atol)."""
    assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype}, expected {e.dtype}"
    if e.dtype.kind in "fc":
        np.testing.assert_allclose(a, e, rtol=case.rtol, atol=case.atol, err_msg=what)
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)

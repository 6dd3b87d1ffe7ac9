"""ONNX backend node test cases (generated in memory by ``onnx``), grouped by the op they test.

A case's op is the type of its model's node (a case named ``*_expanded`` tests its base op
through a function expansion; it is grouped under the base op). Each mnnpy backend has a
file ``<backend>_expected_failures.json`` here: ``{case name: reason}``.
"""

from __future__ import annotations

import functools
import json
import pathlib
import warnings

import numpy as np

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


def run_case(case, backend: str = "cpu") -> None:
    """Run every data set of ``case`` through mnnpy; assert outputs match (case.rtol/atol)."""
    from mnnpy.onnx_backend import MnnpyBackend, as_array

    rep = MnnpyBackend.prepare(case.model, backend=backend)
    for inputs, expected in case.data_sets:
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


def _check_equal(e: np.ndarray, a: np.ndarray, case, what: str) -> None:
    """``a`` has ``e``'s shape and dtype and matches it (floats within the case's rtol/atol)."""
    assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype}, expected {e.dtype}"
    if e.dtype.kind in "fc":
        np.testing.assert_allclose(a, e, rtol=case.rtol, atol=case.atol, err_msg=what)
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)

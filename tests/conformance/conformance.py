"""Shared logic of the per-backend ONNX node-test modules and of the conformance report.

A case is *selected* for a backend when the converter handles its op (``mnnpy.converter``
has a function for that ONNX op type). The CPU backend runs each case as ONNX gives it; a
GPU backend runs it with its fixed inputs as constants (``node_cases.with_constant_inputs``),
so that what the GPU takes runs there, and a pass counts for the GPU only where its ops ran
there (``placement``). Statuses (``STATUSES``):

- ``passed`` (CPU backend only);
- ``passed on the GPU``: every op that ran, ran on the GPU backend;
- ``passed with fallback``: some ops on the GPU, some on the CPU;
- ``passed on the CPU only``: no op on the GPU (the GPU does not count it);
- ``failed``; ``expected-fail`` (listed with its reason in ``<backend>_expected_failures.json``);
- ``not implemented`` (the converter has no function for the op: not selected).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.conformance.node_cases import all_cases, cases_by_op, check_case, expected_failures, prepare_case
from tests.conformance.placement import Placement, placement

PASSED, ON_GPU, WITH_FALLBACK, CPU_ONLY = "passed", "passed on the GPU", "passed with fallback", "passed on the CPU only"
FAILED, EXPECTED_FAIL, NOT_IMPLEMENTED = "failed", "expected-fail", "not implemented"
STATUSES = (PASSED, ON_GPU, WITH_FALLBACK, CPU_ONLY, FAILED, EXPECTED_FAIL, NOT_IMPLEMENTED)
PASSES = (PASSED, ON_GPU, WITH_FALLBACK, CPU_ONLY)


@dataclass(frozen=True)
class Outcome:
    """One case on one backend: ``status`` (one of ``STATUSES``), ``detail`` (the failure, or
    the expected failure's reason) and where its ops ran (a failure: those of the run that
    failed; none where conversion or preparation failed)."""

    status: str
    detail: str = ""
    placement: Placement = field(default_factory=Placement)


def implemented_ops() -> set[str]:
    """ONNX op types the converter turns into mnnpy ops."""
    from mnnpy.converter.registry import converters

    return set(converters())


def selected_cases() -> list:
    """Every node test case whose op is implemented, in a stable order."""
    ops = implemented_ops()
    return sorted((c for op, cs in cases_by_op().items() if op in ops for c in cs), key=lambda c: c.name)


_OUTCOMES: dict[tuple[str, str], Outcome] = {}  # (case name, backend) -> Outcome, once per process


def outcome(case, backend: str) -> Outcome:
    """The ``Outcome`` of ``case`` on ``backend`` (a GPU backend: with its fixed inputs as
    constants), computed once per process: the node-test modules and the report share it."""
    key = (case.name, backend)
    if key not in _OUTCOMES:
        _OUTCOMES[key] = _run(case, backend)
    return _OUTCOMES[key]


def _run(case, backend: str) -> Outcome:
    reason = expected_failures(backend).get(case.name)
    rep = None
    try:
        rep, data_sets = prepare_case(case, backend, constants=backend != "cpu")
        check_case(case, rep, data_sets)
    except Exception as e:  # noqa: BLE001 - every failure is an outcome here
        where = placement(rep.session) if rep is not None else Placement()
        if reason:
            return Outcome(EXPECTED_FAIL, reason, where)
        return Outcome(FAILED, f"{type(e).__name__}: {e}".splitlines()[0][:300], where)
    where = placement(rep.session)
    if reason:
        return Outcome(FAILED, f"passes but is listed as expected to fail ({reason})", where)
    return Outcome(classify(backend, where), placement=where)


def classify(backend: str, where: Placement) -> str:
    """The status of a case that passed on ``backend``, ops placed as ``where`` says: ``PASSED``
    on the CPU backend; on a GPU backend ``ON_GPU`` (ops on it, none on the CPU),
    ``WITH_FALLBACK`` (some on each) or ``CPU_ONLY`` (none on it)."""
    if backend == "cpu":
        return PASSED
    if not where.device:
        return CPU_ONLY
    return WITH_FALLBACK if where.cpu else ON_GPU


def node_tests(backend: str):
    """The two tests of a backend's node-test module (``test_onnx_node_<backend>.py``):
    every selected case (expected failures xfail with their reason, and fail once they
    pass), and a check that the expected-failure list names only selected cases."""
    cases = selected_cases()

    @pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])
    def test_node(case):
        result = outcome(case, backend)
        if result.status == EXPECTED_FAIL:
            pytest.xfail(result.detail)
        assert result.status in PASSES, result.detail

    def test_expected_failures_name_selected_cases():
        names = {c.name for c in cases}
        known = {c.name for c in all_cases()}
        stale = sorted(n for n in expected_failures(backend) if n not in names)
        assert not stale, f"listed but not selected (op not implemented or case unknown to onnx): {stale[:20]}"
        assert all(n in known for n in names)

    return test_node, test_expected_failures_name_selected_cases

"""Shared logic of the per-backend ONNX node-test modules and of the conformance report.

A case is *selected* for a backend when the converter handles its op (``mnnpy.converter``
has a function for that ONNX op type). Outcomes: ``passed``, ``failed``, ``expected-fail``
(listed with its reason in ``<backend>_expected_failures.json``), or ``not implemented``.
"""

from __future__ import annotations

import pytest

from tests.conformance.node_cases import all_cases, cases_by_op, expected_failures, run_case


def implemented_ops() -> set[str]:
    """ONNX op types the converter turns into mnnpy ops."""
    from mnnpy.converter.registry import converters

    return set(converters())


def selected_cases() -> list:
    """Every node test case whose op is implemented, in a stable order."""
    ops = implemented_ops()
    return sorted((c for op, cs in cases_by_op().items() if op in ops for c in cs), key=lambda c: c.name)


def outcome(case, backend: str) -> tuple[str, str]:
    """``(status, detail)`` of one case on ``backend``: passed, failed or expected-fail."""
    reason = expected_failures(backend).get(case.name)
    try:
        run_case(case, backend)
    except Exception as e:  # noqa: BLE001 - every failure is an outcome here
        return ("expected-fail", reason) if reason else ("failed", f"{type(e).__name__}: {e}".splitlines()[0][:300])
    return ("failed", f"passes but is listed as expected to fail ({reason})") if reason else ("passed", "")


def node_tests(backend: str):
    """The two tests of a backend's node-test module (``test_onnx_node_<backend>.py``):
    every selected case (expected failures xfail with their reason, and fail once they
    pass), and a check that the expected-failure list names only selected cases."""
    cases = selected_cases()

    @pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])
    def test_node(case):
        status, detail = outcome(case, backend)
        if status == "expected-fail":
            pytest.xfail(detail)
        assert status == "passed", detail

    def test_expected_failures_name_selected_cases():
        names = {c.name for c in cases}
        known = {c.name for c in all_cases()}
        stale = sorted(n for n in expected_failures(backend) if n not in names)
        assert not stale, f"listed but not selected (op not implemented or case unknown to onnx): {stale[:20]}"
        assert all(n in known for n in names)

    return test_node, test_expected_failures_name_selected_cases

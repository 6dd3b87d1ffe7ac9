"""Shared logic of the per-backend ONNX node-test modules and of the conformance report.

A case is *selected* for a backend when the converter handles its op (``mnnpy.converter``
has a function for that ONNX op type). Outcomes: ``passed``, ``failed``, ``expected-fail``
(listed with its reason in ``<backend>_expected_failures.json``), or ``not implemented``.
"""

from __future__ import annotations

from tests.conformance.node_cases import cases_by_op, expected_failures, run_case


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

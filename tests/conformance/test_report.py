"""``docs/conformance.md`` is what ``tools/conformance_report.py`` produces from the current code.

The report is rendered in this process, so it reuses the outcomes the node-test modules
computed before it (``conformance.outcome`` keeps them): in the whole suite it costs about a
second; alone, it runs every case on every backend (about 35 s here). It is skipped where a
backend it covers cannot run, or on other devices than the ones it names (a GPU's placement
depends on the device).
"""

import difflib
import importlib.util
import io
from collections import Counter
from pathlib import Path

import pytest

from mnnpy.backend import backend_availability
from tests.conformance.conformance import CPU_ONLY, FAILED, ON_GPU, STATUSES, WITH_FALLBACK, Outcome
from tests.conformance.placement import Placement

ROOT = Path(__file__).resolve().parents[2]


def _load():
    """``tools/conformance_report.py`` as a module."""
    spec = importlib.util.spec_from_file_location("conformance_report", ROOT / "tools" / "conformance_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tool():
    """``tools/conformance_report.py`` as a module; skips where a backend it covers is unusable
    or its devices are not the ones the committed report was measured on."""
    module = _load()
    for backend in module.BACKENDS:
        ok, why = backend_availability(backend)
        if not ok:
            pytest.skip(f"the report covers {backend}, unavailable here: {why}")
    devices = [f"{b}: {module.device_line(b)}" for b in module.BACKENDS if b != "cpu"]
    if not all(d in module.TARGET.read_text() for d in devices):
        pytest.skip(f"docs/conformance.md was measured on other devices than these: {devices}")
    return module


def test_conformance_report_is_current(tool):
    committed, current = tool.TARGET.read_text(), tool.render()
    diff = "\n".join(difflib.unified_diff(committed.splitlines(), current.splitlines(), "committed", "current", lineterm=""))
    assert committed == current, "docs/conformance.md is stale: run python tools/conformance_report.py\n" + diff[:3000]


def test_cases_listing(tool):
    """``--cases``: one CSV row per case and backend, with a known status; the first Conv case
    ran on each GPU backend, every op there (weights as constants)."""
    out = io.StringIO()
    tool.write_cases(out)
    rows = [line.split(",") for line in out.getvalue().splitlines()[1:]]
    assert len(rows) == len(tool.all_cases()) * len(tool.BACKENDS)
    assert {r[3] for r in rows} <= set(STATUSES)
    conv = {r[2]: r for r in rows if r[0] == "test_basic_conv_with_padding"}
    assert conv["cpu"][3] == "passed"
    for backend in tool.BACKENDS[1:]:
        assert conv[backend][3:6] == ["passed on the GPU", "1", "0"]


def test_fallback_reasons_count_cases_once():
    """A reason counts once per passing case it touches (its ops all count); failed cases and
    cases without fallback add nothing; reasons are ordered by cases, then by name."""
    erf, where = Counter({"no execution for Erf": 2}), Counter({"no execution for Where": 1})
    res = {
        "Erf": [Outcome(WITH_FALLBACK, placement=Placement(device=1, cpu=2, reasons=erf))],
        "Where": [
            Outcome(CPU_ONLY, placement=Placement(cpu=1, reasons=where)),
            Outcome(CPU_ONLY, placement=Placement(cpu=1, reasons=where)),
            Outcome(FAILED, placement=Placement(cpu=3, reasons=erf)),
        ],
        "Relu": [Outcome(ON_GPU, placement=Placement(device=1))],
    }
    rows = [line for line in _load().fallbacks("opencl", res) if line.startswith("| no")]
    assert rows == ["| no execution for Where | 2 | 2 |", "| no execution for Erf | 1 | 2 |"]

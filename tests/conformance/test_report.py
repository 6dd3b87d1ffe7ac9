"""``docs/conformance.md`` is what ``tools/conformance_report.py`` produces from the current code."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_conformance_report_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "conformance_report.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, "docs/conformance.md is stale: run python tools/conformance_report.py\n" + r.stderr[-2000:]

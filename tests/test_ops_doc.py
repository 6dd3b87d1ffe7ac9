"""``docs/ops.md`` is what ``tools/ops_doc.py`` produces from the current schemas and registries."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ops_doc_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "ops_doc.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, "docs/ops.md is stale: run python tools/ops_doc.py\n" + r.stderr[-2000:]


def test_ops_doc_lists_every_op():
    text = (ROOT / "docs" / "ops.md").read_text()
    from mnnpy.ops import all_schemas

    for op in all_schemas():
        assert f"\n## {op}\n" in text, op

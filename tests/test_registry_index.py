"""The registry index (``mnnpy/registry_index.py``): current, used for single lookups, and a stale
one costs time, never a wrong answer."""

from __future__ import annotations

import subprocess
import sys

from mnnpy.registry import build_index
from mnnpy.registry_index import INDEX


def test_the_index_is_current():
    built = build_index()
    assert set(built) == set(INDEX)
    for kind, modules in built.items():
        assert {m: set(k) for m, k in modules.items()} == {m: set(" ".join(k).split()) for m, k in INDEX[kind].items()}, (
            f"mnnpy/registry_index.py is stale for {kind}: run `python -m mnnpy.registry`"
        )


def test_one_lookup_imports_only_its_module():
    code = (
        "import sys\n"
        "from mnnpy.ops import get_schema\n"
        "from mnnpy.backends.cpu.registry import execution\n"
        "assert get_schema('Conv').type == 'Conv' and execution('Conv').__name__ == 'Conv'\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('mnnpy.ops.', 'mnnpy.backends.cpu.ops.')))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "mnnpy.ops.conv" in loaded and "mnnpy.backends.cpu.ops.conv" in loaded
    for other in ("mnnpy.ops.sequence", "mnnpy.ops.signal", "mnnpy.backends.cpu.ops.sequence", "mnnpy.backends.cpu.ops.signal"):
        assert other not in loaded


def test_a_stale_index_still_finds_every_entry():
    code = (
        "import mnnpy.registry as r\n"
        "from mnnpy.registry_index import INDEX\n"
        "r._BY_KEY['op schema'] = {'Conv': 'pad'}  # stale: Conv said to be in pad, Relu missing\n"
        "from mnnpy.ops import get_schema\n"
        "assert get_schema('Conv').type == 'Conv' and get_schema('Relu').type == 'Relu'\n"
        "assert get_schema('NotAnOp') is None\n"
        "assert r._BY_KEY['op schema'] == {'Conv': 'pad'}\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_entries_know_the_module_that_registered_them():
    from mnnpy.backends.cpu.registry import _EXECUTIONS, executions
    from mnnpy.ops.registry import _SCHEMAS, all_schemas

    assert set(all_schemas()) == set(_SCHEMAS.origin) and set(executions()) == set(_EXECUTIONS.origin)
    assert _SCHEMAS.origin["Conv"] == "conv" and _SCHEMAS.origin["Relu"] == "activation"
    assert _EXECUTIONS.origin["Conv"] == "conv"

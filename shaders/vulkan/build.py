"""Compile every SPIR-V variant of ``shaders/vulkan/manifest.json`` with glslangValidator.

Usage: ``python shaders/vulkan/build.py`` (writes ``<name>.spv`` beside the sources),
``python shaders/vulkan/build.py --check`` (exit status 1 and the stale names when a
committed ``.spv`` differs from a fresh build). Needs ``glslangValidator`` (Debian
``glslang-tools``); the tool's version is part of the output, so the committed files are
built with the one CI installs. Run-time code never compiles: it loads the ``.spv`` files.

Every variant also gets an fp16-storage twin ``<name>_f16`` (``-DSTORAGE_F16``, see
``storage.glsl``), used with ``precision="low"``.

Each variant: ``glslangValidator -V --target-env vulkan1.0 -D<macro>... <source> -o <name>.spv``
(``vulkan1.1`` for the fp16 twins)
(no debug info, so the output depends only on the source, the macros and the tool).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
TOOL = "glslangValidator"
TARGET = "vulkan1.0"
# fp16 twins: SPIR-V 1.3, whose storage buffers are in the StorageBuffer storage class (what
# storageBuffer16BitAccess covers; SPIR-V 1.0's Uniform + BufferBlock would need
# uniformAndStorageBuffer16BitAccess). Devices with 16-bit storage here are Vulkan 1.1+.
TARGET_F16 = "vulkan1.1"


F16 = "_f16"  # suffix of the fp16-storage twin of every variant (macro STORAGE_F16, storage.glsl)


def variants() -> dict[str, dict]:
    """``name -> {"source": file, "defines": [macro, ...]}`` from ``manifest.json`` and the
    per-family ``manifest_<family>.json`` beside it (a name defined twice is an error), and
    for each its fp16-storage twin ``<name>_f16`` (the same macros and ``STORAGE_F16``)."""
    out: dict[str, dict] = {}
    for path in [MANIFEST, *sorted(HERE.glob("manifest_*.json"))]:
        for name, spec in json.loads(path.read_text())["variants"].items():
            if name in out or name.endswith(F16):
                raise ValueError(f"{path.name}: variant {name!r} is already defined or ends with {F16!r}")
            out[name] = spec
    for name, spec in list(out.items()):
        out[name + F16] = {"source": spec["source"], "defines": [*spec["defines"], "STORAGE_F16"], "target": TARGET_F16}
    return out


def tool() -> str | None:
    """The path of glslangValidator, or None where it is not installed."""
    return shutil.which(TOOL)


def compile_variant(name: str, spec: dict, out_dir: Path) -> Path:
    """Compile one variant into ``out_dir/<name>.spv``; raises ``RuntimeError`` with the
    compiler's messages when it fails."""
    exe = tool()
    if exe is None:
        raise RuntimeError(f"{TOOL} not found (Debian package glslang-tools)")
    out = Path(out_dir) / f"{name}.spv"
    defines = [f"-D{d}" for d in spec["defines"]]
    cmd = [exe, "-V", "--target-env", spec.get("target", TARGET), *defines, spec["source"], "-o", str(out)]
    done = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return out


def build(out_dir: Path = HERE) -> list[Path]:
    """Compile every variant into ``out_dir``; returns the written paths."""
    return [compile_variant(name, spec, out_dir) for name, spec in sorted(variants().items())]


def stale() -> list[str]:
    """Names whose committed ``.spv`` is missing or differs from a fresh build."""
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        return [
            name
            for name in sorted(variants())
            if not (HERE / f"{name}.spv").is_file()
            or (HERE / f"{name}.spv").read_bytes() != (Path(tmp) / f"{name}.spv").read_bytes()
        ]


def main(argv: list[str]) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Compile the SPIR-V variants of shaders/vulkan (manifest*.json).")
    p.add_argument("--check", action="store_true", help="only compare the committed .spv files with a fresh build")
    args = p.parse_args(argv)
    if args.check:
        names = stale()
        print("stale: " + ", ".join(names) if names else "all SPIR-V current")
        return 1 if names else 0
    for path in build():
        print(path.relative_to(HERE.parents[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

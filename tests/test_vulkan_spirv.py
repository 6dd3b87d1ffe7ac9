"""The committed SPIR-V of ``shaders/vulkan`` is current, and matches what the backend uses.

The freshness test recompiles every variant of ``shaders/vulkan/manifest.json`` with
glslangValidator and compares bytes (skipped, with the reason, where the tool is missing;
CI installs Debian's glslang-tools). The other tests need neither the tool nor a device.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "shaders" / "vulkan"


def _build_module():
    spec = importlib.util.spec_from_file_location("vulkan_shader_build", HERE / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_module()


@pytest.mark.skipif(build.tool() is None, reason="glslangValidator is not installed (Debian glslang-tools)")
def test_committed_spirv_is_current():
    assert build.stale() == [], "run: python shaders/vulkan/build.py"


def test_every_variant_is_committed_and_nothing_else():
    names = set(build.variants())
    committed = {p.stem for p in HERE.glob("*.spv")}
    assert committed == names, (sorted(committed - names), sorted(names - committed))
    for spec in build.variants().values():
        assert (HERE / spec["source"]).is_file() and isinstance(spec["defines"], list)


def test_every_execution_has_its_variant():
    """Each op the Vulkan Executions register has the SPIR-V variants its Execution loads:
    ``variant_for(op_type, dtype)`` (one variant per op and input dtype it takes) and/or
    ``variants`` (a class attribute)."""
    from mnnpy.backends.vulkan.registry import executions

    names = set(build.variants())
    for op, cls in executions().items():
        wanted = [cls.variant_for(op, dt) for dt in cls.input_dtypes(op)] if hasattr(cls, "variant_for") else []
        wanted += list(getattr(cls, "variants", ()))
        assert wanted, f"{cls.__name__} names no SPIR-V variant (`variants` or `variant_for`)"
        missing = [v for v in wanted if v not in names]
        assert not missing, (op, missing)


def test_row_kernels_name_the_reduce_manifest():
    """The reduction, softmax, pooling and normalisation Executions name exactly the variants
    of ``manifest_reduce.json``, each one committed."""
    import json

    from mnnpy.backends.vulkan import norm, pool, reduce

    names = set(json.loads((HERE / "manifest_reduce.json").read_text())["variants"])
    classes = [reduce.Reduce, reduce.Softmax, pool.Pool, pool.GlobalPool, norm.LayerNormalization, norm.BatchNormalization]
    used = {v for cls in classes for v in cls.variants}
    assert used == names and all((HERE / f"{v}.spv").is_file() for v in used)


def test_compile_failure_names_the_variant(tmp_path):
    if build.tool() is None:
        pytest.skip("glslangValidator is not installed (Debian glslang-tools)")
    with pytest.raises(RuntimeError, match="broken: .*failed"):
        build.compile_variant("broken", {"source": "unary.comp", "defines": ["OP_NO_SUCH_OP"]}, tmp_path)

import numpy as np
import pytest


@pytest.fixture
def rng():
    """A seeded generator, the same for every test."""
    return np.random.default_rng(0)


@pytest.fixture
def rt():
    """The process-wide OpenCL Runtime (for OpenCL modules, which skip where it is unavailable)."""
    from mnnpy.backend import get_runtime

    return get_runtime("opencl")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A fresh OpenCL cache folder, set through ``$MNNPY_OPENCL_CACHE`` for the test."""
    from mnnpy.backends.opencl import program as program_cache

    d = tmp_path / "clcache"
    monkeypatch.setenv(program_cache.CACHE_ENV, str(d))
    return d

"""Careless and hostile API use: every case a clear ``MnnpyError`` (found by a newcomer's test)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.interpreter import resolve_backends
from tests.oracle import make_model, rand


@pytest.fixture
def interp(rng):
    x = rand(rng, 1, 3, 5)
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"], input_shapes={"x": ["n", 3, "w"]})
    return mnnpy.Interpreter(convert(m))


@pytest.mark.parametrize("shapes", [None, {"x": "abc"}, {"x": (1, 3, 64.9)}, {"x": (1, True, 5)}, {"x": 5}])
def test_resize_rejects_non_integer_shapes(interp, shapes):
    with pytest.raises(mnnpy.InputError):
        interp.create_session().resize(shapes)


def test_resize_beyond_physical_memory_is_a_shape_error(interp):
    with pytest.raises(mnnpy.ShapeError, match="memory"):
        interp.create_session().resize({"x": (10**6, 3, 10**6)})


def test_lists_take_the_input_dtype(interp):
    s = interp.create_session()
    out = s.run({"x": [[[1, -2, 3, 4, -5]] * 3]})["y"]
    assert out.dtype == np.float32 and out.tolist() == [[[1, 0, 3, 4, 0]] * 3]


@pytest.mark.parametrize("value", [[[1.0, 2.0], [3.0]], "abc", None, [[[1e300] * 5] * 3]])
def test_unconvertible_python_values(interp, value):
    with pytest.raises(mnnpy.InputError, match="'x'"):
        interp.create_session().run({"x": value})


def test_numpy_arrays_of_another_dtype_are_refused(interp):
    with pytest.raises(mnnpy.InputError, match="float64"):
        interp.create_session().run({"x": np.zeros((1, 3, 5))})


def test_nan_and_inf_propagate_without_warnings(interp):
    x = np.array([[[np.nan, np.inf, -np.inf, 1, -1]] * 3], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = interp.create_session().run({"x": x})["y"]
    assert np.isnan(y[0, 0, 0]) and y[0, 0, 1] == np.inf and y[0, 0, 2] == 0


@pytest.mark.parametrize("source", [None, 123, 4.5, ["a"]])
def test_interpreter_needs_a_path_or_bytes(source):
    with pytest.raises(mnnpy.InputError):
        mnnpy.Interpreter(source)


@pytest.mark.parametrize("threads", [0, -1, 257, 10**6, 2.0, True])
def test_num_threads_bounds(interp, threads):
    with pytest.raises(mnnpy.InputError):
        interp.create_session(num_threads=threads)


@pytest.mark.parametrize("backend", [None, 3, [], [None]])
def test_backend_argument_type(interp, backend):
    with pytest.raises(mnnpy.InputError):
        interp.create_session(backend=backend)


def test_backend_names():
    with pytest.raises(mnnpy.BackendUnavailableError, match="foo"):
        resolve_backends("foo")
    with pytest.raises(mnnpy.BackendUnavailableError, match="foo"):
        resolve_backends(["foo", "cpu"])  # unknown names are errors in lists too
    assert resolve_backends("auto")[-1] == "cpu"
    assert resolve_backends(["cpu"]) == ["cpu"]


def test_preference_list_skips_an_unavailable_backend(monkeypatch, interp):
    import mnnpy.interpreter as it

    real = it.backend_availability
    monkeypatch.setattr(it, "backend_availability", lambda n: (False, "no driver") if n == "opencl" else real(n))
    with pytest.warns(RuntimeWarning, match="opencl.*no driver"):
        assert resolve_backends("opencl,cpu") == ["cpu"]
    with pytest.raises(mnnpy.BackendUnavailableError, match="no driver"):
        resolve_backends("opencl")
    with pytest.warns(RuntimeWarning):
        s = interp.create_session(backend=["opencl", "cpu"])
    assert [b.name for b in s.backends] == ["cpu"]


def test_integer_division_by_zero(rng):
    a = np.array([4, 5, 6], np.int64)
    m = make_model([helper.make_node("Div", ["a", "b"], ["c"])], {"a": a, "b": a}, ["c"])
    s = mnnpy.Interpreter(convert(m)).create_session()
    assert s.run({"a": a, "b": np.array([2, -5, 4], np.int64)})["c"].tolist() == [2, -1, 1]
    with pytest.raises(mnnpy.InputError, match="Div by zero"):
        s.run({"a": a, "b": np.array([2, 0, 4], np.int64)})


def test_run_leaves_the_callers_blas_threads_alone(interp):
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(2, user_api="blas"):
        interp.create_session().run({"x": np.zeros((1, 3, 5), np.float32)})
        assert all(i["num_threads"] == 2 for i in threadpool_info() if i["user_api"] == "blas")


def test_every_exported_error_is_raised_by_the_engine():
    """Each exported error class is an ``MnnpyError`` and the engine raises it somewhere (in
    ``mnnpy``, its backends or the converter): a class nothing raises is not exported."""
    import mnnpy.backends
    import mnnpy.converter

    folders = [Path(mnnpy.__file__).parent, *map(Path, mnnpy.backends.__path__), *map(Path, mnnpy.converter.__path__)]
    source = "\n".join(p.read_text() for folder in folders for p in folder.rglob("*.py"))
    for name in (n for n in mnnpy.__all__ if n.endswith("Error")):
        assert issubclass(getattr(mnnpy, name), mnnpy.MnnpyError)
        assert name == "MnnpyError" or re.search(rf"raise {name}\b", source), f"nothing raises {name}"

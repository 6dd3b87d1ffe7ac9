"""Helpers for GPU-backend tests: run one ONNX model on a backend and on the CPU, compare.

Tolerances (DESIGN.md, NNAPI CTS): fp32 elementwise ``ELEMENTWISE``; ops that accumulate
``ACCUMULATE``; fp16 storage (``precision="low"``) ``HALF``.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

import mnnpy
from mnnpy.converter import convert

ELEMENTWISE = (1e-5, 5 * 2**-23)
ACCUMULATE = (1e-4, 1e-4)
HALF = (5 * 2**-10, 5 * 2**-10)


def sessions(model, backend: str = "opencl", precision: str = "normal", **options):
    """(``[backend, "cpu"]`` session, CPU-only session) of one ONNX model."""
    interp = mnnpy.Interpreter(convert(model))
    return interp.create_session(backend=[backend, "cpu"], precision=precision, **options), interp.create_session(backend="cpu")


def compare(model, feeds, tol=ELEMENTWISE, on_device=True, backend: str = "opencl", precision: str = "normal", **options):
    """Run on both; assert ``|cpu - dev| <= atol + rtol*|cpu|`` per output (NaN where the CPU
    has NaN). ``on_device``: also assert that every op ran on ``backend`` (no CPU partition).
    Returns the device session."""
    atol, rtol = tol
    dev, cpu = sessions(model, backend, precision, **options)
    got, want = dev.run(feeds), cpu.run(feeds)
    for name, e in want.items():
        a = got[name]
        assert a.shape == e.shape and a.dtype == e.dtype, (name, a.shape, e.shape, a.dtype, e.dtype)
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, equal_nan=True, err_msg=name)
    if on_device:
        desc = dev.partitions()
        assert "on cpu" not in desc and f"on {backend}" in desc, desc
    return dev


def partitioned_model(rng):
    """x (1, 3, h, w) -> Relu -> Erf (no GPU execution: CPU) -> Add z (3, 1, 1) -> Sigmoid -> y:
    GPU, CPU, GPU partitions with one border copy each way."""
    from tests.oracle import make_model, rand

    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Erf", ["r"], ["c"]),
        helper.make_node("Add", ["c", "z"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    return make_model(nodes, {"x": x, "z": z}, ["y"], input_shapes={"x": [1, 3, "h", "w"]})


# -- GPU backends as test parameters ------------------------------------------------------

GPU_API = {"opencl": "OpenCL", "vulkan": "Vulkan"}


def _unavailable(backend: str):
    """A ``skipif`` mark: skipped, with the reason, where ``backend`` is unusable."""
    import pytest

    from mnnpy.backend import backend_availability

    ok, why = backend_availability(backend)
    return pytest.mark.skipif(not ok, reason=f"{GPU_API[backend]} unavailable: {why}")


def gpu_backends(*names: str):
    """``pytest.param`` per GPU backend (all by default), id the backend's name, each skipped
    with the reason where it is unusable: ``@pytest.mark.parametrize("backend", gpu_backends())``."""
    import pytest

    return [pytest.param(b, id=b, marks=_unavailable(b)) for b in names or GPU_API]


def gpu_cases(table: dict, ids=None):
    """Cases that differ per backend: ``table`` maps a backend to its list of cases (tuples,
    or single values); gives ``pytest.param(backend, *case)`` with ids ``"<backend>-<id>"``
    (``ids``: a function of the case, a dict of id lists like ``table``, or ``None`` for the
    case's position), each skipped with the reason where its backend is unusable.
    Parametrize ``"backend,<case names>"``."""
    import pytest

    params = []
    for b, cases in table.items():
        mark = _unavailable(b)
        for i, case in enumerate(cases):
            values = case if isinstance(case, tuple) else (case,)
            name = i if ids is None else ids[b][i] if isinstance(ids, dict) else ids(case)
            params.append(pytest.param(b, *values, id=f"{b}-{name}", marks=mark))
    return params


def he_weights(rng, *shape):
    """He-like scale (1/sqrt(fan-in)) so that outputs stay O(1), as in trained nets."""
    from tests.oracle import rand

    return rand(rng, *shape, scale=1 / np.sqrt(np.prod(shape[1:])))


def conv_model(rng, xs, ws, attrs, bias=True, after=()):
    """A model ``x -> Conv(w, b) -> after...`` (``after``: (op, attrs, extra constant inputs))."""
    from tests.oracle import make_model, rand

    x, inits = rand(rng, *xs), {"w": he_weights(rng, *ws)}
    names = ["x", "w"]
    if bias:
        inits["b"] = rand(rng, ws[0], scale=0.5)
        names.append("b")
    nodes, prev = [helper.make_node("Conv", names, ["c0"], **attrs)], "c0"
    for i, (op, a, extra) in enumerate(after):
        ins = [prev]
        for j, v in enumerate(extra):
            inits[f"k{i}_{j}"] = np.asarray(v, np.float32)
            ins.append(f"k{i}_{j}")
        nodes.append(helper.make_node(op, ins, [f"c{i + 1}"], **a))
        prev = f"c{i + 1}"
    return make_model(nodes, {"x": x}, [prev], inits), {"x": x}


def resize_model(x, scales=None, sizes=None, **attrs):
    """A model ``x -> Resize(scales or sizes) -> y`` with ``attrs``."""
    from tests.oracle import make_model

    inits = {}
    names = ["x", ""]
    if scales is not None:
        inits["sc"] = np.array(scales, np.float32)
        names.append("sc")
    else:
        inits["sz"] = np.array(sizes, np.int64)
        names += ["", "sz"]
    return make_model([helper.make_node("Resize", names, ["y"], **attrs)], {"x": x}, ["y"], inits)


def deconv_model(rng, xs, ws, attrs, bias):
    """``(model, x)``: ``x -> ConvTranspose(w[, b]) -> y`` with ``attrs``."""
    from tests.oracle import make_model, rand

    x, w = rand(rng, *xs), rand(rng, *ws)
    m = ws[1] * attrs.get("group", 1)
    inits, names = {"w": w}, ["x", "w"]
    if bias:
        inits["b"] = rand(rng, m)
        names.append("b")
    return make_model([helper.make_node("ConvTranspose", names, ["y"], **attrs)], {"x": x}, ["y"], inits), x


def only_execution(session):
    """The single Execution of a one-op session."""
    (exe,) = session._plan.executions.values()
    return exe


def passes(session, backend: str) -> int:
    """Passes of a one-op session's Execution: OpenCL launches, Vulkan ``passes``."""
    exe = only_execution(session)
    return len(exe.launches) if backend == "opencl" else exe.passes


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python that imports this checkout (and ``tests``): the
    repository root ahead of any ``PYTHONPATH`` already set (kept: a machine may install
    packages through it), plus ``extra``."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""), **extra)

"""One harness for every backend: run a model on a backend, compare with that backend's oracle.

The CPU backend is checked against onnxruntime; each GPU backend against the CPU backend
(STYLE.md: the NumPy backend is the in-process oracle for the GPU backends). Tolerances are
those of ``tests/oracle.py`` (``ELEMENTWISE``, ``ACCUMULATE``, ``HALF``, ``EXACT``), passed as
``tol``. Test parameters name the backend (``backends``, ``backend_cases``); a GPU backend
whose driver is missing is skipped with the reason.

Where a test must look inside a session (which kernel or shader an Execution picked, the
device backend, tensor handles), it does so through the helpers at the end of this module,
so that the engine's internals are read in one place.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.oracle import ELEMENTWISE, assert_outputs, make_model, rand, run_ort


def sessions(model, backend: str = "opencl", precision: str = "normal", **options):
    """(``[backend, "cpu"]`` session, CPU-only session) of one ONNX model."""
    interp = mnnpy.Interpreter(convert(model))
    return interp.create_session(backend=[backend, "cpu"], precision=precision, **options), interp.create_session(backend="cpu")


def compare(model, feeds, tol=ELEMENTWISE, on_device=True, backend: str = "opencl", precision: str = "normal", **options):
    """Run on ``backend`` (CPU fallback allowed) and on the CPU; assert
    ``|cpu - dev| <= tol["atol"] + tol["rtol"]*|cpu|`` per output, same shape and dtype (NaN
    where the CPU has NaN). ``on_device``: also assert that every op ran on ``backend`` (no
    CPU partition). Returns the device session."""
    dev, cpu = sessions(model, backend, precision, **options)
    got, want = dev.run(feeds), cpu.run(feeds)
    for name, e in want.items():
        a = got[name]
        assert a.shape == e.shape and a.dtype == e.dtype, (name, a.shape, e.shape, a.dtype, e.dtype)
        np.testing.assert_allclose(a, e, **tol, equal_nan=True, err_msg=name)
    if on_device:
        desc = dev.partitions()
        assert "on cpu" not in desc and f"on {backend}" in desc, desc
    return dev


def check_backend(model, feeds, tol, backend: str, on_device=True, **options):
    """``backend`` against its oracle within ``tol``; returns the session that ran on it.
    ``cpu``: onnxruntime (same dtype and shape; ``EXACT``: equal); a GPU backend: ``compare``
    against the CPU backend (``on_device``: every op ran on it)."""
    if backend != "cpu":
        return compare(model, feeds, tol, on_device, backend=backend, **options)
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", **options)
    out = session.run(feeds)
    names = [o.name for o in model.graph.output]
    assert_outputs(run_ort(model, feeds), [out[n] for n in names], names, **tol)
    return session


def partitioned_model(rng):
    """x (1, 3, h, w) -> Relu -> Erf (no GPU execution: CPU) -> Add z (3, 1, 1) -> Sigmoid -> y:
    GPU, CPU, GPU partitions with one border copy each way."""
    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Erf", ["r"], ["c"]),
        helper.make_node("Add", ["c", "z"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    return make_model(nodes, {"x": x, "z": z}, ["y"], input_shapes={"x": [1, 3, "h", "w"]})


# -- backends as test parameters -----------------------------------------------------------

API = {"cpu": "CPU", "opencl": "OpenCL", "vulkan": "Vulkan"}
GPUS = ("opencl", "vulkan")


def _unavailable(backend: str, precision: str = "normal"):
    """A ``skip`` mark with the reason where ``backend`` is unusable (and, for
    ``precision="low"`` on Vulkan, where the device has no 16-bit storage); else no mark."""
    import pytest

    from mnnpy.backend import backend_availability, get_runtime

    if backend == "cpu":
        return ()
    ok, why = backend_availability(backend)
    if not ok:
        return pytest.mark.skip(reason=f"{API[backend]} unavailable: {why}")
    if precision == "low" and backend == "vulkan" and not get_runtime("vulkan").storage16:
        return pytest.mark.skip(reason="this Vulkan device has no storageBuffer16BitAccess")
    return ()


def backends(*names: str, precision: str = "normal"):
    """``pytest.param`` per backend named (by default: all three), id the backend's name, each
    GPU skipped with the reason where it is unusable (``precision="low"``: also where it cannot
    store fp16): ``@pytest.mark.parametrize("backend", backends())``."""
    import pytest

    return [pytest.param(b, id=b, marks=_unavailable(b, precision)) for b in names or API]


def gpu_backends(*names: str, precision: str = "normal"):
    """``backends`` of the GPU backends (both by default)."""
    return backends(*(names or GPUS), precision=precision)


def backend_cases(table: dict, ids=None, precision: str = "normal"):
    """Cases that differ per backend: ``table`` maps a backend to its list of cases (tuples,
    or single values); gives ``pytest.param(backend, *case)`` with ids ``"<backend>-<id>"``
    (``ids``: a function of the case, a dict of id lists like ``table``, or ``None`` for the
    case's position), each skipped with the reason where its backend is unusable.
    Parametrize ``"backend,<case names>"``."""
    import pytest

    params = []
    for b, cases in table.items():
        mark = _unavailable(b, precision)
        for i, case in enumerate(cases):
            values = case if isinstance(case, tuple) else (case,)
            name = i if ids is None else ids[b][i] if isinstance(ids, dict) else ids(case)
            params.append(pytest.param(b, *values, id=f"{b}-{name}", marks=mark))
    return params


# -- models shared by several families -----------------------------------------------------


def he_weights(rng, *shape):
    """He-like scale (1/sqrt(fan-in)) so that outputs stay O(1), as in trained nets."""
    return rand(rng, *shape, scale=1 / np.sqrt(np.prod(shape[1:])))


# activations after a Conv, as ``conv_model``'s ``after``: the ones the CPU epilogue fuses
# (kernels/epilogue.py) and Sigmoid, which it leaves to NumPy
CONV_ACTIVATIONS = {
    "none": (),
    "relu": (("Relu", {}, ()),),
    "relu6": (("Clip", {}, (0.0, 6.0)),),
    "leaky": (("LeakyRelu", {"alpha": 0.1}, ()),),
    "hardsigmoid": (("HardSigmoid", {"alpha": 0.25, "beta": 0.4}, ()),),
    "hardswish": (("HardSwish", {}, ()),),
    "sigmoid": (("Sigmoid", {}, ()),),
}


def spy_inits(monkeypatch, cls) -> list:
    """The instances of ``cls`` made from now on, appended as their ``__init__`` runs."""
    made = []
    real = cls.__init__

    def spy(self, *a, **kw):
        made.append(self)
        real(self, *a, **kw)

    monkeypatch.setattr(cls, "__init__", spy)
    return made


def spy_compiled(monkeypatch, cls) -> list:
    """The executions of ``cls`` whose ``_compiled`` set up the compiled kernel from now on
    (it returned tasks or ``True``, not ``None`` or ``False``), appended as it runs."""
    taken = []
    real = cls._compiled

    def spy(self, *a):
        result = real(self, *a)
        if result is not None and result is not False:
            taken.append(self)
        return result

    monkeypatch.setattr(cls, "_compiled", spy)
    return taken


def conv_model(rng, xs, ws, attrs, bias=True, after=(), w_scale=None, b_scale=0.5):
    """``(model, feeds)``: ``x -> Conv(w, b) -> after...`` (``after``: (op, attrs, extra
    constant inputs)); weights He-scaled (``w_scale``: N(0, w_scale²) instead), biases
    N(0, b_scale²)."""
    x = rand(rng, *xs)
    inits = {"w": he_weights(rng, *ws) if w_scale is None else rand(rng, *ws, scale=w_scale)}
    names = ["x", "w"]
    if bias:
        inits["b"] = rand(rng, ws[0], scale=b_scale)
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
    inits = {}
    names = ["x", ""]
    if scales is not None:
        inits["sc"] = np.array(scales, np.float32)
        names.append("sc")
    else:
        inits["sz"] = np.array(sizes, np.int64)
        names += ["", "sz"]
    return make_model([helper.make_node("Resize", names, ["y"], **attrs)], {"x": x}, ["y"], inits)


def deconv_model(rng, xs, ws, attrs, bias, w_scale=1.0):
    """``(model, x)``: ``x -> ConvTranspose(w[, b]) -> y`` with ``attrs``; weights N(0, w_scale²),
    biases N(0, 1)."""
    x, w = rand(rng, *xs), rand(rng, *ws, scale=w_scale)
    m = ws[1] * attrs.get("group", 1)
    inits, names = {"w": w}, ["x", "w"]
    if bias:
        inits["b"] = rand(rng, m)
        names.append("b")
    return make_model([helper.make_node("ConvTranspose", names, ["y"], **attrs)], {"x": x}, ["y"], inits), x


# -- the engine's internals, read in one place ---------------------------------------------


def executions(session, op_type: str | None = None) -> list:
    """The Executions of ``session``'s current plan, in op order (of ``op_type`` only, if given)."""
    exes = list(session.runner.plan.executions.values())
    return exes if op_type is None else [e for e in exes if e.op.type == op_type]


def has_plans(session) -> bool:
    """Whether ``session`` holds a plan (the current one or a cached one)."""
    return session.runner.cached()


def recorded_dispatches(session, exe) -> list:
    """Vulkan: the dispatches recorded for the partition that holds Execution ``exe`` (its
    uploads' casts, every Execution's dispatches, its downloads' casts), from the plan's steps."""
    return next(step.recording for step in session.runner.plan.steps if exe in step.executions).dispatches


def check_op(backend: str, family: str, cls: str, op, inputs, attrs, geometry=None) -> tuple[bool, str]:
    """``(ok, why)`` of Execution class ``cls`` of ``mnnpy.backends.<backend>.<family>`` asked
    about ``op`` with input ``TensorInfo``s ``inputs`` (one per slot, ``None`` if absent),
    resolved ``attrs`` and the shape function's ``geometry``."""
    from mnnpy.backend import OpInfo

    info = OpInfo(0, op, attrs, tuple(inputs), tuple(None for _ in op.outputs), geometry or {})
    return getattr(backend_module(backend, family), cls).check(info)


def only_execution(session):
    """The single Execution of a one-op session."""
    (exe,) = executions(session)
    return exe


def device_backend(session):
    """The session's first Backend object (the GPU backend of a ``[gpu, "cpu"]`` session)."""
    return session.backends[0]


def storage_dtype(session) -> np.dtype:
    """The dtype the session's first backend stores float32 tensors in (float16 for fp16 storage)."""
    return device_backend(session).storage


def tensor_handles(session) -> dict:
    """The device backend's handle per tensor id in the current plan."""
    return session.runner.plan.handles[0]


def launch_key(session) -> str:
    """OpenCL: the program key (source name and build options) of the first Execution's launch."""
    return executions(session)[0].launch.key


def kernel_name(session) -> str:
    """OpenCL: the kernel function the first Execution launches."""
    return executions(session)[0].launch.kernel.function_name


def backend_module(backend: str, family: str):
    """A GPU backend's module of one op family (``mnnpy.backends.<backend>.<family>``), for
    tests of its pure geometry functions and limits."""
    import importlib

    return importlib.import_module(f"mnnpy.backends.{backend}.{family}")


def passes(session, backend: str) -> int:
    """Passes of a one-op session's Execution: OpenCL launches, Vulkan ``passes``."""
    exe = only_execution(session)
    return len(exe.launches) if backend == "opencl" else exe.passes


class Dispatch(NamedTuple):
    """One Vulkan dispatch described at resize: SPIR-V variant, specialization constants (id ->
    value), work groups and work-group size (None where the Execution left them to the default)."""

    shader: str
    spec: dict
    groups: tuple | None
    local: tuple | None


def record_dispatches(monkeypatch) -> list[Dispatch]:
    """A list that receives every Vulkan dispatch described at resize, in order, for the rest of
    the test (a spy on ``VulkanExecution.dispatch``)."""
    from mnnpy.backends.vulkan.execution import VulkanExecution

    seen: list[Dispatch] = []
    real = VulkanExecution.dispatch

    def spy(self, shader, bindings, writes, push, n, spec=(), groups=None, local=None):
        seen.append(Dispatch(shader, dict(spec), groups, local))
        return real(self, shader, bindings, writes, push, n, spec, groups, local)

    monkeypatch.setattr(VulkanExecution, "dispatch", spy)
    return seen


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python that imports this checkout (and ``tests``): the
    repository root ahead of any ``PYTHONPATH`` already set (kept: a machine may install
    packages through it), plus ``extra``."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""), **extra)

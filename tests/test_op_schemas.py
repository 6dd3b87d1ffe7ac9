"""Every op schema is complete: a converter function (or a converter pass that makes it), a
CPU kernel (an Execution, a host kernel, or the engine for control flow), a formula, facts
that fit its inputs, a FLOPs rule; the FLOPs of a plan; the
aliasing default read from the schemas; backend registries importable without a driver."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.ops import all_schemas, get_schema
from tests.oracle import make_model, rand

ROOT = Path(__file__).resolve().parents[1]

# op types no ONNX node converts to directly, each with the converter pass that makes it
INTERNAL: dict[str, str] = {}


def test_every_schema_has_a_converter_or_a_pass():
    from mnnpy.converter.registry import converters

    missing = sorted(t for t in all_schemas() if t not in converters() and t not in INTERNAL)
    assert not missing, f"schemas without a converter function: {missing}"
    for t, where in INTERNAL.items():
        assert f'"{t}"' in (ROOT / where).read_text(), (t, where)


def test_every_schema_has_a_cpu_execution():
    """A CPU Execution, or a host kernel (sequence ops), or run by the engine (control flow)."""
    from mnnpy.backends.cpu.registry import executions, host_kernels
    from mnnpy.ops.control_flow import CONTROL_FLOW

    missing = sorted(set(all_schemas()) - set(executions()) - set(host_kernels()) - set(CONTROL_FLOW))
    assert not missing, f"schemas without a CPU Execution: {missing}"
    assert not set(host_kernels()) & set(executions()), "an op has a host kernel and an Execution"
    assert all(get_schema(t).dynamic for t in [*host_kernels(), *CONTROL_FLOW]), "host kernels and control flow are dynamic"


@pytest.mark.parametrize("op", sorted(all_schemas()))
def test_schema_declares_its_facts(op):
    s = get_schema(op)
    assert s.doc, f"{op}: a formula (the shape function's docstring or ``doc=``)"
    assert s.flops is not None and (s.flops.__doc__ or "").strip(), f"{op}: a FLOPs rule with its docstring"
    assert all(0 <= k < len(s.inputs) for k in s.same_rank), op
    assert s.alias is None or 0 <= s.alias < len(s.inputs), op
    if s.elementwise:
        assert s.same_rank, op


def _plans_mflops(session) -> dict[str, float]:
    """op type -> MFLOPs over the plan(s) of ``session``'s last run or resize."""
    out: dict[str, float] = {}
    for _, op_type, v in session.op_mflops():
        out[op_type] = out.get(op_type, 0.0) + v
    return out


def _plan_mflops(model, shapes):
    s = mnnpy.Interpreter(convert(model)).create_session(backend="cpu")
    s.resize(shapes)
    return _plans_mflops(s)


def test_flops_of_conv_gemm_matmul(rng):
    x = rand(rng, 2, 3, 10, 12)
    inits = {"w": rand(rng, 8, 3, 3, 3), "b": rand(rng, 8), "g": rand(rng, 8 * 10 * 12, 5), "m": rand(rng, 5, 7)}
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "g"], ["h"]),
        helper.make_node("MatMul", ["h", "m"], ["y"]),
    ]
    got = _plan_mflops(make_model(nodes, {"x": x}, ["y"], inits), {"x": x.shape})
    out = 2 * 8 * 10 * 12
    assert got["Conv"] == pytest.approx((2 * 3 * 9 + 1 + 1) * out / 1e6)  # Relu fused: 1 per element
    assert got["Flatten"] == 0
    assert got["Gemm"] == pytest.approx(2 * 960 * 2 * 5 / 1e6)
    assert got["MatMul"] == pytest.approx(2 * 5 * 2 * 7 / 1e6)


def test_flops_of_pool_and_reduce(rng):
    x = rand(rng, 1, 4, 8, 8)
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ReduceSumSquare", ["p"], ["y"], keepdims=1),
    ]
    got = _plan_mflops(make_model(nodes, {"x": x}, ["y"], opset=13), {"x": x.shape})
    assert got["MaxPool"] == pytest.approx(4 * 4 * 16 / 1e6)
    assert got["ReduceSumSquare"] == pytest.approx(2 * 64 / 1e6)


def test_aliasing_is_read_from_the_schemas():
    from mnnpy.backend import Backend
    from mnnpy.ir import Op
    from mnnpy.ops import aliasing_ops

    assert set(aliasing_ops()) == {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}
    b = Backend.__new__(Backend)
    assert b.can_alias(Op("Reshape", "r", [0, 1], [2], {})) and not b.can_alias(Op("Transpose", "t", [0], [1], {}))


def test_backend_registries_load_no_driver():
    """The registries (read by tools/ops_doc.py and the schedule) import no GPU package."""
    code = (
        "import sys\n"
        "from mnnpy.backends.opencl.registry import executions as o\n"
        "from mnnpy.backends.vulkan.registry import executions as v\n"
        "assert o() and v()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyopencl', 'vulkan')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_rank_bounds_follow_same_rank(rng):
    """The converter's no-op removal knows Conv's output rank from the schema (``same_rank``)."""
    from mnnpy.converter.passes.cleanup import rank_lower_bounds
    from mnnpy.ir import Graph, Op, TensorDesc

    g = Graph()
    x = g.add_tensor(TensorDesc("x", np.dtype(np.float32), None))
    w = g.add_tensor(TensorDesc("w", np.dtype(np.float32), (4, 3, 3, 3), rand(rng, 4, 3, 3, 3)))
    y, z = (g.add_tensor(TensorDesc(n, np.dtype(np.float32), None)) for n in "yz")
    g.ops += [Op("Conv", "c", [x, w], [y], {}), Op("Relu", "r", [y], [z], {})]
    lb = rank_lower_bounds(g)
    assert lb[y] == 4 and lb[z] == 4


def _one_case_per_op():
    from tests.conformance.node_cases import cases_by_op, expected_failures

    failing = expected_failures("cpu")
    schemas = all_schemas()
    for op, cases in sorted(cases_by_op().items()):
        case = next((c for c in cases if c.name not in failing and "_expanded" not in c.name), None)
        if op in schemas and case is not None:
            yield pytest.param(case, id=op)


@pytest.mark.parametrize("case", list(_one_case_per_op()))
def test_flops_rule_runs_on_a_node_test(case):
    """Each op's FLOPs rule on the shapes of one ONNX node test: a finite count, not negative."""
    from mnnpy.onnx_backend import as_array

    s = mnnpy.Interpreter(convert(case.model)).create_session(backend="cpu")
    inputs, _ = case.data_sets[0]
    names = [i.name for i in s.inputs]
    with np.errstate(all="ignore"):
        s.run({n: as_array(v) for n, v in zip(names, inputs)})
    for op, v in _plans_mflops(s).items():
        assert np.isfinite(v) and v >= 0, (op, v)


@pytest.mark.parametrize("shape", [(3,), (1, 1), (2, 1), (0,)])
def test_clip_bounds_must_be_scalars(shape):
    """A 1-D min of three elements clipped element by element; onnxruntime refuses (clip.cc:
    ``min should be a scalar``), so does the shape function (``ShapeError`` naming min)."""
    x = rand(np.random.default_rng(0), 2, 3)
    m = make_model([helper.make_node("Clip", ["x", "lo"], ["y"])], {"x": x}, ["y"], {"lo": np.zeros(shape, np.float32)})
    with pytest.raises(mnnpy.ShapeError, match=r"Clip .*min must be a scalar .*got shape"):
        mnnpy.Interpreter(convert(m)).create_session(backend="cpu").run({"x": x})


@pytest.mark.parametrize("shape", [(), (1,)])
def test_clip_bounds_of_one_element_are_taken(shape):
    x = rand(np.random.default_rng(0), 2, 3)
    m = make_model([helper.make_node("Clip", ["x", "lo"], ["y"])], {"x": x}, ["y"], {"lo": np.zeros(shape, np.float32)})
    (y,) = mnnpy.Interpreter(convert(m)).create_session(backend="cpu").run({"x": x}).values()
    np.testing.assert_array_equal(y, np.maximum(x, 0))


@pytest.mark.parametrize(
    "act,params",
    [("LeakyRelu", []), ("LeakyRelu", [0.1, 0.2]), ("Clip", [0.0]), ("HardSigmoid", [0.2]), ("Relu", [1.0]), ("", [1.0])],
)
def test_conv_activation_params_checked_at_load(act, params):
    """Missing or extra ``activation_params`` for the fused activation: ``ModelFormatError`` at
    load (from a file and from a Net in memory), not a ``ValueError`` on every CPU run."""
    from mnnpy import model_file
    from tests.test_conv import fused_conv_net

    w, b = np.ones((2, 3, 1, 1), np.float32), np.zeros(2, np.float32)
    net = fused_conv_net((1, 3, 4, 4), w, b, {}, act, params)
    rule = f"activation '{act}' takes \\d activation_params, got {len(params)}"
    with pytest.raises(mnnpy.ModelFormatError, match=rule):
        model_file.load(model_file.serialize(net))
    with pytest.raises(mnnpy.ModelFormatError, match=rule):
        mnnpy.Interpreter(fused_conv_net((1, 3, 4, 4), w, b, {}, act, params)).create_session(backend="cpu")

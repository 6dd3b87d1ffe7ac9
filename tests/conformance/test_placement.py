"""How the GPU node tests run a case and count it: which inputs become constants
(``node_cases.constant_inputs``), where the ops ran (``placement``) and the status that follows
(``conformance.classify``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import gpu_backends, partitioned_model
from tests.conformance.conformance import CPU_ONLY, ON_GPU, PASSED, WITH_FALLBACK, classify
from tests.conformance.node_cases import all_cases, constant_inputs, run_case, with_constant_inputs
from tests.conformance.placement import SEQUENCE_OP, Placement, placement
from tests.oracle import make_model, rand


def _case(name: str):
    return next(c for c in all_cases() if c.name == name)


def _synthetic(model, *data_sets):
    """A case-like object (what ``node_cases`` reads of onnx's ``TestCase``)."""
    return SimpleNamespace(name=model.graph.name, model=model, data_sets=list(data_sets), rtol=1e-5, atol=1e-6)


def test_conv_weights_become_constants():
    case = _case("test_basic_conv_with_padding")
    assert list(constant_inputs(case)) == ["W"]
    model, data_sets = with_constant_inputs(case)
    assert [i.name for i in model.graph.input] == ["x"] and [t.name for t in model.graph.initializer] == ["W"]
    assert len(data_sets[0][0]) == 1 and data_sets[0][0][0] is case.data_sets[0][0][0]
    assert data_sets[0][1] is case.data_sets[0][1]  # the expected outputs as given


def test_first_inputs_and_outputs_stay_inputs(rng):
    """``Where(cond, x, y)``: ``cond`` (a first input) stays; ``y``, also a graph output, stays."""
    cond, x, y = rng.random((2, 3)) > 0.5, rand(rng, 2, 3), rand(rng, 2, 3)
    model = make_model([helper.make_node("Where", ["cond", "x", "y"], ["z"])], {"cond": cond, "x": x, "y": y}, ["z", "y"])
    assert list(constant_inputs(_synthetic(model, ([cond, x, y], [np.where(cond, x, y), y])))) == ["x"]


def test_the_last_computed_input_of_a_node_stays():
    """ThresholdedRelu's expansion reads ``x`` only after constants (``CastLike(alpha, x)``):
    as a constant it would fold the whole graph at conversion, so it stays an input."""
    case = _case("test_thresholdedrelu_expanded_ver18")
    assert all(list(n.input[:1]) != ["x"] for n in case.model.graph.node)
    assert constant_inputs(case) == {}


def test_inputs_fed_several_values_stay(rng):
    x, w = rand(rng, 1, 2, 5, 5), rand(rng, 3, 2, 3, 3)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    same = _synthetic(model, ([x, w], [None]), ([x + 1, w.copy()], [None]))
    other = _synthetic(model, ([x, w], [None]), ([x, w + 1], [None]))
    assert list(constant_inputs(same)) == ["w"] and constant_inputs(other) == {}


@pytest.mark.parametrize(
    "where,status",
    [
        (Placement(device=3), ON_GPU),
        (Placement(device=3, cpu=1), WITH_FALLBACK),
        (Placement(cpu=2), CPU_ONLY),
        (Placement(resize=2), CPU_ONLY),  # nothing ran: not a GPU pass
        (Placement(), CPU_ONLY),
    ],
)
def test_classify(where, status):
    assert classify("opencl", where) == status
    assert classify("cpu", where) == PASSED


@pytest.mark.parametrize("backend", gpu_backends())
def test_conv_case_counts_for_the_gpu_only_with_constant_weights(backend):
    """Weights fed at run time: the Conv falls back (the GPU takes constant weights); as
    constants: it runs on the GPU."""
    case = _case("test_basic_conv_with_padding")
    runtime = placement(run_case(case, backend))
    assert (runtime.device, runtime.cpu) == (0, 1) and "weights computed at run time" in next(iter(runtime.reasons))
    assert classify(backend, runtime) == CPU_ONLY
    constant = placement(run_case(case, backend, constants=True))
    assert (constant.device, constant.cpu, classify(backend, constant)) == (1, 0, ON_GPU)


@pytest.mark.parametrize("backend", gpu_backends())
def test_fallback_ops_and_reasons_are_counted(rng, backend):
    """Relu -> Erf (no GPU execution) -> Add -> Sigmoid: three ops on the GPU, one on the CPU."""
    import mnnpy
    from mnnpy.converter import convert

    model = partitioned_model(rng)
    session = mnnpy.Interpreter(convert(model)).create_session(backend=backend)
    session.run({"x": rand(rng, 1, 3, 13, 7), "z": rand(rng, 3, 1, 1)})
    where = placement(session)
    assert (where.device, where.cpu, where.resize) == (3, 1, 0)
    assert list(where.reasons) == [f"no {dict(opencl='OpenCL', vulkan='Vulkan')[backend]} execution for Erf"]


@pytest.mark.parametrize("backend", gpu_backends())
def test_control_flow_bodies_and_sequence_ops_are_counted(backend):
    """A Loop's body ops count (the Loop, run on the host, does not); a sequence op runs on the
    host through the CPU backend and counts there."""
    loop = placement(run_case(_case("test_loop11"), backend, constants=True))
    assert loop.device > 0 and loop.cpu == 0
    seq = placement(run_case(_case("test_sequence_insert_at_back"), backend, constants=True))
    assert (seq.device, seq.cpu, list(seq.reasons)) == (0, 1, [SEQUENCE_OP])

"""Control flow at run time on every backend: If, Loop and Scan run as host steps, their bodies
planned once per distinct set of input shapes and placed op by op (the CPU against
onnxruntime, each GPU backend against the CPU: ``tests/backend_compare.py``), Loop's time-out
(NNAPI's: 2 s by default, at most 15 s), and the schedule's view of control flow.
The converter's side (captures, folding, the file format, validation) is tested in
``tests/test_control_flow.py``."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import TensorProto, helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import backends, check_backend
from tests.oracle import ACCUMULATE, EXACT, make_model, rand
from tests.test_control_flow import MODELS

F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _session(model, backend: str):
    return mnnpy.Interpreter(convert(model)).create_session(backend=[backend, "cpu"])


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("backend", backends())
def test_models_on_every_backend(rng, backend, name):
    """If (nested too), Loop (trip count, condition, both), Scan (opset 8 and 9 forms)."""
    model, feeds = MODELS[name](rng)
    check_backend(model, feeds, ACCUMULATE, backend, on_device=False)


def _if_model():
    """``y = If(x.sum() > 0){x ++ x along axis 0} else {x[:1]}``: the branches differ in shape."""
    then = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then", [], [_info("t", F32, None)])
    other = helper.make_graph(
        [helper.make_node("Slice", ["x", "s0", "s1"], ["e"])],
        "else",
        [],
        [_info("e", F32, None)],
        [helper.make_tensor("s0", I64, [1], [0]), helper.make_tensor("s1", I64, [1], [1])],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    g = helper.make_graph(
        nodes, "g", [_info("x", F32, [3, 4])], [_info("y", F32, None)], [helper.make_tensor("zero", F32, [], [0.0])]
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("backend", backends())
def test_if_branches_of_different_shapes(backend):
    """Each branch's shape is reported after the run that took it (``output_shapes``)."""
    s = _session(_if_model(), backend)
    x = np.abs(rand(np.random.default_rng(1), 3, 4))
    np.testing.assert_array_equal(s.run({"x": x})["y"], np.concatenate([x, x]))
    assert s.output_shapes == {"y": (6, 4)}
    np.testing.assert_array_equal(s.run({"x": -x})["y"], -x[:1])
    assert s.output_shapes == {"y": (1, 4)}


def _growing_loop(opset: int = 13):
    """``(v, scan) = Loop(M, true, v0)``: ``v' = concat(v, [i])`` (its shape grows every
    iteration), scan output ``i * 2``."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=F32),
            helper.make_node("Unsqueeze", ["fi", "ax"], ["u"]),
            helper.make_node("Concat", ["v_in", "u"], ["v_out"], axis=0),
            helper.make_node("Mul", ["fi", "two"], ["out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "body",
        [_info("i", I64, []), _info("c_in", BOOL, []), _info("v_in", F32, None)],
        [_info("c_out", BOOL, []), _info("v_out", F32, None), _info("out", F32, [])],
        [helper.make_tensor("ax", I64, [1], [0]), helper.make_tensor("two", F32, [], [2.0])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "c", "v0"], ["v", "scan"], body=body)],
        "g",
        [_info("M", I64, []), _info("c", BOOL, []), _info("v0", F32, [1])],
        [_info("v", F32, None), _info("scan", F32, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("backend", backends())
def test_loop_carried_value_grows_and_scans_stack(backend):
    """A carried value whose shape changes every iteration; the scan output is stacked; a
    trip count of 0 gives the initial value and an empty scan output ``(0,)``."""
    s = _session(_growing_loop(), backend)
    out = s.run({"M": np.array(5, np.int64), "c": np.array(True), "v0": np.array([7.0], np.float32)})
    np.testing.assert_array_equal(out["v"], [7, 0, 1, 2, 3, 4])
    np.testing.assert_array_equal(out["scan"], [0, 2, 4, 6, 8])
    out = s.run({"M": np.array(0, np.int64), "c": np.array(True), "v0": np.array([7.0], np.float32)})
    np.testing.assert_array_equal(out["v"], [7])
    assert out["scan"].shape == (0,) and out["scan"].dtype == np.float32


def _counter_loop():
    """``(x, trace) = Loop(M, cond, x0)`` on ``x`` of one element: ``x' = x * 0.5 + 1``,
    ``cond' = x' < limit``; the scan output ``trace`` records ``x'``."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["x_in", "half"], ["m"]),
            helper.make_node("Add", ["m", "one"], ["x_out"]),
            helper.make_node("Less", ["x_out", "limit"], ["c_out"]),
            helper.make_node("Identity", ["x_out"], ["trace"]),
        ],
        "body",
        [_info("i", I64, []), _info("c_in", BOOL, []), _info("x_in", F32, [1])],
        [_info("c_out", BOOL, []), _info("x_out", F32, [1]), _info("trace", F32, [1])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x0"], ["x", "trace"], body=body)],
        "g",
        [_info("M", I64, []), _info("cond", BOOL, []), _info("x0", F32, [1]), _info("limit", F32, [1])],
        [_info("x", F32, [1]), _info("trace", F32, None)],
        [helper.make_tensor("half", F32, [], [0.5]), helper.make_tensor("one", F32, [], [1.0])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _counter_feeds(m: int, limit: float = 10.0):
    return {
        "M": np.array(m, np.int64),
        "cond": np.array(True),
        "x0": np.zeros(1, np.float32),
        "limit": np.full(1, limit, np.float32),
    }


@pytest.mark.parametrize("backend", backends())
def test_body_planned_once_for_all_iterations_and_runs(backend):
    """Fifty iterations in each of three runs: the body's plan is made once and reused."""
    s = _session(_counter_loop(), backend)
    for _ in range(3):
        out = s.run(_counter_feeds(50))
    np.testing.assert_allclose(out["x"], np.full(1, 2 - 2.0**-50), **ACCUMULATE)
    assert out["trace"].shape == (50, 1)
    (body,) = s.runner.bodies().values()
    assert body.resize_count == 1 and s.resize_count == 1


@pytest.mark.parametrize("backend", backends())
def test_condition_ends_the_loop(backend):
    """``x`` climbs 1, 1.5, 1.75, ...: with ``limit`` 1.7 the condition ends it after 3 steps."""
    s = _session(_counter_loop(), backend)
    out = s.run(_counter_feeds(100, limit=1.7))
    np.testing.assert_allclose(out["x"], np.full(1, 1.75), **EXACT)
    assert out["trace"].shape == (3, 1)


def _endless_loop():
    """``Loop(M, true, x)`` whose condition stays true and whose scan output grows."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Add", ["x_in", "one"], ["x_out"])],
        "body",
        [_info("i", I64, []), _info("c_in", BOOL, []), _info("x_in", F32, [256])],
        [_info("c_out", BOOL, []), _info("x_out", F32, [256]), _info("x_out", F32, [256])],
        [helper.make_tensor("one", F32, [], [1.0])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "c", "x0"], ["x", "all"], body=body, name="endless")],
        "g",
        [_info("M", I64, []), _info("c", BOOL, []), _info("x0", F32, [256])],
        [_info("x", F32, [256]), _info("all", F32, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("backend", backends())
def test_loop_timeout_stops_a_hostile_trip_count(backend):
    """A trip count of 2^62 over a body that grows a scan output: ``LoopTimeoutError`` naming
    the op and the iteration reached, not before the limit; the session's next run is right."""
    s = _session(_endless_loop(), backend)
    feeds = {"M": np.array(2**62, np.int64), "c": np.array(True), "x0": np.zeros(256, np.float32)}
    t0 = time.perf_counter()
    with pytest.raises(
        mnnpy.LoopTimeoutError, match=r"Loop 'endless' ran past loop_timeout=0.3 s at iteration \d+ of 4611686018427387904"
    ):
        s.run(feeds, loop_timeout=0.3)
    assert time.perf_counter() - t0 >= 0.3
    out = s.run({**feeds, "M": np.array(3, np.int64)})
    np.testing.assert_array_equal(out["x"], np.full(256, 3.0))
    assert out["all"].shape == (3, 256)


@pytest.mark.parametrize("bad", [0, -1, 15.5, float("nan"), "2", True])
def test_loop_timeout_is_checked(bad):
    s = _session(_counter_loop(), "cpu")
    with pytest.raises(mnnpy.InputError, match="loop_timeout"):
        s.run(_counter_feeds(3), loop_timeout=bad)


def test_schedule_shows_control_flow_and_bodies():
    """``partitions()`` lists the host op and, once it ran, its body's schedule; ``dot()``
    draws the host op and a cluster of the body's ops."""
    s = _session(_counter_loop(), "cpu")
    before = s.partitions()
    assert "on the host: Loop" in before and "body: not run yet" in before
    s.run(_counter_feeds(2))
    text = s.partitions()
    assert "on the host: Loop" in text and "body:" in text and "Mul" in text and "Less" in text
    dot = s.dot()
    assert "shape=diamond" in dot and "subgraph cluster_" in dot and "Less" in dot


def test_scan_of_length_zero():
    """Scan inputs of length 0 along their axis: the initial states, and empty scan outputs
    shaped from the body (onnxruntime fails on this case: "Invalid dim0_offset of 0")."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x_t"], ["acc_out"]), helper.make_node("Identity", ["acc_out"], ["y_t"])],
        "body",
        [_info("acc_in", F32, [2]), _info("x_t", F32, [2])],
        [_info("acc_out", F32, [2]), _info("y_t", F32, [2])],
    )
    node = helper.make_node("Scan", ["acc0", "x"], ["acc", "y"], body=body, num_scan_inputs=1)
    feeds = {"acc0": np.ones(2, np.float32), "x": np.zeros((0, 2), np.float32)}
    model = make_model([node], feeds, ["acc", "y"], opset=16)
    out = mnnpy.Interpreter(convert(model)).create_session().run(feeds)
    np.testing.assert_array_equal(out["acc"], np.ones(2, np.float32))
    assert out["y"].shape == (0, 2) and out["y"].dtype == np.float32


def _nested_loops():
    """An outer Loop whose body runs an endless inner Loop (its condition stays true)."""
    inner = helper.make_graph(
        [helper.make_node("Identity", ["ci"], ["co"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "inner",
        [_info("j", I64, []), _info("ci", BOOL, []), _info("v_in", F32, [])],
        [_info("co", BOOL, []), _info("v_out", F32, [])],
        [helper.make_tensor("one", F32, [], [1.0])],
    )
    outer = helper.make_graph(
        [
            helper.make_node("Loop", ["", "c_in", "x_in"], ["x_out"], body=inner, name="inner"),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
        ],
        "outer",
        [_info("i", I64, []), _info("c_in", BOOL, []), _info("x_in", F32, [])],
        [_info("c_out", BOOL, []), _info("x_out", F32, [])],
    )
    g = helper.make_graph(
        [helper.make_node("Loop", ["M", "c", "x0"], ["x"], body=outer, name="outer")],
        "g",
        [_info("M", I64, []), _info("c", BOOL, []), _info("x0", F32, [])],
        [_info("x", F32, [])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def test_nested_loop_stops_at_the_enclosing_limit():
    """The inner loop runs under the outer loop's deadline: the run ends at the limit with
    the inner loop's error saying so, not after a whole inner loop per outer iteration."""
    s = _session(_nested_loops(), "cpu")
    feeds = {"M": np.array(10, np.int64), "c": np.array(True), "x0": np.array(0.0, np.float32)}
    with pytest.raises(mnnpy.LoopTimeoutError, match=r"Loop 'inner' ran past loop_timeout=0.2 s at iteration \d+"):
        s.run(feeds, loop_timeout=0.2)


@pytest.mark.parametrize("seconds", [np.float32(0.5), np.int64(1), np.float64(2.5)])
def test_loop_timeout_takes_numpy_scalars(seconds):
    s = _session(_counter_loop(), "cpu")
    assert s.run(_counter_feeds(3), loop_timeout=seconds)["trace"].shape == (3, 1)


def test_scan_output_axis_out_of_range():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "x_t"], ["acc_out"]), helper.make_node("Identity", ["acc_out"], ["y_t"])],
        "body",
        [_info("acc_in", F32, [2]), _info("x_t", F32, [2])],
        [_info("acc_out", F32, [2]), _info("y_t", F32, [2])],
    )
    node = helper.make_node("Scan", ["acc0", "x"], ["acc", "y"], body=body, num_scan_inputs=1, scan_output_axes=[7])
    feeds = {"acc0": np.ones(2, np.float32), "x": np.zeros((3, 2), np.float32)}
    s = mnnpy.Interpreter(convert(make_model([node], feeds, ["acc", "y"], opset=16))).create_session()
    with pytest.raises(mnnpy.ShapeError, match="scan_output_axes entry 7 out of range for its output of rank 2"):
        s.run(feeds)


def test_empty_scan_output_of_a_value_dependent_body():
    """Trip count 0 and a scan output whose shape only values give (Range): the declared
    shape, its dynamic dims 0, as onnxruntime gives it."""
    body = helper.make_graph(
        [helper.make_node("Range", ["zero", "n", "one"], ["r"]), helper.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [_info("i", I64, []), _info("c_in", BOOL, [])],
        [_info("c_out", BOOL, []), _info("r", I64, [3])],
        [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("one", I64, [], [1])],
    )
    node = helper.make_node("Loop", ["M", "c"], ["rs"], body=body)
    feeds = {"M": np.array(0, np.int64), "c": np.array(True), "n": np.array(3, np.int64)}
    model = make_model([node], feeds, ["rs"], opset=13)
    check_backend(model, feeds, EXACT, "cpu")


def test_op_mflops_and_dot_cover_bodies():
    """After a run, ``op_mflops`` lists the Loop body's ops under the Loop's name, and ``dot``
    draws nested control flow (the inner Loop inside the outer's cluster)."""
    s = _session(_counter_loop(), "cpu")
    s.run(_counter_feeds(2))
    names = [n for n, _, _ in s.op_mflops()]
    assert any(n.endswith("/body/" + n.rsplit("/", 1)[-1]) and "/body/" in n for n in names), names
    nested = _session(_nested_loops(), "cpu")
    with pytest.raises(mnnpy.LoopTimeoutError):
        nested.run({"M": np.array(1, np.int64), "c": np.array(True), "x0": np.array(0.0, np.float32)}, loop_timeout=0.05)
    dot = nested.dot()
    assert dot.count("subgraph cluster_") == 2 and "inner" in dot

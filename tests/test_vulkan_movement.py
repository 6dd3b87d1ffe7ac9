"""Vulkan-only data movement checks: a Reshape of a constant copies, Slice values from a graph
input or unknown, Concat of many inputs (several dispatches) or integers, Gather and integer
check() reasons, recordings reused, more invocations than one row of work groups. What both GPU
backends do is in tests/test_gpu_movement.py. Skipped, with the reason, where Vulkan is
unusable (CI installs Mesa's lavapipe)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")

EXACT = (0.0, 0.0)
I64 = np.int64


def _compare(model, feeds, on_device=True):
    return compare(model, feeds, EXACT, on_device, backend="vulkan")


def _executions(session, op_type):
    return [e for e in session._plan.executions.values() if e.op.type == op_type]


def _recording(session, exe):
    """The ``PartitionRecord`` of the partition that holds ``exe``."""
    return next(step.recording for step in session._plan.steps if exe in step.executions)


def _info(op, inputs, attrs):
    from mnnpy.backend import OpInfo

    return OpInfo(0, op, attrs, tuple(inputs), (None,) * len(op.outputs))


def test_reshape_of_constant_copies(rng):
    """A constant input has its own place: the output gets one copy."""
    w, x = rand(rng, 5, 21), rand(rng, 3, 35)
    nodes = [helper.make_node("Reshape", ["w", "s"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    inits = {"w": w, "s": np.array([3, 35], I64)}
    s = _compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    for exe in _executions(s, "Reshape"):  # the converter may have folded it into a constant
        assert not exe.aliased


def test_slice_values_from_graph_input(rng):
    """Starts fed as a graph input are read at resize (a value input): still one copy on Vulkan."""
    x, st = rand(rng, 5, 7), np.array([1], I64)
    inits = {"en": np.array([4], I64)}
    model = make_model([helper.make_node("Slice", ["x", "st", "en"], ["y"])], {"x": x, "st": st}, ["y"], inits)
    _compare(model, {"x": x, "st": st})


def test_slice_values_unknown_fall_back():
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.movement import Slice
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(np.float32))
    st, en = TensorInfo(1, "st", (1,), np.dtype(I64)), TensorInfo(2, "en", (1,), np.dtype(I64), np.array([3], I64))
    ok, why = Slice.check(_info(Op("Slice", "s", [0, 1, 2], [3]), [x, st, en], {}))
    assert not ok and "computed at run time" in why


@pytest.mark.parametrize("count,axis", [(7, 1), (9, 3), (5, 0), (4, 2)])
def test_concat_many_inputs(rng, count, axis):
    """Up to 4 inputs per dispatch: 7 inputs take 2 dispatches, 9 take 3 (the last with one)."""
    shapes = [[2, 3, 4, 5] for _ in range(count)]
    for k, s in enumerate(shapes):
        s[axis] = k % 3 + 1
    xs = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    model = make_model([helper.make_node("Concat", list(xs), ["y"], axis=axis)], xs, ["y"])
    s = _compare(model, xs)
    (exe,) = _executions(s, "Concat")
    assert len(exe.dispatches) == -(-count // 4)


def test_concat_integer_falls_back(rng):
    a = rng.integers(-5, 5, (2, 3)).astype(np.int32)
    model = make_model([helper.make_node("Concat", ["a", "a"], ["y"], axis=0)], {"a": a}, ["y"])
    s = _compare(model, {"a": a}, on_device=False)
    assert "fell back: vulkan: dtype int32" in s.partitions()


def test_gather_index_out_of_range_falls_back():
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.movement import Gather
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(np.float32))
    i = TensorInfo(1, "i", (1,), np.dtype(I64), np.array([5], I64))
    ok, why = Gather.check(_info(Op("Gather", "g", [0, 1], [2]), [x, i], {"axis": 1}))
    assert not ok and "out of range" in why


def test_movement_of_integer_data_falls_back():
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.movement import Transpose
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(I64), np.zeros((4, 5), I64))
    ok, why = Transpose.check(_info(Op("Transpose", "t", [0], [1]), [x], {"perm": []}))
    assert not ok and "float32 only" in why


def test_movement_recorded_once(rng):
    """A second and third run reuse the recording: same results, no new dispatches."""
    x = rand(rng, 2, 3, 37, 41)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]), helper.make_node("Relu", ["t"], ["y"])]
    s = _compare(make_model(nodes, {"x": x}, ["y"]), {"x": x})
    (exe,) = _executions(s, "Transpose")
    n = len(_recording(s, exe).dispatches)
    for _ in range(2):
        x = rand(rng, 2, 3, 37, 41)
        np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(np.transpose(x, (0, 1, 3, 2)), 0))
    assert len(_recording(s, exe).dispatches) == n


def test_beyond_one_row_of_work_groups(rng):
    """More invocations than the device's x group count times 64 (lavapipe: 4194240): the
    groups spill into y. A reversing Slice (one element per invocation) and a batched tiled
    Transpose whose batch exceeds the z group-count limit (the z groups loop)."""
    x = rand(rng, 700_001, 7)  # rows of 7: one element per invocation
    inits = {"st": np.array([-1], I64), "en": np.array([-(2**62)], I64), "ax": np.array([0], I64), "sp": np.array([-1], I64)}
    model = make_model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], {"x": x}, ["y"], inits)
    _compare(model, {"x": x})
    x = rand(rng, 66000, 8, 9)
    s = _compare(make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])], {"x": x}, ["y"]), {"x": x})
    (exe,) = _executions(s, "Transpose")
    assert exe.tiled

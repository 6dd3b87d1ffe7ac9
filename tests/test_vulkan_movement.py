"""Vulkan data movement against the CPU backend, exact: Reshape-likes (aliasing or one copy),
Transpose (strided and tiled), Slice (negative steps), Concat, Split, Gather with indices known
at resize, and the fallbacks with their reasons. Skipped, with the reason, where Vulkan is
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


def _chain(middle, x, inits=None):
    """x -> Relu -> <middle nodes: 'r' -> 'm'> -> Relu -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), *middle, helper.make_node("Relu", ["m"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits or {})


RESHAPES = {
    "Reshape": ([helper.make_node("Reshape", ["r", "s"], ["m"])], {"s": np.array([7, -1, 3], I64)}),
    "Flatten": ([helper.make_node("Flatten", ["r"], ["m"], axis=2)], {}),
    "Squeeze": ([helper.make_node("Squeeze", ["r", "ax"], ["m"])], {"ax": np.array([1], I64)}),
    "Unsqueeze": ([helper.make_node("Unsqueeze", ["r", "ax"], ["m"])], {"ax": np.array([0, 5], I64)}),
    "Identity": ([helper.make_node("Identity", ["r"], ["m"])], {}),
}


@pytest.mark.parametrize("op", list(RESHAPES))
def test_reshape_likes(rng, op):
    """Relu -> <reshape-like> -> Relu on Vulkan: aliased (nothing dispatched) where the
    backend lets the planner share the buffer, else one copy; exact either way."""
    x = rand(rng, 3, 1, 7, 13)
    nodes, inits = RESHAPES[op]
    s = _compare(_chain(nodes, x, inits), {"x": x})
    exes = _executions(s, op)
    if not exes:  # the converter drops an Identity between two ops: alone, graph input -> output, it stays
        assert op == "Identity"
        s = _compare(make_model([helper.make_node("Identity", ["x"], ["m"])], {"x": x}, ["m"]), {"x": x})
        exes = _executions(s, op)
    (exe,) = exes
    h = s._plan.handles[0]
    src, dst = h[exe.op.inputs[0]], h[exe.op.outputs[0]]
    assert exe.aliased == (src.memory is dst.memory and src.offset == dst.offset)
    if len(exe.op.inputs) and exe.backend.can_alias(exe.op) and len(_executions(s, "Relu")) == 2:
        assert exe.aliased  # between two Relus: the planner shares the buffer
    assert len(exe.partition.dispatches) == len(_executions(s, "Relu")) + (not exe.aliased)


def test_reshape_of_graph_input_and_output(rng):
    x = rand(rng, 5, 6, 7)
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": np.array([0, 42], I64)})
    _compare(model, {"x": x})


def test_reshape_of_constant_copies(rng):
    """A constant input has its own place: the output gets one copy."""
    w, x = rand(rng, 5, 21), rand(rng, 3, 35)
    nodes = [helper.make_node("Reshape", ["w", "s"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    inits = {"w": w, "s": np.array([3, 35], I64)}
    s = _compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    for exe in _executions(s, "Reshape"):  # the converter may have folded it into a constant
        assert not exe.aliased


PERMS = [
    ((2, 3, 5, 7), [0, 2, 3, 1]),
    ((2, 3, 37, 41), [0, 1, 3, 2]),  # tiled
    ((13, 31), [1, 0]),  # tiled, odd sizes
    ((3, 13, 31), None),  # reversed (empty perm): a tiled axis of 3, strided
    ((2, 7, 3, 5, 4), [2, 0, 3, 1, 4]),  # PP-OCRv4 rec: innermost stays, strided
    ((1, 5, 17, 9, 2, 3), [5, 3, 1, 0, 2, 4]),  # rank 6
    ((2, 19, 1, 23), [0, 3, 2, 1]),  # size-1 axis, tiled
    ((4, 9, 11), [0, 2, 1]),  # tiled, partial tiles
    ((2, 3, 4, 5), [0, 1, 2, 3]),  # identity perm: one contiguous copy (4 elements per invocation)
    ((3, 5, 40), [2, 0, 1]),  # merged dims (3*5) -> tiled
    ((2, 3, 2, 3, 2, 3, 2, 3), [7, 5, 3, 1, 6, 4, 2, 0]),  # rank 8, nothing merges
    ((3, 70, 9), [1, 0, 2]),  # innermost stays, long run of 9: vectorised strided copy
    ((2, 3, 4, 2, 3, 4, 5), [6, 1, 0, 3, 2, 5, 4]),  # tiled with 5 batch axes
]


@pytest.mark.parametrize("shape,perm", PERMS, ids=[f"{s}-{p}" for s, p in PERMS])
def test_transpose(rng, shape, perm):
    x = rand(rng, *shape)
    attrs = {} if perm is None else {"perm": perm}
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    s = _compare(model, {"x": x})
    (exe,) = _executions(s, "Transpose")
    d = exe.partition.dispatches[-1]
    expect_tiled = shape in ((2, 3, 37, 41), (13, 31), (2, 19, 1, 23), (4, 9, 11), (3, 5, 40))
    assert exe.tiled == expect_tiled
    assert d.pipeline is not None


def test_transpose_rank_9_falls_back(rng):
    """Nine dims that stay apart after merging exceed the shader's index arrays: CPU, with the reason."""
    x = rand(rng, *([2] * 9))
    model = make_model([helper.make_node("Transpose", ["x"], ["y"])], {"x": x}, ["y"])
    s = _compare(model, {"x": x}, on_device=False)
    assert "fell back: vulkan: transpose of rank 9 after merging dims" in s.partitions()


SLICES = [
    ((7, 13, 5), [1, 2], [6, 11], [0, 1], None),
    ((7, 13, 5), [-1], [-100], [1], [-1]),  # negative step, whole axis reversed
    ((7, 13, 5), [5, 0, 4], [0, 13, -100], [0, 1, 2], [-2, 3, -1]),
    ((7, 13, 5), [0], [2**62], [2], None),  # clamped end: whole axis
    ((9, 31), [3], [3], [0], None),  # empty output
    ((2, 3, 4, 5, 6, 7), [1, 1, 0], [2, 3, 7], [1, 3, 5], [1, 2, 3]),  # rank 6
    ((3, 20, 4), [0], [1], [0], None),  # PP-OCRv4 rec: first of dim 0
    ((5, 40), [-3], [-38], [-1], [-2]),  # negative axis and step on the innermost, 19 elements
]


@pytest.mark.parametrize("shape,starts,ends,axes,steps", SLICES, ids=[str(i) for i in range(len(SLICES))])
def test_slice(rng, shape, starts, ends, axes, steps):
    x = rand(rng, *shape)
    inits = {"st": np.array(starts, I64), "en": np.array(ends, I64), "ax": np.array(axes, I64)}
    names = ["x", "st", "en", "ax"]
    if steps is not None:
        inits["sp"] = np.array(steps, I64)
        names.append("sp")
    model = make_model([helper.make_node("Slice", names, ["y"])], {"x": x}, ["y"], inits)
    _compare(model, {"x": x})


def test_slice_without_axes(rng):
    x = rand(rng, 11, 9)
    inits = {"st": np.array([2, -4], I64), "en": np.array([9, -1], I64)}
    model = make_model([helper.make_node("Slice", ["x", "st", "en"], ["y"])], {"x": x}, ["y"], inits)
    _compare(model, {"x": x})


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
    ok, why = Slice.check(Op("Slice", "s", [0, 1, 2], [3]), [x, st, en], {})
    assert not ok and "computed at run time" in why


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concat(rng, axis):
    shapes = [[3, 5, 7], [3, 5, 7], [3, 5, 7]]
    for k, n in enumerate((2, 9, 1)):
        shapes[k][axis] = n
    xs = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    model = make_model([helper.make_node("Concat", list(xs), ["y"], axis=axis)], xs, ["y"])
    _compare(model, xs)


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
    assert len(exe.partition.dispatches) == -(-count // 4)


def test_concat_with_constant_and_empty(rng):
    a, c = rand(rng, 2, 3, 5), rand(rng, 2, 4, 5)
    e = np.zeros((2, 0, 5), np.float32)
    model = make_model([helper.make_node("Concat", ["a", "e", "c"], ["y"], axis=1)], {"a": a, "e": e}, ["y"], {"c": c})
    _compare(model, {"a": a, "e": e})


def test_concat_integer_falls_back(rng):
    a = rng.integers(-5, 5, (2, 3)).astype(np.int32)
    model = make_model([helper.make_node("Concat", ["a", "a"], ["y"], axis=0)], {"a": a}, ["y"])
    s = _compare(model, {"a": a}, on_device=False)
    assert "fell back: vulkan: dtype int32" in s.partitions()


@pytest.mark.parametrize("split,axis", [([2, 5, 6], 1), (None, 1), ([1, 1, 1], 0), ([3, 2, 2], -1)])
def test_split(rng, split, axis):
    x = {1: rand(rng, 3, 13, 7) if split else rand(rng, 3, 12, 7), 0: rand(rng, 3, 13, 7), -1: rand(rng, 3, 13, 7)}[axis]
    names, inits = ["x"], {}
    if split:
        names.append("sp")
        inits["sp"] = np.array(split, I64)
    model = make_model([helper.make_node("Split", names, ["a", "b", "c"], axis=axis)], {"x": x}, ["a", "b", "c"], inits)
    _compare(model, {"x": x})


def test_ocr_rec_like_chain(rng):
    """Reshape -> Transpose -> Slice -> Squeeze -> Transpose, as in PP-OCRv4 rec's attention."""
    x = rand(rng, 1, 10, 96)
    nodes = [
        helper.make_node("Reshape", ["x", "s"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[2, 0, 3, 1, 4]),
        helper.make_node("Slice", ["t", "st", "en", "ax"], ["sl"]),
        helper.make_node("Squeeze", ["sl", "ax"], ["q"]),
        helper.make_node("Transpose", ["q"], ["y"], perm=[0, 1, 3, 2]),
    ]
    inits = {"s": np.array([0, -1, 3, 4, 8], I64), "st": np.array([1], I64), "en": np.array([2], I64), "ax": np.array([0], I64)}
    _compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})


GATHERS = [
    ((7, 13, 5), 1, [[3, -1], [0, 12]]),
    ((7, 13, 5), 0, 2),  # scalar index: the axis goes
    ((9, 31), -1, [30, 0, 0, 17]),
    ((4, 6), 0, []),  # empty output
    ((3, 65, 1), 1, list(range(64, -1, -3))),
]


@pytest.mark.parametrize("shape,axis,indices", GATHERS, ids=[str(i) for i in range(len(GATHERS))])
def test_gather_constant_indices(rng, shape, axis, indices):
    x = rand(rng, *shape)
    i = np.array(indices, I64).reshape(np.shape(indices))
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], {"x": x}, ["y"], {"i": i})
    _compare(model, {"x": x})


def test_gather_indices_at_run_time_fall_back(rng):
    x, i = rand(rng, 5, 7), np.array([1, 3], I64)
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x, "i": i}, ["y"])
    s = _compare(model, {"x": x, "i": i}, on_device=False)
    assert "fell back: vulkan: dtype int64" in s.partitions()


def test_gather_index_out_of_range_falls_back():
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.movement import Gather
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(np.float32))
    i = TensorInfo(1, "i", (1,), np.dtype(I64), np.array([5], I64))
    ok, why = Gather.check(Op("Gather", "g", [0, 1], [2]), [x, i], {"axis": 1})
    assert not ok and "out of range" in why


def test_movement_of_integer_data_falls_back():
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.movement import Transpose
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(I64), np.zeros((4, 5), I64))
    ok, why = Transpose.check(Op("Transpose", "t", [0], [1]), [x], {"perm": []})
    assert not ok and "float32 only" in why


def test_movement_recorded_once(rng):
    """A second and third run reuse the recording: same results, no new dispatches."""
    x = rand(rng, 2, 3, 37, 41)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]), helper.make_node("Relu", ["t"], ["y"])]
    s = _compare(make_model(nodes, {"x": x}, ["y"]), {"x": x})
    (exe,) = _executions(s, "Transpose")
    n = len(exe.partition.dispatches)
    for _ in range(2):
        x = rand(rng, 2, 3, 37, 41)
        np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(np.transpose(x, (0, 1, 3, 2)), 0))
    assert len(exe.partition.dispatches) == n


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

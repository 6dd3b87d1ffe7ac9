"""Data movement on every GPU backend against the CPU backend, exact: Reshape-likes (aliasing),
Transpose (strided and tiled), Slice (negative steps), Concat, Split, Gather with indices known
at resize, and the fallbacks with their reasons. Each backend is skipped, with the reason, where
it is unusable (CI: PoCL, lavapipe). Backend-only checks live in tests/test_opencl_movement.py
and tests/test_vulkan_movement.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import compare, gpu_backends
from tests.oracle import make_model, rand

EXACT = (0.0, 0.0)
I64 = np.int64


def _compare(model, feeds, backend, on_device=True, **options):
    return compare(model, feeds, EXACT, on_device, backend=backend, **options)


def _executions(session, op_type):
    return [e for e in session._plan.executions.values() if e.op.type == op_type]


def _recording(session, exe):
    """The Vulkan ``PartitionRecord`` of the partition that holds ``exe``."""
    return next(step.recording for step in session._plan.steps if exe in step.executions)


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


def _check_alias(session, exe, backend):
    h = session._plan.handles[0]
    src, dst = h[exe.op.inputs[0]], h[exe.op.outputs[0]]
    if backend == "opencl":  # the planner shares the buffer, nothing is launched
        assert exe.aliased and not exe.launches
        assert src.buffer == dst.buffer and src.offset == dst.offset
    else:  # aliased (nothing dispatched) where the backend lets the planner share the buffer, else one copy
        assert exe.aliased == (src.memory is dst.memory and src.offset == dst.offset)
        if len(exe.op.inputs) and exe.backend.can_alias(exe.op) and len(_executions(session, "Relu")) == 2:
            assert exe.aliased  # between two Relus: the planner shares the buffer
        assert len(_recording(session, exe).dispatches) == len(_executions(session, "Relu")) + (not exe.aliased)


@pytest.mark.parametrize("op", list(RESHAPES))
@pytest.mark.parametrize("backend", gpu_backends())
def test_reshape_likes(rng, backend, op):
    """Relu -> <reshape-like> -> Relu: the planner shares the buffer (OpenCL: always; Vulkan:
    where the backend lets it, else one copy); exact either way."""
    x = rand(rng, 3, 1, 7, 13)
    nodes, inits = RESHAPES[op]
    s = _compare(_chain(nodes, x, inits), {"x": x}, backend)
    exes = _executions(s, op)
    if not exes:  # the converter drops an Identity between two ops: alone, graph input -> output, it stays
        assert op == "Identity"
        s = _compare(make_model([helper.make_node("Identity", ["x"], ["m"])], {"x": x}, ["m"]), {"x": x}, backend)
        exes = _executions(s, op)
    (exe,) = exes
    _check_alias(s, exe, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_reshape_of_graph_input_and_output(rng, backend):
    x = rand(rng, 5, 6, 7)
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": np.array([0, 42], I64)})
    _compare(model, {"x": x}, backend)


PERMS = [
    ((2, 3, 5, 7), [0, 2, 3, 1]),
    ((2, 3, 37, 41), [0, 1, 3, 2]),  # tiled
    ((13, 31), [1, 0]),  # tiled, odd sizes
    ((3, 13, 31), None),  # reversed (empty perm): a tiled axis of 3, strided
    ((2, 7, 3, 5, 4), [2, 0, 3, 1, 4]),  # PP-OCRv4 rec: innermost stays, strided
    ((1, 5, 17, 9, 2, 3), [5, 3, 1, 0, 2, 4]),  # rank 6
    ((2, 19, 1, 23), [0, 3, 2, 1]),  # size-1 axis, tiled
    ((4, 9, 11), [0, 2, 1]),  # tiled, partial tiles
    ((2, 3, 4, 5), [0, 1, 2, 3]),  # identity perm: one contiguous copy (Vulkan: 4 elements per invocation)
    ((3, 5, 40), [2, 0, 1]),  # merged dims (3*5) -> tiled
    ((2, 3, 2, 3, 2, 3, 2, 3), [7, 5, 3, 1, 6, 4, 2, 0]),  # rank 8, nothing merges
    ((3, 70, 9), [1, 0, 2]),  # innermost stays, long run of 9: vectorised strided copy
    ((2, 3, 4, 2, 3, 4, 5), [6, 1, 0, 3, 2, 5, 4]),  # tiled with 5 batch axes
]
TILED = ((2, 3, 37, 41), (13, 31), (2, 19, 1, 23), (4, 9, 11), (3, 5, 40))  # the Vulkan shader's tiled path


@pytest.mark.parametrize("shape,perm", PERMS, ids=[f"{s}-{p}" for s, p in PERMS])
@pytest.mark.parametrize("backend", gpu_backends())
def test_transpose(rng, backend, shape, perm):
    x = rand(rng, *shape)
    attrs = {} if perm is None else {"perm": perm}
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    s = _compare(model, {"x": x}, backend)
    if backend == "vulkan":
        (exe,) = _executions(s, "Transpose")
        assert exe.tiled == (shape in TILED)
        assert exe.dispatches[-1].pipeline is not None


@pytest.mark.parametrize("backend", gpu_backends())
def test_transpose_rank_9_falls_back(rng, backend):
    """Nine dims that stay apart after merging exceed the kernels' index arrays: CPU, with the reason."""
    x = rand(rng, *([2] * 9))
    model = make_model([helper.make_node("Transpose", ["x"], ["y"])], {"x": x}, ["y"])
    s = _compare(model, {"x": x}, backend, on_device=False)
    assert f"fell back: {backend}: transpose of rank 9 after merging dims" in s.partitions()


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
@pytest.mark.parametrize("backend", gpu_backends())
def test_slice(rng, backend, shape, starts, ends, axes, steps):
    x = rand(rng, *shape)
    inits = {"st": np.array(starts, I64), "en": np.array(ends, I64), "ax": np.array(axes, I64)}
    names = ["x", "st", "en", "ax"]
    if steps is not None:
        inits["sp"] = np.array(steps, I64)
        names.append("sp")
    model = make_model([helper.make_node("Slice", names, ["y"])], {"x": x}, ["y"], inits)
    _compare(model, {"x": x}, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_slice_without_axes(rng, backend):
    x = rand(rng, 11, 9)
    inits = {"st": np.array([2, -4], I64), "en": np.array([9, -1], I64)}
    model = make_model([helper.make_node("Slice", ["x", "st", "en"], ["y"])], {"x": x}, ["y"], inits)
    _compare(model, {"x": x}, backend)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("backend", gpu_backends())
def test_concat(rng, backend, axis):
    shapes = [[3, 5, 7], [3, 5, 7], [3, 5, 7]]
    for k, n in enumerate((2, 9, 1)):
        shapes[k][axis] = n
    xs = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    model = make_model([helper.make_node("Concat", list(xs), ["y"], axis=axis)], xs, ["y"])
    _compare(model, xs, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_concat_with_constant_and_empty(rng, backend):
    a, c = rand(rng, 2, 3, 5), rand(rng, 2, 4, 5)
    e = np.zeros((2, 0, 5), np.float32)
    model = make_model([helper.make_node("Concat", ["a", "e", "c"], ["y"], axis=1)], {"a": a, "e": e}, ["y"], {"c": c})
    _compare(model, {"a": a, "e": e}, backend)


@pytest.mark.parametrize("split,axis", [([2, 5, 6], 1), (None, 1), ([1, 1, 1], 0), ([3, 2, 2], -1)])
@pytest.mark.parametrize("backend", gpu_backends())
def test_split(rng, backend, split, axis):
    x = {1: rand(rng, 3, 13, 7) if split else rand(rng, 3, 12, 7), 0: rand(rng, 3, 13, 7), -1: rand(rng, 3, 13, 7)}[axis]
    names, inits = ["x"], {}
    if split:
        names.append("sp")
        inits["sp"] = np.array(split, I64)
    model = make_model([helper.make_node("Split", names, ["a", "b", "c"], axis=axis)], {"x": x}, ["a", "b", "c"], inits)
    _compare(model, {"x": x}, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_ocr_rec_like_chain(rng, backend):
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
    _compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, backend)


GATHERS = [
    ((7, 13, 5), 1, [[3, -1], [0, 12]]),
    ((7, 13, 5), 0, 2),  # scalar index: the axis goes
    ((9, 31), -1, [30, 0, 0, 17]),
    ((4, 6), 0, []),  # empty output
    ((3, 65, 1), 1, list(range(64, -1, -3))),
]


@pytest.mark.parametrize("shape,axis,indices", GATHERS, ids=[str(i) for i in range(len(GATHERS))])
@pytest.mark.parametrize("backend", gpu_backends())
def test_gather_constant_indices(rng, backend, shape, axis, indices):
    x = rand(rng, *shape)
    i = np.array(indices, I64).reshape(np.shape(indices))
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], {"x": x}, ["y"], {"i": i})
    _compare(model, {"x": x}, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_gather_indices_at_run_time_fall_back(rng, backend):
    x, i = rand(rng, 5, 7), np.array([1, 3], I64)
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x, "i": i}, ["y"])
    s = _compare(model, {"x": x, "i": i}, backend, on_device=False)
    assert f"fell back: {backend}: dtype int64" in s.partitions()

"""OpenCL data movement against the CPU backend, exact: Reshape-likes (aliasing), Transpose,
Slice, Concat, Split. Skipped, with the reason, where no OpenCL device is usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)

EXACT = (0.0, 0.0)
I64 = np.int64


def _executions(session, op_type):
    plan = session._plan
    return [e for e in plan.executions.values() if e.op.type == op_type]


def _chain(middle, x, inits=None):
    """x -> Relu -> <middle nodes: 'r' -> 'm'> -> Relu -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), *middle, helper.make_node("Relu", ["m"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits or {})


@pytest.mark.parametrize(
    "kind",
    ["reshape", "flatten", "squeeze", "unsqueeze", "identity"],
)
def test_reshape_likes_alias(rng, kind):
    """Relu -> <reshape-like> -> Relu: the planner shares the buffer, nothing is launched."""
    from mnnpy.backends.opencl.movement import _noop

    x = rand(rng, 3, 1, 7, 13)
    middle = {
        "reshape": ([helper.make_node("Reshape", ["r", "s"], ["m"])], {"s": np.array([7, -1, 3], I64)}),
        "flatten": ([helper.make_node("Flatten", ["r"], ["m"], axis=2)], {}),
        "squeeze": ([helper.make_node("Squeeze", ["r", "ax"], ["m"])], {"ax": np.array([1], I64)}),
        "unsqueeze": ([helper.make_node("Unsqueeze", ["r", "ax"], ["m"])], {"ax": np.array([0, 5], I64)}),
        "identity": ([helper.make_node("Identity", ["r"], ["m"])], {}),
    }[kind]
    s = compare(_chain(middle[0], x, middle[1]), {"x": x}, EXACT)
    op = {"reshape": "Reshape", "flatten": "Flatten", "squeeze": "Squeeze", "unsqueeze": "Unsqueeze", "identity": "Identity"}[
        kind
    ]
    exes = _executions(s, op)
    if not exes:  # the converter drops an Identity between two ops: alone, graph input -> output, it stays
        assert kind == "identity"
        s = compare(make_model([helper.make_node("Identity", ["x"], ["m"])], {"x": x}, ["m"]), {"x": x}, EXACT)
        exes = _executions(s, op)
    (exe,) = exes
    plan = s._plan
    h = plan.handles[0]
    src, dst = exe.op.inputs[0], exe.op.outputs[0]
    assert exe.aliased and exe.launch is _noop
    assert h[src].buffer == h[dst].buffer and h[src].offset == h[dst].offset


def test_reshape_of_graph_input_and_output(rng):
    x = rand(rng, 5, 6, 7)
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": np.array([0, 42], I64)})
    compare(model, {"x": x}, EXACT)


def test_reshape_not_aliased_copies(rng):
    """When the planner could not alias (here: a constant input, own buffer), one copy kernel runs."""
    from mnnpy.backend import BackendConfig, TensorInfo, get_runtime
    from mnnpy.backends.opencl.movement import Reshape
    from mnnpy.ir import Op

    w = rand(rng, 5, 21)
    backend = get_runtime("opencl").create_backend(BackendConfig())
    backend.allocate_arena(4096)
    f32 = np.dtype(np.float32)
    w_info, s_info = TensorInfo(0, "w", w.shape, f32, w), TensorInfo(1, "s", (2,), np.dtype(I64), np.array([3, 35], I64))
    y_info = TensorInfo(2, "y", (3, 35), f32)
    x, y = backend.acquire_constant(w_info), backend.acquire(y_info, 64)
    exe = Reshape(backend, Op("Reshape", "r", [0, 1], [2]), {"allowzero": 0}, [w_info, s_info], [y_info])
    exe.on_resize([x, None], [y])
    assert not exe.aliased
    exe.on_execute([x, None], [y])
    np.testing.assert_array_equal(backend.download(y), w.reshape(3, 35))


PERMS = [
    ((2, 3, 5, 7), [0, 2, 3, 1]),
    ((2, 3, 37, 41), [0, 1, 3, 2]),  # tiled
    ((13, 31), [1, 0]),  # tiled, odd sizes
    ((3, 13, 31), None),  # reversed (empty perm)
    ((2, 7, 3, 5, 4), [2, 0, 3, 1, 4]),  # PP-OCRv4 rec: innermost stays
    ((1, 5, 17, 9, 2, 3), [5, 3, 1, 0, 2, 4]),  # rank 6
    ((2, 19, 1, 23), [0, 3, 2, 1]),  # size-1 axis, tiled
    ((4, 9, 11), [0, 2, 1]),
    ((2, 3, 4, 5), [0, 1, 2, 3]),  # identity perm: one contiguous copy
    ((3, 5, 40), [2, 0, 1]),  # merged dims (3*5) -> tiled
]


@pytest.mark.parametrize("shape,perm", PERMS, ids=[f"{s}-{p}" for s, p in PERMS])
def test_transpose(rng, shape, perm):
    x = rand(rng, *shape)
    attrs = {} if perm is None else {"perm": perm}
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    compare(model, {"x": x}, EXACT)


def test_transpose_fp16(rng):
    x = rand(rng, 3, 37, 29)
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])], {"x": x}, ["y"])
    s = compare(model, {"x": x}, (5 * 2**-10, 5 * 2**-10), precision="low")
    got = s.run({"x": x})["y"]
    np.testing.assert_array_equal(got, np.transpose(x.astype(np.float16), (0, 2, 1)).astype(np.float32))


SLICES = [
    ((7, 13, 5), [1, 2], [6, 11], [0, 1], None),
    ((7, 13, 5), [-1], [-100], [1], [-1]),  # negative step, whole axis reversed
    ((7, 13, 5), [5, 0, 4], [0, 13, -100], [0, 1, 2], [-2, 3, -1]),
    ((7, 13, 5), [0], [2**62], [2], None),  # clamped end: whole axis
    ((9, 31), [3], [3], [0], None),  # empty output
    ((2, 3, 4, 5, 6, 7), [1, 1, 0], [2, 3, 7], [1, 3, 5], [1, 2, 3]),  # rank 6
    ((3, 20, 4), [0], [1], [0], None),  # PP-OCRv4 rec: first of dim 0
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
    compare(model, {"x": x}, EXACT)


def test_slice_without_axes(rng):
    x = rand(rng, 11, 9)
    inits = {"st": np.array([2, -4], I64), "en": np.array([9, -1], I64)}
    model = make_model([helper.make_node("Slice", ["x", "st", "en"], ["y"])], {"x": x}, ["y"], inits)
    compare(model, {"x": x}, EXACT)


def test_transpose_rank_9_falls_back(rng):
    """Nine dims that stay apart after merging exceed the kernels' int8 index: CPU, with the reason."""
    x = rand(rng, *([2] * 9))
    model = make_model([helper.make_node("Transpose", ["x"], ["y"])], {"x": x}, ["y"])
    s = compare(model, {"x": x}, EXACT, on_device=False)
    assert "fell back: opencl: transpose of rank 9 after merging dims" in s.partitions()


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concat(rng, axis):
    shapes = [[3, 5, 7], [3, 5, 7], [3, 5, 7]]
    for k, n in enumerate((2, 9, 1)):
        shapes[k][axis] = n
    xs = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    model = make_model([helper.make_node("Concat", list(xs), ["y"], axis=axis)], xs, ["y"])
    compare(model, xs, EXACT)


def test_concat_with_constant_and_empty(rng):
    a, c = rand(rng, 2, 3, 5), rand(rng, 2, 4, 5)
    e = np.zeros((2, 0, 5), np.float32)
    model = make_model([helper.make_node("Concat", ["a", "e", "c"], ["y"], axis=1)], {"a": a, "e": e}, ["y"], {"c": c})
    compare(model, {"a": a, "e": e}, EXACT)


def test_concat_fp16(rng):
    xs = {"a": rand(rng, 1, 3, 7, 9), "b": rand(rng, 1, 5, 7, 9)}
    model = make_model([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], xs, ["y"])
    compare(model, xs, (5 * 2**-10, 5 * 2**-10), precision="low")


@pytest.mark.parametrize("split", [[2, 5, 6], None])
def test_split(rng, split):
    x = rand(rng, 3, 13, 7) if split else rand(rng, 3, 12, 7)
    names, inits = ["x"], {}
    if split:
        names.append("sp")
        inits["sp"] = np.array(split, I64)
    model = make_model([helper.make_node("Split", names, ["a", "b", "c"], axis=1)], {"x": x}, ["a", "b", "c"], inits)
    compare(model, {"x": x}, EXACT)


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
    compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, EXACT)


GATHERS = [((7, 13, 5), 1, [[3, -1], [0, 12]]), ((7, 13, 5), 0, 2), ((9, 31), -1, [30, 0, 0, 17]), ((4, 6), 0, [])]


@pytest.mark.parametrize("shape,axis,indices", GATHERS, ids=[str(i) for i in range(len(GATHERS))])
def test_gather_constant_indices(rng, shape, axis, indices):
    x = rand(rng, *shape)
    model = make_model(
        [helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)],
        {"x": x},
        ["y"],
        {"i": np.array(indices, I64).reshape(np.shape(indices))},
    )
    compare(model, {"x": x}, EXACT)


def test_gather_indices_at_run_time_fall_back(rng):
    x, i = rand(rng, 5, 7), np.array([1, 3], I64)
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x, "i": i}, ["y"])
    s = compare(model, {"x": x, "i": i}, EXACT, on_device=False)
    assert "fell back: opencl: dtype int64" in s.partitions()

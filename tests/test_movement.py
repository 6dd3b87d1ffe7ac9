"""Data movement on every backend, exact: Reshape and the reshape-likes (Flatten, Squeeze,
Unsqueeze, Identity), Transpose, Slice, Concat, Split, Gather. The CPU backend against
onnxruntime, each GPU backend against the CPU (``tests/backend_compare.py``), all ``EXACT``.
Tests without a ``backend`` parameter run the CPU backend against onnxruntime; the shape and
indexing ops only the CPU runs (Shape, Cast, Expand, Tile, Scatter*, ...) are in
tests/test_shape_ops.py.

CPU: every opset form of the attributes, allowzero, negative and huge slice steps, integer
data, indices fed at run time and out of range. GPU (OpenCL, Vulkan; skipped with the reason
where the driver is missing): aliasing (the planner shares buffers; one copy where it cannot),
strided and tiled Transpose up to rank 8, Slice with negative steps, Concat of many inputs,
Gather with indices known at resize, recordings reused, more invocations than one row of work
groups, fp16 storage, the reshape-likes, Slice and Split of int32, int64 and bool data, and the
fallbacks with their reasons.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import (
    backend_cases,
    backend_module,
    check_backend,
    check_op,
    executions,
    gpu_backends,
    recorded_dispatches,
    storage_dtype,
    tensor_handles,
)
from tests.oracle import EXACT, HALF, check, make_model, rand

I64 = np.int64
INT64_MAX, INT64_MIN = np.iinfo(I64).max, np.iinfo(I64).min


def _one(op, x, inits=None, opset=17, ins=None, **attrs):
    """A one-node model of ``op`` on input ``x`` plus constant ``inits`` (in order)."""
    names = ins or (["x"] + list(inits or {}))
    node = helper.make_node(op, names, ["y"], **attrs)
    return make_model([node], {"x": x}, ["y"], inits, opset=opset)


def _chain(middle, x, inits=None):
    """x -> Relu -> <middle nodes: 'r' -> 'm'> -> Relu -> y."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), *middle, helper.make_node("Relu", ["m"], ["y"])]
    return make_model(nodes, {"x": x}, ["y"], inits or {})


# -- Reshape and the reshape-likes -------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,target",
    [
        ((2, 3, 4), [4, -1]),
        ((2, 3, 4), [0, -1]),
        ((2, 3, 4), [0, 0, 2, 2]),
        ((2, 3, 4), [-1]),
        ((2, 3, 4), [2, 1, 12, 1]),
        ((1, 13), [13]),
        ((5,), [1, 5, 1]),
        ((2, 3, 4), [-1, 0, 4]),
    ],
)
def test_reshape(rng, shape, target):
    x = rand(rng, *shape)
    check(_one("Reshape", x, {"s": np.array(target, I64)}), {"x": x}, **EXACT)


def test_reshape_allowzero(rng):
    """allowzero=1: a 0 in ``shape`` is a real 0 (empty output)."""
    x = rand(rng, 0, 3)
    check(_one("Reshape", x, {"s": np.array([3, 0], I64)}, opset=14, allowzero=1), {"x": x}, **EXACT)


def test_reshape_of_constant_and_chained(rng):
    """A reshape of a constant (not aliasable) followed by one of a dynamic tensor."""
    x = rand(rng, 6, 2)
    w = rand(rng, 3, 4)
    nodes = [
        helper.make_node("Reshape", ["w", "s"], ["w2"]),
        helper.make_node("Reshape", ["x", "s"], ["x2"]),
        helper.make_node("Add", ["x2", "w2"], ["y"]),
        helper.make_node("Reshape", ["y", "s2"], ["z"]),
    ]
    m = make_model(nodes, {"x": x}, ["y", "z"], {"w": w, "s": np.array([12], I64), "s2": np.array([2, 6], I64)})
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("axis,opset", [(a, o) for a in [0, 1, 2, 4, -1, -4] for o in [9, 13] if a >= 0 or o >= 11])
def test_flatten(rng, axis, opset):
    x = rand(rng, 2, 3, 5, 7)
    check(_one("Flatten", x, opset=opset, axis=axis), {"x": x}, **EXACT)


@pytest.mark.parametrize("axes", [None, [0], [-1], [0, 2], [2, -5]])
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze(rng, axes, opset):
    x = rand(rng, 1, 3, 1, 7, 1)
    if axes is None:
        m = _one("Squeeze", x, opset=opset)
    elif opset < 13:
        m = _one("Squeeze", x, opset=opset, axes=axes)
    else:
        m = _one("Squeeze", x, {"axes": np.array(axes, I64)}, opset=opset)
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("axes", [[0], [-1], [0, 3], [1, -1], [4, 0, 2]])
@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze(rng, axes, opset):
    x = rand(rng, 3, 5)
    if opset < 13:
        m = _one("Unsqueeze", x, opset=opset, axes=axes)
    else:
        m = _one("Unsqueeze", x, {"axes": np.array(axes, I64)}, opset=opset)
    check(m, {"x": x}, **EXACT)


def test_unsqueeze_scalar(rng):
    x = np.array(3.5, np.float32)
    check(_one("Unsqueeze", x, {"axes": np.array([0], I64)}), {"x": x}, **EXACT)


RESHAPES = {
    "Reshape": ([helper.make_node("Reshape", ["r", "s"], ["m"])], {"s": np.array([7, -1, 3], I64)}),
    "Flatten": ([helper.make_node("Flatten", ["r"], ["m"], axis=2)], {}),
    "Squeeze": ([helper.make_node("Squeeze", ["r", "ax"], ["m"])], {"ax": np.array([1], I64)}),
    "Unsqueeze": ([helper.make_node("Unsqueeze", ["r", "ax"], ["m"])], {"ax": np.array([0, 5], I64)}),
    "Identity": ([helper.make_node("Identity", ["r"], ["m"])], {}),
}


def _check_alias(session, exe, backend):
    """Assert how a reshape-like Execution ``exe`` of ``session`` shares or copies its input's buffer."""
    h = tensor_handles(session)
    src, dst = h[exe.op.inputs[0]], h[exe.op.outputs[0]]
    if backend == "opencl":  # the planner shares the buffer, nothing is launched
        assert exe.aliased and not exe.launches
        assert src.buffer == dst.buffer and src.offset == dst.offset
    else:  # aliased (nothing dispatched) where the backend lets the planner share the buffer, else one copy
        assert exe.aliased == (src.memory is dst.memory and src.offset == dst.offset)
        if len(exe.op.inputs) and exe.backend.can_alias(exe.op) and len(executions(session, "Relu")) == 2:
            assert exe.aliased  # between two Relus: the planner shares the buffer
        assert len(recorded_dispatches(session, exe)) == len(executions(session, "Relu")) + (not exe.aliased)


@pytest.mark.parametrize("op", list(RESHAPES))
@pytest.mark.parametrize("backend", gpu_backends())
def test_reshape_likes(rng, backend, op):
    """Relu -> <reshape-like> -> Relu: the planner shares the buffer (OpenCL: always; Vulkan:
    where the backend lets it, else one copy); exact either way."""
    x = rand(rng, 3, 1, 7, 13)
    nodes, inits = RESHAPES[op]
    s = check_backend(_chain(nodes, x, inits), {"x": x}, EXACT, backend)
    exes = executions(s, op)
    if not exes:  # the converter drops an Identity between two ops: alone, graph input -> output, it stays
        assert op == "Identity"
        s = check_backend(make_model([helper.make_node("Identity", ["x"], ["m"])], {"x": x}, ["m"]), {"x": x}, EXACT, backend)
        exes = executions(s, op)
    (exe,) = exes
    _check_alias(s, exe, backend)


TYPED = [np.int32, np.int64, np.bool_]  # copied as they are by the strided copies


def _typed(rng, dtype, *shape) -> np.ndarray:
    """Seeded data of ``dtype``: integers over the whole range (int64 far beyond 2**31), or bools."""
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def _typed_chain(middle, x, inits=None):
    """x -> F -> <middle nodes: 'r' -> 'm'> -> F -> y, F computed on the device in x's dtype:
    ``+ 1`` for integers, Not for bool."""
    if x.dtype == np.bool_:
        ends = [helper.make_node("Not", ["x"], ["r"]), helper.make_node("Not", ["m"], ["y"])]
    else:
        inits = {**(inits or {}), "one": np.array(1, x.dtype)}
        ends = [helper.make_node("Add", ["x", "one"], ["r"]), helper.make_node("Add", ["m", "one"], ["y"])]
    return make_model([ends[0], *middle, ends[1]], {"x": x}, ["y"], inits or {})


@pytest.mark.parametrize("dtype", TYPED, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(RESHAPES))
@pytest.mark.parametrize("backend", gpu_backends())
def test_reshape_likes_of_integers_and_bool(rng, backend, op, dtype):
    """The reshape-likes (Identity too) of int32, int64 and bool data stay on the device,
    between two ops of that dtype."""
    x = _typed(rng, dtype, 3, 1, 7, 13)
    nodes, inits = RESHAPES[op]
    check_backend(_typed_chain(nodes, x, inits), {"x": x}, EXACT, backend)


@pytest.mark.parametrize("dtype", TYPED, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("backend", gpu_backends())
def test_strided_copies_of_integers_and_bool(rng, backend, dtype):
    """Slice (negative steps, vectorised rows, a rank-0 result's neighbours), Split and Identity
    of a graph input copy int32, int64 and bool data bit for bit on the device."""
    x = _typed(rng, dtype, 4, 5, 37)
    nodes = [
        helper.make_node("Slice", ["r", "st", "en", "ax", "sp"], ["a"]),
        helper.make_node("Split", ["r", "parts"], ["b0", "b1"], axis=2),
        helper.make_node("Identity", ["x"], ["c"]),
    ]
    inits = {"st": np.array([3, 1], I64), "en": np.array([0, 37], I64), "ax": np.array([0, 2], I64), "sp": np.array([-1, 2], I64)}
    inits["parts"] = np.array([30, 7], I64)
    model = _typed_chain([*nodes, helper.make_node("Identity", ["a"], ["m"])], x, inits)
    model.graph.output.extend([helper.make_empty_tensor_value_info(n) for n in ("b0", "b1", "c")])
    check_backend(model, {"x": x}, EXACT, backend)


@pytest.mark.parametrize("backend", gpu_backends())
def test_reshape_of_graph_input_and_output(rng, backend):
    x = rand(rng, 5, 6, 7)
    model = make_model([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": x}, ["y"], {"s": np.array([0, 42], I64)})
    check_backend(model, {"x": x}, EXACT, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_reshape_of_constant_copies(rng, backend):
    """A constant input has its own place: the output gets one copy."""
    w, x = rand(rng, 5, 21), rand(rng, 3, 35)
    nodes = [helper.make_node("Reshape", ["w", "s"], ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    inits = {"w": w, "s": np.array([3, 35], I64)}
    s = check_backend(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, EXACT, backend)
    for exe in executions(s, "Reshape"):  # the converter may have folded it into a constant
        assert not exe.aliased


@pytest.mark.parametrize("backend", gpu_backends("opencl"))
def test_reshape_not_aliased_copies(rng, backend):
    """When the planner could not alias (here: a constant input, own buffer), one copy kernel runs."""
    from mnnpy.backend import BackendConfig, OpInfo, TensorInfo, get_runtime
    from mnnpy.ir import Op

    w = rand(rng, 5, 21)
    gpu = get_runtime(backend).create_backend(BackendConfig())
    gpu.allocate_arena(4096)
    f32 = np.dtype(np.float32)
    w_info, s_info = TensorInfo(0, "w", w.shape, f32, w), TensorInfo(1, "s", (2,), np.dtype(I64), np.array([3, 35], I64))
    y_info = TensorInfo(2, "y", (3, 35), f32)
    x, y = gpu.acquire_constant(w_info), gpu.acquire(y_info, 64)
    info = OpInfo(0, Op("Reshape", "r", [0, 1], [2]), {"allowzero": 0}, (w_info, s_info), (y_info,))
    exe = backend_module(backend, "movement").Reshape(gpu, info)
    exe.on_resize([x, None], [y])
    assert not exe.aliased
    exe.on_execute([x, None], [y])
    np.testing.assert_array_equal(gpu.download(y), w.reshape(3, 35))


# -- Transpose -----------------------------------------------------------------------------

GPU_PERMS = [
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
PERMS = {
    "cpu": [((2, 3, 5, 7), perm) for perm in [None, [0, 2, 3, 1], [3, 2, 1, 0], [1, 0, 2, 3], [0, 1, 2, 3]]],
    "opencl": GPU_PERMS,
    "vulkan": GPU_PERMS,
}


@pytest.mark.parametrize("backend,shape,perm", backend_cases(PERMS, ids=lambda c: f"{c[0]}-{c[1]}"))
def test_transpose(rng, backend, shape, perm):
    x = rand(rng, *shape)
    attrs = {} if perm is None else {"perm": perm}
    s = check_backend(_one("Transpose", x, **attrs), {"x": x}, EXACT, backend)
    if backend == "vulkan":
        (exe,) = executions(s, "Transpose")
        assert exe.tiled == (shape in TILED)
        assert recorded_dispatches(s, exe)[-1].pipeline is not None


@pytest.mark.parametrize("backend", gpu_backends())
def test_transpose_rank_9_falls_back(rng, backend):
    """Nine dims that stay apart after merging exceed the kernels' index arrays: CPU, with the reason."""
    x = rand(rng, *([2] * 9))
    s = check_backend(_one("Transpose", x), {"x": x}, EXACT, backend, on_device=False)
    assert f"fell back: {backend}: transpose of rank 9 after merging dims" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("opencl", precision="low"))
def test_transpose_fp16(rng, backend):
    """fp16 storage copies exactly: the result is the fp16-rounded input, transposed."""
    x = rand(rng, 3, 37, 29)
    s = check_backend(_one("Transpose", x, perm=[0, 2, 1]), {"x": x}, HALF, backend, precision="low")
    got = s.run({"x": x})["y"]
    np.testing.assert_array_equal(got, np.transpose(x.astype(np.float16), (0, 2, 1)).astype(np.float32))


# -- Slice ---------------------------------------------------------------------------------

# (x shape, starts, ends, axes, steps)
SLICES = {
    "cpu": [
        ((5, 7, 9), *c)
        for c in [
            ([1], [4], [1], [1]),
            ([0, 1], [2, 5], [0, 2], None),
            ([-3], [-1], [1], [1]),
            ([4], [0], [1], [-1]),  # negative step
            ([-1], [INT64_MIN], [2], [-2]),  # backwards to the beginning
            ([INT64_MAX], [-100], [0], [-1]),  # out-of-range start, walk all backwards
            ([1], [INT64_MAX], [-1], [1]),  # INT64 max end
            ([-100], [100], [1], [3]),  # out-of-range both ends
            ([5], [1], [1], [1]),  # empty
            ([2, 0, 1], [-1, 3, 4], [-1, 0, 1], [1, 2, 2]),
            ([0], [1000], [0], [INT64_MAX]),  # a huge step
        ]
    ],
    **dict.fromkeys(
        ("opencl", "vulkan"),
        [
            ((7, 13, 5), [1, 2], [6, 11], [0, 1], None),
            ((7, 13, 5), [-1], [-100], [1], [-1]),  # negative step, whole axis reversed
            ((7, 13, 5), [5, 0, 4], [0, 13, -100], [0, 1, 2], [-2, 3, -1]),
            ((7, 13, 5), [0], [2**62], [2], None),  # clamped end: whole axis
            ((9, 31), [3], [3], [0], None),  # empty output
            ((2, 3, 4, 5, 6, 7), [1, 1, 0], [2, 3, 7], [1, 3, 5], [1, 2, 3]),  # rank 6
            ((3, 20, 4), [0], [1], [0], None),  # PP-OCRv4 rec: first of dim 0
            ((5, 40), [-3], [-38], [-1], [-2]),  # negative axis and step on the innermost, 19 elements
        ],
    ),
}


@pytest.mark.parametrize("backend,shape,starts,ends,axes,steps", backend_cases(SLICES))
def test_slice(rng, backend, shape, starts, ends, axes, steps):
    x = rand(rng, *shape)
    inits = {"st": np.array(starts, I64), "en": np.array(ends, I64), "ax": np.array(axes, I64)}
    if steps is not None:
        inits["sp"] = np.array(steps, I64)
    check_backend(_one("Slice", x, inits), {"x": x}, EXACT, backend)


def test_slice_no_axes_int32(rng):
    x = rand(rng, 5, 7)
    inits = {"s": np.array([1, -3], np.int32), "e": np.array([-1, 100], np.int32)}
    check(_one("Slice", x, inits), {"x": x}, **EXACT)


@pytest.mark.parametrize("backend", gpu_backends())
def test_slice_without_axes(rng, backend):
    x = rand(rng, 11, 9)
    inits = {"st": np.array([2, -4], I64), "en": np.array([9, -1], I64)}
    check_backend(_one("Slice", x, inits), {"x": x}, EXACT, backend)


@pytest.mark.parametrize("starts,ends,axes", [([1], [4], None), ([0, 2], [-1, 100], [1, 0]), ([-2], [2**62], [1])])
def test_slice_opset9(rng, starts, ends, axes):
    x = rand(rng, 5, 7)
    attrs = {"starts": starts, "ends": ends} | ({"axes": axes} if axes else {})
    check(_one("Slice", x, opset=9, **attrs), {"x": x}, **EXACT)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_slice_values_from_graph_input(rng, backend):
    """Starts fed as a graph input are read at resize (a value input): still one copy on Vulkan."""
    x, st = rand(rng, 5, 7), np.array([1], I64)
    inits = {"en": np.array([4], I64)}
    model = make_model([helper.make_node("Slice", ["x", "st", "en"], ["y"])], {"x": x, "st": st}, ["y"], inits)
    check_backend(model, {"x": x, "st": st}, EXACT, backend)


def _declines(backend, cls, op, inputs, attrs):
    """``(ok, why)`` of a GPU Execution class's check() for an op with ``inputs`` (TensorInfo)."""
    return check_op(backend, "movement", cls, op, inputs, attrs)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_slice_values_unknown_fall_back(backend):
    from mnnpy.backend import TensorInfo
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(np.float32))
    st, en = TensorInfo(1, "st", (1,), np.dtype(I64)), TensorInfo(2, "en", (1,), np.dtype(I64), np.array([3], I64))
    ok, why = _declines(backend, "Slice", Op("Slice", "s", [0, 1, 2], [3]), [x, st, en], {})
    assert not ok and "computed at run time" in why


# -- Concat --------------------------------------------------------------------------------

# (base shape, sizes along the axis, axis)
CONCATS = {
    "cpu": [((2, 3, 4), (1, 3, 5), axis) for axis in [0, 1, 2, -1, -3]],
    **dict.fromkeys(("opencl", "vulkan"), [((3, 5, 7), (2, 9, 1), axis) for axis in [0, 1, 2, -1]]),
}


@pytest.mark.parametrize("backend,base,sizes,axis", backend_cases(CONCATS, ids=lambda c: f"axis{c[2]}"))
def test_concat(rng, backend, base, sizes, axis):
    shapes = [list(base) for _ in sizes]
    for s, n in zip(shapes, sizes):
        s[axis] = n
    xs = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    model = make_model([helper.make_node("Concat", list(xs), ["y"], axis=axis)], xs, ["y"])
    check_backend(model, xs, EXACT, backend)


def test_concat_empty_and_const(rng):
    a, e = rand(rng, 2, 3), rand(rng, 2, 0)
    node = helper.make_node("Concat", ["a", "e", "c", "a"], ["y"], axis=1)
    m = make_model([node], {"a": a, "e": e}, ["y"], {"c": np.arange(10, dtype=np.float32).reshape(2, 5)})
    check(m, {"a": a, "e": e}, **EXACT)


def test_concat_int64(rng):
    a, b = rng.integers(-5, 5, (3,)).astype(I64), rng.integers(-5, 5, (4,)).astype(I64)
    node = helper.make_node("Concat", ["a", "b"], ["y"], axis=0)
    check(make_model([node], {"a": a, "b": b}, ["y"]), {"a": a, "b": b}, **EXACT)


@pytest.mark.parametrize("backend", gpu_backends())
def test_concat_with_constant_and_empty(rng, backend):
    a, c = rand(rng, 2, 3, 5), rand(rng, 2, 4, 5)
    e = np.zeros((2, 0, 5), np.float32)
    model = make_model([helper.make_node("Concat", ["a", "e", "c"], ["y"], axis=1)], {"a": a, "e": e}, ["y"], {"c": c})
    check_backend(model, {"a": a, "e": e}, EXACT, backend)


@pytest.mark.parametrize("count,axis", [(7, 1), (9, 3), (5, 0), (4, 2)])
@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_concat_many_inputs(rng, backend, count, axis):
    """Up to 4 inputs per dispatch: 7 inputs take 2 dispatches, 9 take 3 (the last with one)."""
    shapes = [[2, 3, 4, 5] for _ in range(count)]
    for k, s in enumerate(shapes):
        s[axis] = k % 3 + 1
    xs = {f"x{k}": rand(rng, *s) for k, s in enumerate(shapes)}
    model = make_model([helper.make_node("Concat", list(xs), ["y"], axis=axis)], xs, ["y"])
    s = check_backend(model, xs, EXACT, backend)
    (exe,) = executions(s, "Concat")
    assert len(recorded_dispatches(s, exe)) == -(-count // 4)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_concat_integer_falls_back(rng, backend):
    a = rng.integers(-5, 5, (2, 3)).astype(np.int32)
    model = make_model([helper.make_node("Concat", ["a", "a"], ["y"], axis=0)], {"a": a}, ["y"])
    s = check_backend(model, {"a": a}, EXACT, backend, on_device=False)
    assert "fell back: vulkan: dtype int32" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("opencl", precision="low"))
def test_concat_fp16(rng, backend):
    xs = {"a": rand(rng, 1, 3, 7, 9), "b": rand(rng, 1, 5, 7, 9)}
    model = make_model([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], xs, ["y"])
    check_backend(model, xs, HALF, backend, precision="low")


# -- Split -----------------------------------------------------------------------------------


def _split(x, outs, opset, split=None, **attrs):
    """A Split of ``x`` into ``outs`` outputs, ``split`` as an attribute (opset < 13) or an input."""
    names = [f"y{k}" for k in range(outs)]
    ins, inits = ["x"], {}
    if split is not None and opset < 13:
        attrs["split"] = split
    elif split is not None:
        ins, inits = ["x", "split"], {"split": np.array(split, np.int64)}
    node = helper.make_node("Split", ins, names, **attrs)
    return make_model([node], {"x": x}, names, inits, opset=opset)


# (x shape, opset, axis, split)
SPLITS = {
    "cpu": [
        ((3, 13, 9), o, a, s)
        for o in [7, 11, 13, 18]
        for a, s in [(0, None), (1, [2, 5, 6]), (-1, [1, 0, 8]), (2, None)]
        if a >= 0 or o >= 11
    ],
    **dict.fromkeys(
        ("opencl", "vulkan"),
        [
            ((3, 13, 7), 17, 1, [2, 5, 6]),
            ((3, 12, 7), 17, 1, None),
            ((3, 13, 7), 17, 0, [1, 1, 1]),
            ((3, 13, 7), 17, -1, [3, 2, 2]),
        ],
    ),
}


@pytest.mark.parametrize("backend,shape,opset,axis,split", backend_cases(SPLITS, ids=lambda c: f"opset{c[1]}-axis{c[2]}-{c[3]}"))
def test_split(rng, backend, shape, opset, axis, split):
    """``split`` as an attribute (< 13), an input (13+), or even parts (``num_outputs``, 18+)."""
    x = rand(rng, *shape)
    n = 3 if split is not None or x.shape[axis] % 3 == 0 else 1
    attrs = {"axis": axis}
    if opset >= 18 and split is None:
        attrs["num_outputs"] = n
    check_backend(_split(x, n, opset, split, **attrs), {"x": x}, EXACT, backend)


@pytest.mark.parametrize("d,n", [(13, 4), (10, 3), (8, 2), (4, 3), (7, 3), (0, 2)])
def test_split_num_outputs_uneven(rng, d, n):
    """Opset 18: chunks of ceil(d / n), the last one smaller, possibly empty (4 into 3: 2, 2, 0)."""
    x = rand(rng, 2, d)
    check(_split(x, n, 18, axis=1, num_outputs=n), {"x": x}, **EXACT)


@pytest.mark.parametrize("d,n", [(5, 4), (2, 4)])
def test_split_num_outputs_negative_last_chunk(rng, d, n):
    """ceil(d / n) chunks that leave the last one negative (5 into 4: 2, 2, 2, -1): refused, as by onnxruntime."""
    x = rand(rng, 2, d)
    with pytest.raises(mnnpy.ShapeError, match="cannot be split into"):
        mnnpy.Interpreter(convert(_split(x, n, 18, axis=1, num_outputs=n))).create_session().run({"x": x})


def test_split_int64_and_unused_output(rng):
    x = rng.integers(-9, 9, (6, 4)).astype(np.int64)
    node = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=0)
    m = make_model([node], {"x": x}, ["a", "c"], {"s": np.array([1, 2, 3], np.int64)}, opset=13)
    check(m, {"x": x}, **EXACT)


def test_split_absent_output(rng):
    """An output with an empty name is absent (onnxruntime crashes on this, so numpy is the reference)."""
    x = rand(rng, 6, 4)
    node = helper.make_node("Split", ["x", "s"], ["a", "", "c"], axis=0)
    m = make_model([node], {"x": x}, ["a", "c"], {"s": np.array([1, 2, 3], np.int64)}, opset=13)
    out = mnnpy.Interpreter(convert(m)).create_session().run({"x": x})
    np.testing.assert_array_equal(out["a"], x[:1])
    np.testing.assert_array_equal(out["c"], x[3:])


def test_split_bad_sizes(rng):
    x = rand(rng, 5, 4)
    m = _split(x, 2, 13, [2, 2], axis=0)
    with pytest.raises(mnnpy.ShapeError, match="split"):
        mnnpy.Interpreter(convert(m)).create_session().run({"x": x})


# -- Gather ----------------------------------------------------------------------------------

# (x shape, axis, constant indices)
GATHERS = {
    "cpu": [((4, 5, 3), axis, i) for i in [[0, -1, 2], [[1, -2], [0, 0]], -3, [2]] for axis in [0, 1, -1, 2]],
    **dict.fromkeys(
        ("opencl", "vulkan"),
        [
            ((7, 13, 5), 1, [[3, -1], [0, 12]]),
            ((7, 13, 5), 0, 2),  # scalar index: the axis goes
            ((9, 31), -1, [30, 0, 0, 17]),
            ((4, 6), 0, []),  # empty output
            ((3, 65, 1), 1, list(range(64, -1, -3))),
        ],
    ),
}


@pytest.mark.parametrize("backend,shape,axis,indices", backend_cases(GATHERS))
def test_gather(rng, backend, shape, axis, indices):
    """Indices known at resize (a constant)."""
    x = rand(rng, *shape)
    i = np.array(indices, I64).reshape(np.shape(indices))
    check_backend(_one("Gather", x, {"i": i}, axis=axis), {"x": x}, EXACT, backend)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_gather_dynamic_indices(rng, dtype):
    x, idx = rand(rng, 6, 4), np.array([[5, -6], [-1, 0], [3, 3]], dtype)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    check(make_model([node], {"x": x, "i": idx}, ["y"]), {"x": x, "i": idx}, **EXACT)


@pytest.mark.parametrize("backend", gpu_backends())
def test_gather_indices_at_run_time_fall_back(rng, backend):
    x, i = rand(rng, 5, 7), np.array([1, 3], I64)
    model = make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": x, "i": i}, ["y"])
    s = check_backend(model, {"x": x, "i": i}, EXACT, backend, on_device=False)
    assert f"fell back: {backend}: dtype int64" in s.partitions()


def test_gather_int_data(rng):
    x = rng.integers(-100, 100, (7, 3)).astype(I64)
    check(_one("Gather", x, {"i": np.array([-7, 6], I64)}, axis=0), {"x": x}, **EXACT)


@pytest.mark.parametrize("bad", [6, -7])
def test_gather_out_of_range(rng, bad):
    """An index outside [-d, d) is a clear MnnpyError (at resize or run), not a crash."""
    x = rand(rng, 6, 4)
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=0)
    m = make_model([node], {"x": x, "i": np.array([0, bad], I64)}, ["y"])
    session = mnnpy.Interpreter(convert(m)).create_session()
    with pytest.raises(mnnpy.MnnpyError, match="out of range"):
        session.run({"x": x, "i": np.array([0, bad], I64)})
    mc = _one("Gather", x, {"i": np.array([bad], I64)})
    with pytest.raises(mnnpy.MnnpyError, match="out of range"):
        mnnpy.Interpreter(convert(mc)).create_session().run({"x": x})


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_gather_index_out_of_range_falls_back(backend):
    from mnnpy.backend import TensorInfo
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(np.float32))
    i = TensorInfo(1, "i", (1,), np.dtype(I64), np.array([5], I64))
    ok, why = _declines(backend, "Gather", Op("Gather", "g", [0, 1], [2]), [x, i], {"axis": 1})
    assert not ok and "out of range" in why


# -- several movement ops --------------------------------------------------------------------


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
    check_backend(make_model(nodes, {"x": x}, ["y"], inits), {"x": x}, EXACT, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_movement_of_integer_data_falls_back(backend):
    from mnnpy.backend import TensorInfo
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (4, 5), np.dtype(I64), np.zeros((4, 5), I64))
    ok, why = _declines(backend, "Transpose", Op("Transpose", "t", [0], [1]), [x], {"perm": []})
    assert not ok and "float32 only" in why


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_movement_recorded_once(rng, backend):
    """A second and third run reuse the recording: same results, no new dispatches."""
    x = rand(rng, 2, 3, 37, 41)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]), helper.make_node("Relu", ["t"], ["y"])]
    s = check_backend(make_model(nodes, {"x": x}, ["y"]), {"x": x}, EXACT, backend)
    (exe,) = executions(s, "Transpose")
    n = len(recorded_dispatches(s, exe))
    for _ in range(2):
        x = rand(rng, 2, 3, 37, 41)
        np.testing.assert_array_equal(s.run({"x": x})["y"], np.maximum(np.transpose(x, (0, 1, 3, 2)), 0))
    assert len(recorded_dispatches(s, exe)) == n


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_beyond_one_row_of_work_groups(rng, backend):
    """More invocations than the device's x group count times 64 (lavapipe: 4194240): the
    groups spill into y. A reversing Slice (one element per invocation) and a batched tiled
    Transpose whose batch exceeds the z group-count limit (the z groups loop)."""
    x = rand(rng, 700_001, 7)  # rows of 7: one element per invocation
    inits = {"st": np.array([-1], I64), "en": np.array([-(2**62)], I64), "ax": np.array([0], I64), "sp": np.array([-1], I64)}
    check_backend(_one("Slice", x, inits), {"x": x}, EXACT, backend)
    x = rand(rng, 66000, 8, 9)
    s = check_backend(_one("Transpose", x, perm=[0, 2, 1]), {"x": x}, EXACT, backend)
    (exe,) = executions(s, "Transpose")
    assert exe.tiled


@pytest.mark.parametrize("backend", gpu_backends("vulkan", precision="low"))
def test_movement_fp16_copies_exactly(rng, backend):
    """Transpose, Slice, Concat, Split, Gather on fp16 storage, fp16-representable input: exact copies."""
    x = rand(rng, 2, 5, 7, 3).astype(np.float16).astype(np.float32)
    inits = {
        "i": np.array([4, 0, 2], np.int64),
        "s0": np.array([1], np.int64),
        "e0": np.array([6], np.int64),
        "a0": np.array([2], np.int64),
        "sp": np.array([2, 3], np.int64),
    }
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Slice", ["x", "s0", "e0", "a0"], ["s"]),
        helper.make_node("Concat", ["x", "x"], ["c"], axis=1),
        helper.make_node("Split", ["x", "sp"], ["p", "q"], axis=1),
        helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
    ]
    s = check_backend(
        make_model(nodes, {"x": x}, ["t", "s", "c", "p", "q", "g"], inits), {"x": x}, EXACT, backend, precision="low"
    )
    assert storage_dtype(s) == np.float16

"""OpenCL-only data movement checks: a Reshape that could not be aliased runs one copy kernel;
fp16 Transpose and Concat. What both GPU backends do is in tests/test_gpu_movement.py.
Skipped, with the reason, where no OpenCL device is usable."""

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


def test_reshape_not_aliased_copies(rng):
    """When the planner could not alias (here: a constant input, own buffer), one copy kernel runs."""
    from mnnpy.backend import BackendConfig, OpInfo, TensorInfo, get_runtime
    from mnnpy.backends.opencl.movement import Reshape
    from mnnpy.ir import Op

    w = rand(rng, 5, 21)
    backend = get_runtime("opencl").create_backend(BackendConfig())
    backend.allocate_arena(4096)
    f32 = np.dtype(np.float32)
    w_info, s_info = TensorInfo(0, "w", w.shape, f32, w), TensorInfo(1, "s", (2,), np.dtype(I64), np.array([3, 35], I64))
    y_info = TensorInfo(2, "y", (3, 35), f32)
    x, y = backend.acquire_constant(w_info), backend.acquire(y_info, 64)
    exe = Reshape(backend, OpInfo(0, Op("Reshape", "r", [0, 1], [2]), {"allowzero": 0}, (w_info, s_info), (y_info,)))
    exe.on_resize([x, None], [y])
    assert not exe.aliased
    exe.on_execute([x, None], [y])
    np.testing.assert_array_equal(backend.download(y), w.reshape(3, 35))


def test_transpose_fp16(rng):
    x = rand(rng, 3, 37, 29)
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1])], {"x": x}, ["y"])
    s = compare(model, {"x": x}, (5 * 2**-10, 5 * 2**-10), precision="low")
    got = s.run({"x": x})["y"]
    np.testing.assert_array_equal(got, np.transpose(x.astype(np.float16), (0, 2, 1)).astype(np.float32))


def test_concat_fp16(rng):
    xs = {"a": rand(rng, 1, 3, 7, 9), "b": rand(rng, 1, 5, 7, 9)}
    model = make_model([helper.make_node("Concat", ["a", "b"], ["y"], axis=1)], xs, ["y"])
    compare(model, xs, (5 * 2**-10, 5 * 2**-10), precision="low")

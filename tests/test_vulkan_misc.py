"""Vulkan-only Resize and ConvTranspose checks: rank 1, identity scales, the ``axes`` attribute,
the antialias check, PP-OCRv4 det's resize/ConvTranspose neck, more outputs than one row of work
groups. What both GPU backends do is in tests/test_gpu_resize.py and tests/test_gpu_misc.py.
Skipped, with the reason, where Vulkan is unusable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, compare
from tests.backend_compare import resize_model as _resize_model
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")

EXACT = (0.0, 0.0)


def _compare(model, feeds, tol, on_device=True):
    return compare(model, feeds, tol, on_device, backend="vulkan")


def test_resize_rank1(rng):
    x = rand(rng, 13)
    _compare(_resize_model(x, sizes=[29], mode="linear"), {"x": x}, ACCUMULATE)


def test_resize_identity_scales(rng):
    x = rand(rng, 1, 2, 5, 7)
    _compare(_resize_model(x, scales=[1, 1, 1, 1], mode="linear"), {"x": x}, EXACT)


def test_resize_axes_attribute(rng):
    """``axes=[2, 3]`` with two scales: the same H, W resize."""
    x = rand(rng, 1, 3, 6, 5)
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear", axes=[2, 3])
    model = make_model([node], {"x": x}, ["y"], {"sc": np.array([1.5, 2.2], np.float32)}, opset=18)  # axes: opset 18+
    _compare(model, {"x": x}, ACCUMULATE)


def test_resize_antialias_check():
    """The schema admits only antialias=0 today; the check still says why it would fall back."""
    from mnnpy.backend import OpInfo, TensorInfo
    from mnnpy.backends.vulkan.resize import Resize
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (1, 1, 4, 4), np.dtype(np.float32))
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel", "antialias": 1}
    ok, why = Resize.check(OpInfo(0, Op("Resize", "r", [0], [1]), attrs, (x,), (None,)))
    assert not ok and "antialias" in why


def test_deconv_resize_chain(rng):
    """PP-OCRv4 det's neck and head: nearest upsample -> Concat -> ConvTranspose -> Sigmoid."""
    a, b = rand(rng, 1, 4, 5, 7), rand(rng, 1, 4, 10, 14)
    nodes = [
        helper.make_node(
            "Resize", ["a", "", "sc"], ["u"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
        ),
        helper.make_node("Concat", ["u", "b"], ["c"], axis=1),
        helper.make_node("ConvTranspose", ["c", "w", "bias"], ["d"], strides=[2, 2], kernel_shape=[2, 2]),
        helper.make_node("Sigmoid", ["d"], ["y"]),
    ]
    inits = {"sc": np.array([1, 1, 2, 2], np.float32), "w": rand(rng, 8, 3, 2, 2), "bias": rand(rng, 3)}
    _compare(make_model(nodes, {"a": a, "b": b}, ["y"], inits), {"a": a, "b": b}, ACCUMULATE)


def test_resize_beyond_one_row_of_work_groups(rng):
    """More outputs than the device's x group count times 64: the groups spill into y."""
    x = rand(rng, 1, 2, 700, 800)
    _compare(_resize_model(x, sizes=[1, 2, 1500, 1401], mode="linear"), {"x": x}, ACCUMULATE)

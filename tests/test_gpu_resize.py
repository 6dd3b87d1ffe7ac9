"""Resize on every GPU backend against the CPU backend: nearest (exact) and bilinear
(ACCUMULATE), every coordinate transformation and nearest rounding mode, odd sizes, fallbacks
with their reasons. Each backend is skipped, with the reason, where it is unusable (CI: PoCL,
lavapipe). Backend-only checks: tests/test_opencl_resize.py, tests/test_vulkan_misc.py."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.backend_compare import ACCUMULATE, compare, gpu_backends
from tests.backend_compare import resize_model as _model
from tests.oracle import make_model, rand

EXACT = (0.0, 0.0)
CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("target", [("scales", [1, 1, 2.5, 1.5]), ("sizes", [2, 3, 5, 4]), ("sizes", [2, 3, 1, 1])])
@pytest.mark.parametrize("backend", gpu_backends())
def test_nearest(rng, backend, ctm, nearest_mode, target):
    x = rand(rng, 2, 3, 7, 9)
    model = _model(x, mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode, **{target[0]: target[1]})
    compare(model, {"x": x}, EXACT, backend=backend)


@pytest.mark.parametrize("factor", [2, 4, 8])
@pytest.mark.parametrize("backend", gpu_backends())
def test_nearest_ocr_det_upsample(rng, backend, factor):
    """PP-OCRv4 det: nearest, asymmetric, floor, integer factors."""
    x = rand(rng, 1, 5, 13, 7)
    model = _model(
        x, scales=[1, 1, factor, factor], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    )
    compare(model, {"x": x}, EXACT, backend=backend)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize(
    "target", [("scales", [1, 1, 2.0, 1.7]), ("scales", [1, 1, 0.6, 0.5]), ("sizes", [2, 3, 13, 1]), ("sizes", [2, 3, 1, 17])]
)
@pytest.mark.parametrize("backend", gpu_backends())
def test_linear(rng, backend, ctm, target):
    x = rand(rng, 2, 3, 7, 11)
    model = _model(x, mode="linear", coordinate_transformation_mode=ctm, **{target[0]: target[1]})
    compare(model, {"x": x}, ACCUMULATE, backend=backend)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_width_only_rank3(rng, backend, mode):
    x = rand(rng, 5, 7, 11)
    compare(_model(x, scales=[1, 1, 2.3], mode=mode), {"x": x}, EXACT if mode == "nearest" else ACCUMULATE, backend=backend)


FALLBACKS = [
    ({"mode": "cubic"}, [1, 1, 2, 2], "Resize mode 'cubic'"),
    ({"mode": "linear", "exclude_outside": 1}, [1, 1, 2, 2], "Resize exclude_outside=1"),
    ({"mode": "nearest"}, [1, 2, 2, 2], "Resize of axes [1, 2, 3]"),
    ({"mode": "nearest"}, [2, 1, 1, 1], "Resize of axes [0]"),
]


@pytest.mark.parametrize("attrs,scales,reason", FALLBACKS, ids=[f[2] for f in FALLBACKS])
@pytest.mark.parametrize("backend", gpu_backends())
def test_fallbacks(rng, backend, attrs, scales, reason):
    x = rand(rng, 2, 3, 5, 7)
    tol = EXACT if attrs["mode"] == "nearest" else ACCUMULATE
    s = compare(_model(x, scales=scales, **attrs), {"x": x}, tol, on_device=False, backend=backend)
    assert f"fell back: {backend}: " + reason in s.partitions(), s.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_tf_crop_and_resize_falls_back(rng, backend):
    x = rand(rng, 1, 2, 5, 7)
    roi = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], np.float32)
    node = helper.make_node(
        "Resize",
        ["x", "roi", "sc"],
        ["y"],
        mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-1.0,
    )
    model = make_model([node], {"x": x}, ["y"], {"roi": roi, "sc": np.array([1, 1, 2, 2], np.float32)})
    s = compare(model, {"x": x}, ACCUMULATE, on_device=False, backend=backend)
    assert f"fell back: {backend}: Resize tf_crop_and_resize" in s.partitions()

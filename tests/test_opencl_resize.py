"""OpenCL Resize against the CPU backend: nearest (exact) and bilinear (ACCUMULATE), every
coordinate transformation and nearest rounding mode, odd sizes, fp16, fallbacks with reasons.
Skipped, with the reason, where no OpenCL device is usable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, HALF, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)

EXACT = (0.0, 0.0)
CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]


def _model(x, scales=None, sizes=None, **attrs):
    inits = {}
    names = ["x", ""]
    if scales is not None:
        inits["sc"] = np.array(scales, np.float32)
        names.append("sc")
    else:
        inits["sz"] = np.array(sizes, np.int64)
        names += ["", "sz"]
    return make_model([helper.make_node("Resize", names, ["y"], **attrs)], {"x": x}, ["y"], inits)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("target", [("scales", [1, 1, 2.5, 1.5]), ("sizes", [2, 3, 5, 4]), ("sizes", [2, 3, 1, 1])])
def test_nearest(rng, ctm, nearest_mode, target):
    x = rand(rng, 2, 3, 7, 9)
    kw = {target[0]: target[1]}
    model = _model(x, mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode, **kw)
    compare(model, {"x": x}, EXACT)


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_nearest_ocr_det_upsample(rng, factor):
    """PP-OCRv4 det: nearest, asymmetric, floor, integer factors."""
    x = rand(rng, 1, 5, 13, 7)
    model = _model(
        x, scales=[1, 1, factor, factor], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    )
    compare(model, {"x": x}, EXACT)


@pytest.mark.parametrize("ctm", CTMS + ["half_pixel_symmetric"])
@pytest.mark.parametrize("target", [("scales", [1, 1, 2.0, 1.7]), ("scales", [1, 1, 0.6, 0.5]), ("sizes", [2, 3, 13, 1])])
def test_linear(rng, ctm, target):
    x = rand(rng, 2, 3, 7, 11)
    kw = {target[0]: target[1]}
    compare(_model(x, mode="linear", coordinate_transformation_mode=ctm, **kw), {"x": x}, ACCUMULATE)


def test_linear_width_only_rank3(rng):
    x = rand(rng, 5, 7, 11)
    compare(_model(x, scales=[1, 1, 2.3], mode="linear"), {"x": x}, ACCUMULATE)


def test_nearest_fp16(rng):
    x = rand(rng, 1, 4, 13, 7)
    model = _model(x, scales=[1, 1, 2, 2], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    compare(model, {"x": x}, HALF, precision="low")


def test_linear_fp16(rng):
    x = rand(rng, 1, 4, 13, 7)
    compare(_model(x, sizes=[1, 4, 20, 31], mode="linear"), {"x": x}, HALF, precision="low")


FALLBACKS = [
    ({"mode": "cubic"}, [1, 1, 2, 2], "Resize mode 'cubic'"),
    ({"mode": "linear", "exclude_outside": 1}, [1, 1, 2, 2], "exclude_outside=1"),
    ({"mode": "nearest"}, [1, 2, 2, 2], "Resize of axes [1, 2, 3]"),
    ({"mode": "nearest"}, [2, 1, 1, 1], "Resize of axes [0]"),
]


@pytest.mark.parametrize("attrs,scales,reason", FALLBACKS, ids=[f[2] for f in FALLBACKS])
def test_fallbacks(rng, attrs, scales, reason):
    x = rand(rng, 2, 3, 5, 7)
    s = compare(_model(x, scales=scales, **attrs), {"x": x}, EXACT if attrs["mode"] == "nearest" else ACCUMULATE, on_device=False)
    assert "fell back: opencl: " + reason in s.partitions() or reason in s.partitions(), s.partitions()


def test_tf_crop_and_resize_falls_back(rng):
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
    s = compare(model, {"x": x}, ACCUMULATE, on_device=False)
    assert "tf_crop_and_resize" in s.partitions()

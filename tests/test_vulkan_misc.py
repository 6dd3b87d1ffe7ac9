"""Vulkan Resize (nearest exact, bilinear ACCUMULATE; every coordinate transformation and
nearest rounding mode, odd sizes) and ConvTranspose 2-D (ACCUMULATE; groups, strides, pads,
dilations, output_padding, auto_pad, output_shape, bias) against the CPU backend, with the
fallbacks and their reasons. Skipped, with the reason, where Vulkan is unusable."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, compare
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")

EXACT = (0.0, 0.0)
CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]


def _compare(model, feeds, tol, on_device=True):
    return compare(model, feeds, tol, on_device, backend="vulkan")


def _resize_model(x, scales=None, sizes=None, **attrs):
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
def test_resize_nearest(rng, ctm, nearest_mode, target):
    x = rand(rng, 2, 3, 7, 9)
    model = _resize_model(
        x, mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode, **{target[0]: target[1]}
    )
    _compare(model, {"x": x}, EXACT)


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_resize_nearest_ocr_det_upsample(rng, factor):
    """PP-OCRv4 det: nearest, asymmetric, floor, integer factors."""
    x = rand(rng, 1, 5, 13, 7)
    model = _resize_model(
        x, scales=[1, 1, factor, factor], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    )
    _compare(model, {"x": x}, EXACT)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize(
    "target", [("scales", [1, 1, 2.0, 1.7]), ("scales", [1, 1, 0.6, 0.5]), ("sizes", [2, 3, 13, 1]), ("sizes", [2, 3, 1, 17])]
)
def test_resize_linear(rng, ctm, target):
    x = rand(rng, 2, 3, 7, 11)
    _compare(_resize_model(x, mode="linear", coordinate_transformation_mode=ctm, **{target[0]: target[1]}), {"x": x}, ACCUMULATE)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_width_only_rank3(rng, mode):
    x = rand(rng, 5, 7, 11)
    _compare(_resize_model(x, scales=[1, 1, 2.3], mode=mode), {"x": x}, EXACT if mode == "nearest" else ACCUMULATE)


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
    model = make_model([node], {"x": x}, ["y"], {"sc": np.array([1.5, 2.2], np.float32)})
    _compare(model, {"x": x}, ACCUMULATE)


RESIZE_FALLBACKS = [
    ({"mode": "cubic"}, [1, 1, 2, 2], "Resize mode 'cubic'"),
    ({"mode": "linear", "exclude_outside": 1}, [1, 1, 2, 2], "Resize exclude_outside=1"),
    ({"mode": "nearest"}, [1, 2, 2, 2], "Resize of axes [1, 2, 3]"),
    ({"mode": "nearest"}, [2, 1, 1, 1], "Resize of axes [0]"),
]


@pytest.mark.parametrize("attrs,scales,reason", RESIZE_FALLBACKS, ids=[f[2] for f in RESIZE_FALLBACKS])
def test_resize_fallbacks(rng, attrs, scales, reason):
    x = rand(rng, 2, 3, 5, 7)
    tol = EXACT if attrs["mode"] == "nearest" else ACCUMULATE
    s = _compare(_resize_model(x, scales=scales, **attrs), {"x": x}, tol, on_device=False)
    assert "fell back: vulkan: " + reason in s.partitions(), s.partitions()


def test_resize_tf_crop_and_resize_falls_back(rng):
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
    s = _compare(model, {"x": x}, ACCUMULATE, on_device=False)
    assert "fell back: vulkan: Resize tf_crop_and_resize" in s.partitions()


def test_resize_antialias_check():
    """The schema admits only antialias=0 today; the check still says why it would fall back."""
    from mnnpy.backend import TensorInfo
    from mnnpy.backends.vulkan.resize import Resize
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (1, 1, 4, 4), np.dtype(np.float32))
    ok, why = Resize.check(
        Op("Resize", "r", [0], [1]), [x], {"mode": "linear", "coordinate_transformation_mode": "half_pixel", "antialias": 1}
    )
    assert not ok and "antialias" in why


# (x shape, W shape (C, M/G, KH, KW), attrs, with bias)
DECONVS = [
    ((1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}, True),  # PP-OCRv4 det
    ((1, 24, 13, 7), (24, 1, 2, 2), {"strides": [2, 2]}, True),  # PP-OCRv4 det, M=1
    ((2, 5, 7, 9), (5, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),  # stride 1
    ((1, 4, 7, 6), (4, 13, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 1]}, False),
    ((1, 3, 5, 7), (3, 2, 3, 2), {"strides": [3, 2], "dilations": [2, 3]}, True),
    ((2, 6, 5, 5), (6, 2, 3, 3), {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    ((1, 8, 7, 5), (8, 1, 4, 4), {"group": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]}, False),  # depthwise
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, True),
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}, True),
    ((1, 3, 5, 6), (3, 5, 3, 3), {"strides": [2, 2], "output_shape": [11, 13]}, True),
    ((1, 2, 9, 11), (2, 9, 5, 1), {"strides": [1, 3], "pads": [2, 0, 2, 0]}, True),
    ((1, 3, 4, 150), (3, 2, 3, 3), {}, True),  # a row of more than 64 invocations
    ((1, 2, 3, 3), (2, 3, 5, 5), {"strides": [1, 1], "pads": [3, 4, 3, 2]}, True),  # pads beyond the kernel reach
    ((3, 9, 2, 1), (9, 6, 1, 1), {"group": 3, "strides": [4, 5]}, False),  # 1x1, outputs reading no input
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [9, 8]}, True),  # negative pads
]


def _deconv_model(rng, xs, ws, attrs, bias):
    x, w = rand(rng, *xs), rand(rng, *ws)
    m = ws[1] * attrs.get("group", 1)
    inits, names = {"w": w}, ["x", "w"]
    if bias:
        inits["b"] = rand(rng, m)
        names.append("b")
    return make_model([helper.make_node("ConvTranspose", names, ["y"], **attrs)], {"x": x}, ["y"], inits), x


@pytest.mark.parametrize("xs,ws,attrs,bias", DECONVS, ids=[str(i) for i in range(len(DECONVS))])
def test_conv_transpose(rng, xs, ws, attrs, bias):
    model, x = _deconv_model(rng, xs, ws, attrs, bias)
    _compare(model, {"x": x}, ACCUMULATE)


def test_conv_transpose_weights_at_run_time_fall_back(rng):
    x, w = rand(rng, 1, 3, 5, 5), rand(rng, 3, 2, 3, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = _compare(model, {"x": x, "w": w}, ACCUMULATE, on_device=False)
    assert "fell back: vulkan: ConvTranspose weights/bias computed at run time" in s.partitions()


def test_conv_transpose_1d_falls_back(rng):
    x, w = rand(rng, 1, 3, 11), rand(rng, 3, 2, 3)
    model = make_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2])], {"x": x}, ["y"], {"w": w})
    s = _compare(model, {"x": x}, ACCUMULATE, on_device=False)
    assert "fell back: vulkan: ConvTranspose on rank 3" in s.partitions()


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

"""Resize on every backend: the CPU backend against onnxruntime, each GPU backend against the
CPU (``tests/backend_compare.py``): nearest ``EXACT``, linear and cubic ``ACCUMULATE``, fp16
storage ``HALF``. Tests without a ``backend`` parameter run the CPU backend against onnxruntime.

CPU: nearest/linear/cubic, every coordinate transformation and nearest mode, roi
(tf_crop_and_resize), cubic options, axes and keep_aspect_ratio_policy, Upsample, opset 11, a
second input shape. GPU (OpenCL, Vulkan; skipped with the reason where the driver is missing):
nearest and bilinear with every coordinate transformation and rounding mode, odd sizes, rank 1
and 3, identity scales, the ``axes`` attribute, more outputs than one row of work groups,
fp16 storage, and the fallbacks with their reasons.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mnnpy
from mnnpy.converter import convert
from tests.backend_compare import (
    backend_cases,
    check_backend,
    check_op,
    gpu_backends,
    resize_model,
    storage_dtype,
)
from tests.oracle import ACCUMULATE, EXACT, HALF, check, make_model, rand, run_ort

TRUNCATION = {"atol": 1, "rtol": 0}  # integer Resize: one step of truncation (test_resize_linear_integer)
COORD = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _resize(rng, xs, scales=None, sizes=None, roi=None, opset=19, **attrs):
    """``(model, x)``: ``x -> Resize(roi, scales, sizes) -> y`` (absent inputs left out), for onnxruntime."""
    x = rand(rng, *xs)
    inits, ins = {}, ["x", "", "", ""]
    for i, (name, v, dt) in enumerate([("roi", roi, np.float32), ("scales", scales, np.float32), ("sizes", sizes, np.int64)]):
        if v is not None:
            inits[name], ins[i + 1] = np.array(v, dt), name
    while ins[-1] == "":
        ins.pop()
    return make_model([helper.make_node("Resize", ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=opset), x


@pytest.mark.parametrize("ctm", COORD)
@pytest.mark.parametrize("nearest_mode", NEAREST)
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2.5, 0.7], None), (None, [1, 3, 13, 5]), ([1, 1, 3, 2], None)])
def test_resize_nearest(rng, ctm, nearest_mode, scales, sizes):
    m, x = _resize(
        rng, (1, 3, 7, 13), scales, sizes, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=ctm
    )
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize(
    "xs,scales", [((1, 16, 13, 7), [1, 1, 2, 2]), ((2, 3, 5, 6), [1, 2, 3, 1]), ((1, 3, 7, 5), [1, 1, 1, 2])]
)
def test_resize_nearest_integer_upsample(rng, xs, scales):
    """The PP-OCR det form (asymmetric, floor, integer scales), taken by the broadcast-copy path."""
    m, x = _resize(rng, xs, scales, mode="nearest", nearest_mode="floor", coordinate_transformation_mode="asymmetric")
    check(m, {"x": x}, **EXACT)


def test_upsample_opset9(rng):
    x = rand(rng, 1, 3, 5, 7)
    m = make_model(
        [helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")],
        {"x": x},
        ["y"],
        {"s": np.array([1, 1, 2, 3], np.float32)},
        opset=9,
    )
    check(m, {"x": x}, **EXACT)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", COORD)
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2.5, 0.6], None), (None, [1, 3, 1, 5]), (None, [1, 3, 15, 27])])
def test_resize_interpolate(rng, mode, ctm, scales, sizes):
    m, x = _resize(rng, (1, 3, 7, 13), scales, sizes, mode=mode, coordinate_transformation_mode=ctm)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(rng, mode):
    m, x = _resize(
        rng,
        (1, 3, 7, 13),
        sizes=[1, 3, 9, 11],
        roi=[0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2],
        mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=-3.0,
    )
    check(m, {"x": x}, **(EXACT if mode == "nearest" else ACCUMULATE))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2, 2], None), (None, [1, 2, 3, 11])])
def test_resize_linear_integer(rng, dtype, scales, sizes):
    """Integer data, linear: interpolated in float32, then truncated toward zero as onnxruntime
    does (the weights once were cast to the integer type: every output 0). Within one step:
    onnxruntime sums the four bilinear terms in another order, so a value that lands within
    float rounding of an integer may truncate to its neighbour."""
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), (1, 2, 5, 7)).astype(dtype)
    inits = {k: np.array(v, dt) for k, v, dt in [("scales", scales, np.float32), ("sizes", sizes, np.int64)] if v is not None}
    ins = ["x", "", "scales"] if scales is not None else ["x", "", "", "sizes"]
    model = make_model([helper.make_node("Resize", ins, ["y"], mode="linear")], {"x": x}, ["y"], inits, opset=19)
    check(model, {"x": x}, **TRUNCATION)


@pytest.mark.parametrize("a,exclude", [(-0.5, 0), (-0.75, 1), (-0.5, 1)])
def test_resize_cubic_options(rng, a, exclude):
    m, x = _resize(rng, (1, 3, 7, 13), [1, 1, 1.7, 0.6], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_resize_axes_and_aspect(rng, policy):
    m, x = _resize(rng, (1, 3, 8, 12), sizes=[9, 9], axes=[2, 3], keep_aspect_ratio_policy=policy, mode="linear")
    check(m, {"x": x}, **ACCUMULATE)


def test_resize_opset11_linear(rng):
    x = rand(rng, 1, 2, 5, 7)
    m = make_model(
        [helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")],
        {"x": x},
        ["y"],
        {"roi": np.array([], np.float32), "s": np.array([1, 1, 2, 2], np.float32)},
        opset=11,
    )
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_second_run_new_shape(rng, mode):
    x1 = rand(rng, 1, 3, 7, 13)
    m = make_model(
        [helper.make_node("Resize", ["x", "", "s"], ["y"], mode=mode)],
        {"x": x1},
        ["y"],
        {"s": np.array([1, 1, 2, 2], np.float32)},
        opset=19,
        input_shapes={"x": ["N", "C", "H", "W"]},
    )
    session = mnnpy.Interpreter(convert(m)).create_session()
    for x in (x1, rand(rng, 2, 4, 5, 9)):
        (expected,) = run_ort(m, {"x": x})
        np.testing.assert_allclose(session.run({"x": x})["y"], expected, **ACCUMULATE)


# -- GPU backends: nearest and bilinear -------------------------------------------------------

CTMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("target", [("scales", [1, 1, 2.5, 1.5]), ("sizes", [2, 3, 5, 4]), ("sizes", [2, 3, 1, 1])])
@pytest.mark.parametrize("backend", gpu_backends())
def test_nearest(rng, backend, ctm, nearest_mode, target):
    x = rand(rng, 2, 3, 7, 9)
    model = resize_model(
        x, mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode, **{target[0]: target[1]}
    )
    check_backend(model, {"x": x}, EXACT, backend)


@pytest.mark.parametrize("factor", [2, 4, 8])
@pytest.mark.parametrize("backend", gpu_backends())
def test_nearest_ocr_det_upsample(rng, backend, factor):
    """PP-OCRv4 det: nearest, asymmetric, floor, integer factors."""
    x = rand(rng, 1, 5, 13, 7)
    model = resize_model(
        x, scales=[1, 1, factor, factor], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"
    )
    check_backend(model, {"x": x}, EXACT, backend)


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize(
    "target", [("scales", [1, 1, 2.0, 1.7]), ("scales", [1, 1, 0.6, 0.5]), ("sizes", [2, 3, 13, 1]), ("sizes", [2, 3, 1, 17])]
)
@pytest.mark.parametrize("backend", gpu_backends())
def test_linear(rng, backend, ctm, target):
    x = rand(rng, 2, 3, 7, 11)
    model = resize_model(x, mode="linear", coordinate_transformation_mode=ctm, **{target[0]: target[1]})
    check_backend(model, {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("backend", gpu_backends())
def test_width_only_rank3(rng, backend, mode):
    x = rand(rng, 5, 7, 11)
    check_backend(resize_model(x, scales=[1, 1, 2.3], mode=mode), {"x": x}, EXACT if mode == "nearest" else ACCUMULATE, backend)


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
    s = check_backend(resize_model(x, scales=scales, **attrs), {"x": x}, tol, backend, on_device=False)
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
    s = check_backend(model, {"x": x}, ACCUMULATE, backend, on_device=False)
    assert f"fell back: {backend}: Resize tf_crop_and_resize" in s.partitions()


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_resize_rank1(rng, backend):
    x = rand(rng, 13)
    check_backend(resize_model(x, sizes=[29], mode="linear"), {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_resize_identity_scales(rng, backend):
    x = rand(rng, 1, 2, 5, 7)
    check_backend(resize_model(x, scales=[1, 1, 1, 1], mode="linear"), {"x": x}, EXACT, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_resize_axes_attribute(rng, backend):
    """``axes=[2, 3]`` with two scales: the same H, W resize."""
    x = rand(rng, 1, 3, 6, 5)
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear", axes=[2, 3])
    model = make_model([node], {"x": x}, ["y"], {"sc": np.array([1.5, 2.2], np.float32)}, opset=18)  # axes: opset 18+
    check_backend(model, {"x": x}, ACCUMULATE, backend)


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_resize_antialias_check(backend):
    """The schema admits only antialias=0 today; the check still says why it would fall back."""
    from mnnpy.backend import TensorInfo
    from mnnpy.ir import Op

    x = TensorInfo(0, "x", (1, 1, 4, 4), np.dtype(np.float32))
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel", "antialias": 1}
    ok, why = check_op(backend, "resize", "Resize", Op("Resize", "r", [0], [1]), [x], attrs)
    assert not ok and "antialias" in why


@pytest.mark.parametrize("backend", gpu_backends("vulkan"))
def test_resize_beyond_one_row_of_work_groups(rng, backend):
    """More outputs than the device's x group count times 64: the groups spill into y."""
    x = rand(rng, 1, 2, 700, 800)
    check_backend(resize_model(x, sizes=[1, 2, 1500, 1401], mode="linear"), {"x": x}, ACCUMULATE, backend)


# -- fp16 storage (precision="low") ----------------------------------------------------------

NEAREST_FLOOR = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
# (x shape, scales, sizes, attrs)
FP16 = {
    "opencl": [((1, 4, 13, 7), [1, 1, 2, 2], None, NEAREST_FLOOR), ((1, 4, 13, 7), None, [1, 4, 20, 31], {"mode": "linear"})],
    "vulkan": [((1, 3, 5, 7), [1, 1, 2, 2], None, {"mode": mode}) for mode in ("nearest", "linear")],
}


@pytest.mark.parametrize("backend,shape,scales,sizes,attrs", backend_cases(FP16, ids=lambda c: c[3]["mode"], precision="low"))
def test_resize_fp16_storage(rng, backend, shape, scales, sizes, attrs):
    """Activations stored as fp16, the interpolation in fp32: within HALF of the CPU."""
    x = rand(rng, *shape)
    s = check_backend(resize_model(x, scales, sizes, **attrs), {"x": x}, HALF, backend, precision="low")
    assert storage_dtype(s) == np.float16

"""The compiled (numba) Resize kernels of the CPU backend against onnxruntime: nearest with
every coordinate transformation and rounding mode, integer up-sampling (PP-OCR det's 2, 4, 8),
linear and cubic, up and down, odd sizes, N=2, rank 3 (width only), one axis only, large enough
to be split over the pool; that Resize picks them (and not where an extrapolated position or
another axis needs the NumPy path); and the NumPy fallback where numba cannot compile."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import helper

from mnnpy.backends.cpu.ops import resize as resize_ops
from tests.backend_compare import spy_compiled
from tests.oracle import ACCUMULATE, EXACT, check, make_model, rand

COORD = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
TARGETS = [  # (x shape, scales, sizes)
    ((2, 3, 7, 13), [1, 1, 2.5, 0.7], None),
    ((1, 3, 7, 13), None, [1, 3, 13, 5]),
    ((2, 2, 9, 5), [1, 1, 3, 2], None),
    ((1, 4, 11, 9), [1, 1, 1, 2], None),  # width only
    ((1, 4, 11, 9), [1, 1, 0.5, 1], None),  # height only
    ((1, 24, 40, 40), [1, 1, 4, 4], None),  # split over the pool
]


def _model(rng, xs, scales=None, sizes=None, **attrs):
    x = rand(rng, *xs)
    inits, ins = {}, ["x", ""]
    if scales is not None:
        inits["scales"], ins = np.array(scales, np.float32), ["x", "", "scales"]
    else:
        inits["sizes"], ins = np.array(sizes, np.int64), ["x", "", "", "sizes"]
    return make_model([helper.make_node("Resize", ins, ["y"], **attrs)], {"x": x}, ["y"], inits, opset=19), {"x": x}


@pytest.fixture
def picked(monkeypatch):
    """The Resize executions that took the compiled kernels."""
    return spy_compiled(monkeypatch, resize_ops.Resize)


@pytest.mark.parametrize(("ctm", "nearest_mode", "target"), list(itertools.product(COORD, NEAREST, range(len(TARGETS)))))
def test_nearest_against_onnxruntime(rng, picked, ctm, nearest_mode, target):
    xs, scales, sizes = TARGETS[target]
    m, feeds = _model(rng, xs, scales, sizes, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=ctm)
    check(m, feeds, **EXACT)
    assert len(picked) == 1


@pytest.mark.parametrize("factor", [2, 3, 4, 8])
def test_integer_upsample_against_onnxruntime(rng, picked, factor):
    """PP-OCR det's form (asymmetric, floor, integer factors): source rows written once, copied."""
    m, feeds = _model(
        rng,
        (2, 5, 13, 7),
        [1, 1, factor, factor],
        mode="nearest",
        nearest_mode="floor",
        coordinate_transformation_mode="asymmetric",
    )
    check(m, feeds, **EXACT)
    assert len(picked) == 1 and picked[0].tables[2] == factor


@pytest.mark.parametrize(("mode", "ctm", "target"), list(itertools.product(["linear", "cubic"], COORD, range(len(TARGETS)))))
def test_interpolate_against_onnxruntime(rng, picked, mode, ctm, target):
    xs, scales, sizes = TARGETS[target]
    m, feeds = _model(rng, xs, scales, sizes, mode=mode, coordinate_transformation_mode=ctm)
    check(m, feeds, **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize("a,exclude", [(-0.5, 0), (-0.75, 1)])
def test_cubic_options(rng, picked, a, exclude):
    m, feeds = _model(rng, (2, 3, 7, 13), [1, 1, 1.7, 0.6], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    check(m, feeds, **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_rank3_width_only(rng, picked, mode):
    m, feeds = _model(rng, (5, 7, 11), [1, 1, 2.3], mode=mode)
    check(m, feeds, **(EXACT if mode == "nearest" else ACCUMULATE))
    assert len(picked) == 1


def test_other_axes_and_extrapolation_keep_numpy(rng, picked):
    m, feeds = _model(rng, (2, 3, 7, 13), [1, 2, 2, 1], mode="nearest")  # channels resized
    check(m, feeds, **EXACT)
    x = rand(rng, 1, 3, 7, 13)
    inits = {"roi": np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2], np.float32), "sizes": np.array([1, 3, 9, 11], np.int64)}
    node = helper.make_node(
        "Resize", ["x", "roi", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode="tf_crop_and_resize"
    )
    check(make_model([node], {"x": x}, ["y"], inits, opset=19), {"x": x}, **ACCUMULATE)
    assert picked == []


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_numpy_fallback_where_numba_cannot_compile(rng, monkeypatch, picked, mode):
    monkeypatch.setattr(resize_ops, "resize_kernels", lambda: None)
    for xs, scales, sizes in TARGETS[:3]:
        m, feeds = _model(rng, xs, scales, sizes, mode=mode)
        check(m, feeds, **(EXACT if mode == "nearest" else ACCUMULATE))
    assert picked == []

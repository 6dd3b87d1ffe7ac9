"""The compiled (numba) col2im + bias of the CPU ConvTranspose against onnxruntime
(``ACCUMULATE``): PP-OCR det's 2x2 stride-2 form (M=24 and M=1), strides larger than the
kernel (outputs holding the bias alone), dilations, pads, output_padding, output_shape,
groups, N=2, odd sizes, without a bias, weights and bias given at run time, large enough to
be split over the pool; that the op picks it only where taps cannot overlap (not 2x2
stride 1, not 1-D); and the NumPy fallback where numba cannot compile."""

from __future__ import annotations

import pytest
from onnx import helper

from mnnpy.backends.cpu.ops import conv_transpose as ct_ops
from tests.backend_compare import spy_compiled
from tests.oracle import ACCUMULATE, check, make_model, rand

# (x shape, W shape (C, M/G, KH, KW), attrs, bias)
DISJOINT = [
    ((1, 24, 13, 7), (24, 24, 2, 2), {"strides": [2, 2]}, True),  # PP-OCR det
    ((2, 24, 9, 11), (24, 1, 2, 2), {"strides": [2, 2]}, True),  # PP-OCR det, M=1
    ((1, 4, 7, 5), (4, 3, 3, 3), {"strides": [3, 3]}, False),
    ((2, 4, 7, 5), (4, 3, 2, 3), {"strides": [3, 4]}, True),  # gaps: bias alone
    ((1, 3, 5, 7), (3, 2, 2, 2), {"strides": [3, 3], "dilations": [2, 2]}, True),
    ((1, 4, 7, 6), (4, 5, 2, 2), {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]}, True),
    ((1, 6, 7, 5), (6, 2, 2, 2), {"group": 3, "strides": [2, 2]}, True),
    ((1, 4, 7, 5), (4, 3, 2, 2), {"strides": [2, 2], "output_shape": [15, 11]}, True),
    ((1, 4, 7, 5), (4, 3, 3, 2), {"strides": [3, 2], "auto_pad": "SAME_UPPER"}, True),
    ((1, 2, 1, 1), (2, 3, 2, 2), {"strides": [2, 2]}, True),  # one pixel
    ((1, 8, 64, 64), (8, 4, 2, 2), {"strides": [2, 2]}, True),  # split over the pool
]


def _model(rng, xs, ws, attrs, bias, const=True):
    x, w = rand(rng, *xs), rand(rng, *ws, scale=0.5)
    b = rand(rng, ws[1] * attrs.get("group", 1))
    names = ["x", "w", "b"] if bias else ["x", "w"]
    node = helper.make_node("ConvTranspose", names, ["y"], **attrs)
    params = {"w": w, "b": b} if bias else {"w": w}
    if const:
        return make_model([node], {"x": x}, ["y"], params), {"x": x}
    feeds = {"x": x, **params}
    return make_model([node], feeds, ["y"]), feeds


@pytest.fixture
def picked(monkeypatch):
    """The ConvTranspose executions that took the compiled kernel."""
    return spy_compiled(monkeypatch, ct_ops.ConvTranspose)


@pytest.mark.parametrize("case", range(len(DISJOINT)))
def test_disjoint_taps_against_onnxruntime(rng, picked, case):
    model, feeds = _model(rng, *DISJOINT[case])
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize("bias", [True, False])
def test_weights_and_bias_at_run_time(rng, picked, bias):
    model, feeds = _model(rng, (2, 4, 7, 5), (4, 3, 2, 2), {"strides": [2, 2]}, bias, const=False)
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1


@pytest.mark.parametrize(
    "xs,ws,attrs",
    [
        ((1, 4, 7, 5), (4, 3, 2, 2), {}),  # stride 1: taps overlap
        ((1, 4, 7, 5), (4, 3, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
        ((1, 4, 13), (4, 3, 2), {"strides": [2]}),  # 1-D
    ],
)
def test_overlapping_taps_and_other_ranks_keep_numpy(rng, picked, xs, ws, attrs):
    model, feeds = _model(rng, xs, ws, attrs, True)
    check(model, feeds, **ACCUMULATE)
    assert picked == []


def test_numpy_fallback_where_numba_cannot_compile(rng, monkeypatch, picked):
    monkeypatch.setattr(ct_ops, "scatter_kernel", lambda: None)
    for case in (0, 3, 5):
        model, feeds = _model(rng, *DISJOINT[case])
        check(model, feeds, **ACCUMULATE)
    assert picked == []

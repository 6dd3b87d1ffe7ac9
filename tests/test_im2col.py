"""The compiled im2col Conv of the CPU backend (``_Im2colNumba``): the kernel against a NumPy
im2col, and Conv through it against onnxruntime (``ACCUMULATE``): strides 1/2/3, dilations,
symmetric and asymmetric pads, taps wholly in the padding, groups, kernels 1 to 7 (the
3-channel stems), N=2, with and without bias, each fused activation and one left to NumPy
(Sigmoid), blocks per thread and the whole-image split; that Conv picks it; and the NumPy
fallback where numba cannot compile."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mnnpy.backends.cpu.kernels import im2col as ik
from mnnpy.backends.cpu.ops import direct as direct_ops
from mnnpy.backends.cpu.ops import im2col as io
from mnnpy.backends.cpu.ops import winograd as wo
from tests.backend_compare import CONV_ACTIVATIONS, conv_model, spy_inits
from tests.oracle import ACCUMULATE, check

ACTS = {k: CONV_ACTIVATIONS[k] for k in ("none", "relu", "relu6", "leaky", "sigmoid")}

GEOMETRY = [
    # (x shape, M, kernel, attrs)
    ((1, 3, 23, 21), 8, 7, {"strides": [2, 2], "pads": [3, 3, 3, 3]}),  # a ResNet stem
    ((2, 3, 17, 16), 6, 3, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # a PP-OCR stem
    ((1, 8, 13, 11), 12, 3, {"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    ((1, 6, 12, 15), 4, 5, {"strides": [1, 3], "pads": [2, 0, 1, 4], "dilations": [2, 1]}),
    ((1, 4, 5, 6), 4, 7, {"pads": [4, 5, 3, 6]}),  # taps wholly in the padding
    ((1, 8, 9, 9), 8, 3, {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}),
    ((2, 12, 10, 8), 6, 3, {"group": 3, "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 16, 14, 14), 32, 1, {"strides": [2, 2]}),  # a ResNet downsampling 1x1
    ((1, 5, 1, 1), 3, 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
]


@pytest.fixture(autouse=True)
def _no_direct_conv(monkeypatch):
    """These Convs on the im2col path: the direct kernel (``ops/direct.py``, tested in
    ``test_direct_conv.py``) would take those of 32 or more output channels."""
    monkeypatch.setattr(direct_ops, "MIN_M", 1 << 30)


def _model(case, bias, act, seed):
    xs, mo, k, attrs = GEOMETRY[case]
    rng = np.random.default_rng(seed)
    g = attrs.get("group", 1)
    return conv_model(rng, xs, (mo, xs[1] // g, k, k), {"kernel_shape": [k, k], **attrs}, bias=bias, after=ACTS[act], b_scale=1.0)


@pytest.mark.parametrize(("case", "bias", "act"), list(itertools.product(range(len(GEOMETRY)), (True, False), ACTS)))
def test_against_onnxruntime(case, bias, act):
    model, feeds = _model(case, bias, act, seed=case)
    check(model, feeds, **ACCUMULATE)


@pytest.mark.parametrize("chunk", [1, 1 << 30])
@pytest.mark.parametrize("case", [0, 2, 5, 6])
def test_blocks_and_whole_image(monkeypatch, case, chunk):
    """``chunk`` 1: one output row a block (each thread its blocks); huge: one block, so the
    whole-image split by channels."""
    monkeypatch.setattr(io, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(io, "SMALL_M_CHUNK_BYTES", chunk)
    model, feeds = _model(case, True, "relu6", seed=20 + case)
    check(model, feeds, **ACCUMULATE)


def test_kernel_against_numpy_im2col():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float32)
    kh, kw, sh, sw, dh, dw, pt, pl, pb, pr = 3, 2, 2, 3, 1, 2, 2, 1, 1, 3
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (xp.shape[2] - (kh - 1) * dh - 1) // sh + 1
    wo_ = (xp.shape[3] - (kw - 1) * dw - 1) // sw + 1
    fill, _ = ik.kernels()
    for n, (r0, r1) in itertools.product(range(2), [(0, ho), (1, 3)]):
        col = np.full((3 * kh * kw, (r1 - r0) * wo_), np.nan, np.float32)
        fill(x, col, n, 0, 3, r0, r1, wo_, kh, kw, sh, sw, dh, dw, pt, pl)
        want = np.stack(
            [
                xp[n, c, r0 * sh + i * dh : (r1 - 1) * sh + i * dh + 1 : sh, j * dw : (wo_ - 1) * sw + j * dw + 1 : sw].reshape(
                    -1
                )
                for c in range(3)
                for i in range(kh)
                for j in range(kw)
            ]
        )
        np.testing.assert_array_equal(col, want)


def test_conv_picks_it(monkeypatch):
    picked = spy_inits(monkeypatch, io._Im2colNumba)
    model, feeds = _model(0, True, "relu", seed=1)
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1 and picked[0].fused_activation


def test_falls_back_to_numpy_without_numba(monkeypatch):
    monkeypatch.setattr(io, "im2col_kernels", lambda: None)
    monkeypatch.setattr(wo, "winograd_kernels", lambda: None)
    monkeypatch.setattr(io._Im2colNumba, "__init__", lambda *a, **k: pytest.fail("compiled im2col without numba"))
    for case in (0, 5):
        model, feeds = _model(case, True, "relu6", seed=2)
        check(model, feeds, **ACCUMULATE)


@pytest.mark.parametrize(
    ("xs", "mo", "k", "attrs"),
    [
        ((1, 1, 640), 10, 256, {"strides": [128], "pads": [0, 0]}),  # silero VAD's STFT conv
        ((2, 6, 9), 4, 3, {"pads": [1, 2], "dilations": [2]}),
        ((1, 8, 7), 8, 3, {"group": 2, "strides": [2], "pads": [1, 1]}),
    ],
)
def test_one_dimensional_conv_takes_the_2d_kernel(monkeypatch, xs, mo, k, attrs):
    """A float32 1-D Conv runs as a 2-D one with one row (no Python loop over its taps)."""
    picked = spy_inits(monkeypatch, io._Im2colNumba)
    g = attrs.get("group", 1)
    model, feeds = conv_model(
        np.random.default_rng(3), xs, (mo, xs[1] // g, k), {"kernel_shape": [k], **attrs}, after=ACTS["relu"]
    )
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1

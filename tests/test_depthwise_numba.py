"""The compiled (numba) depthwise Conv kernel of the CPU backend against onnxruntime
(``ACCUMULATE``): strides 1/2, dilations 1/2, asymmetric pads, kernels 3/5/7, odd sizes,
with and without bias, with no / Relu / Relu6 (Clip) / LeakyRelu / HardSigmoid / HardSwish
fused and an activation the kernel leaves to NumPy (Sigmoid); that the Conv picks it; its cache folder; and the NumPy
fallback, with a warning, where numba cannot compile."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import mnnpy
from mnnpy.backends.cpu import kernels as kernels_mod
from mnnpy.backends.cpu.kernels import depthwise as dw_kernel
from mnnpy.backends.cpu.kernels import native
from mnnpy.backends.cpu.ops import depthwise as dw_ops
from mnnpy.converter import convert
from tests.backend_compare import CONV_ACTIVATIONS, conv_model, spy_inits
from tests.oracle import ACCUMULATE, check, run_ort

ACTS = CONV_ACTIVATIONS

GEOMETRY = [
    # (x shape, kernel, attrs)
    ((1, 7, 13, 11), 3, {"pads": [1, 1, 1, 1]}),
    ((2, 5, 13, 11), 3, {"pads": [0, 2, 1, 0], "strides": [2, 2]}),
    ((1, 9, 17, 15), 5, {"pads": [2, 1, 3, 2], "dilations": [2, 2]}),
    ((1, 6, 19, 23), 7, {"pads": [3, 0, 1, 4], "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 3, 9, 8), 5, {"strides": [1, 2], "dilations": [2, 1]}),
    ((1, 5, 11, 13), 3, {"pads": [1, 3, 2, 1], "strides": [2, 2]}),  # stride 2: odd left pad, odd width
    ((1, 4, 10, 12), 5, {"pads": [2, 4, 2, 3], "strides": [3, 3], "dilations": [1, 2]}),
    ((1, 4, 5, 6), 7, {"pads": [4, 5, 3, 6]}),  # taps entirely in the padding
    ((1, 4, 30, 30), 17, {"pads": [2, 3, 1, 2]}),  # more taps than conv.MAX_TAP_LOOP
    ((3, 32, 30, 30), 3, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),  # large enough to run parallel
    ((1, 4, 20, 70), 3, {"pads": [1, 1, 1, 1]}),  # 3x3 on long rows: whole blocks of 64 and a partial one
    ((1, 3, 16, 70), 5, {"pads": [2, 2, 2, 2]}),  # 5x5 on long rows: passes of eight taps, the last in the crop
]


def _model(xs, k, attrs, bias, act, seed):
    rng = np.random.default_rng(seed)
    c = xs[1]
    a = {"group": c, "kernel_shape": [k, k], **attrs}
    return conv_model(rng, xs, (c, 1, k, k), a, bias=bias, after=ACTS[act], w_scale=0.5, b_scale=1.0)


@pytest.mark.parametrize(("case", "bias", "act"), list(itertools.product(range(len(GEOMETRY)), (True, False), ACTS)))
def test_depthwise_against_onnxruntime(case, bias, act):
    xs, k, attrs = GEOMETRY[case]
    model, feeds = _model(xs, k, attrs, bias, act, seed=case)
    check(model, feeds, **ACCUMULATE)


def test_conv_picks_the_compiled_kernel(monkeypatch):
    picked = spy_inits(monkeypatch, dw_ops._DepthwiseNumba)
    model, feeds = _model((1, 8, 12, 12), 3, {"pads": [1, 1, 1, 1]}, True, "relu6", seed=1)
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1 and picked[0].fused_activation and picked[0].code == dw_kernel.ACT["Clip"]


# (x shape, kernel, strides, dilations, pads top/left): both kernels of kernels/depthwise.py
BLOCK_CASES = [
    ((2, 37, 9, 11), 3, (1, 1), (1, 1), (1, 1)),  # channels past two blocks, rows under 16
    ((1, 16, 20, 23), 3, (2, 2), (1, 1), (1, 0)),  # rows over 16: one transpose per 16 columns
    ((1, 5, 8, 8), 5, (2, 1), (1, 2), (2, 3)),  # one partial block, mixed strides and dilations
    ((3, 33, 7, 7), 3, (1, 1), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("case", range(len(BLOCK_CASES)))
@pytest.mark.parametrize("act", ["", "Clip", "HardSwish"])
def test_channel_blocks_match_planes(case, act):
    """The channel-block kernel against the plane kernel on the same arguments, its units
    (blocks of 16 channels) split in two calls; nothing outside each call's channels written."""
    xs, k, (sh, sw), (dh, dw), (pt, pl) = BLOCK_CASES[case]
    n, c, h, wd = xs
    rng = np.random.default_rng(case)
    x = rng.standard_normal(xs, dtype=np.float32)
    w, b = rng.standard_normal((c, k, k), dtype=np.float32), rng.standard_normal(c).astype(np.float32)
    ho = (h + 2 * pt - (k - 1) * dh - 1) // sh + 1
    wo = (wd + 2 * pl - (k - 1) * dw - 1) // sw + 1
    tail = (sh, sw, dh, dw, pt, pl, dw_kernel.ACT[act], np.float32(0.0), np.float32(6.0))
    want = np.zeros((n, c, ho, wo), np.float32)
    dw_kernel.kernel()(x, w, b, want, 0, n * c, *tail)
    got = np.full_like(want, 7.0)
    units = n * -(-c // 16)
    blocks = dw_kernel.channel_blocks()
    blocks(x, w, b, got, 0, 1, *tail)
    assert (got[0, 16:] == 7.0).all() and (got[1:] == 7.0).all()  # only the first block's channels
    blocks(x, w, b, got, 1, units, *tail)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("xs", "strides", "blocked"),
    [
        ((1, 40, 7, 7), [1, 1], True),
        ((1, 40, 24, 24), [2, 2], True),
        ((1, 40, 24, 24), [1, 1], False),
        ((1, 4, 70, 70), [9, 9], False),
    ],
)
def test_small_maps_take_channel_blocks(monkeypatch, xs, strides, blocked):
    """Output maps up to BLOCKS_MAX_MAP (BLOCKS_MAX_STRIDED_MAP for strides over 1) take the
    channel-block kernel, larger ones the plane kernel, and so do small outputs of inputs past
    BLOCKS_MAX_INPUT_MAP (the block's padded buffer would hold all of it, 16 times)."""
    asked = []
    real = dw_ops.channel_blocks
    monkeypatch.setattr(dw_ops, "channel_blocks", lambda: asked.append(1) or real())
    model, feeds = _model(xs, 3, {"pads": [1, 1, 1, 1], "strides": strides}, True, "relu6", seed=7)
    check(model, feeds, **ACCUMULATE)
    assert bool(asked) == blocked


def test_hard_swish_is_fused(monkeypatch):
    picked = spy_inits(monkeypatch, dw_ops._DepthwiseNumba)
    model, feeds = _model((1, 16, 7, 7), 3, {"pads": [1, 1, 1, 1]}, True, "hardswish", seed=6)
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1 and picked[0].fused_activation and picked[0].code == dw_kernel.ACT["HardSwish"]


def test_nan_passes_through_fused_relu():
    model, feeds = _model((1, 4, 6, 6), 3, {"pads": [1, 1, 1, 1]}, True, "relu", seed=2)
    feeds["x"][0, 1, 2, 2] = np.nan
    out = mnnpy.Interpreter(convert(model)).create_session(backend="cpu").run(feeds)
    y = next(iter(out.values()))
    expected = run_ort(model, feeds)[0]
    assert np.isnan(y).sum() == np.isnan(expected).sum() > 0
    np.testing.assert_allclose(y, expected, **ACCUMULATE)


def test_numba_cache_under_the_mnnpy_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv("MNNPY_CACHE", str(tmp_path))
    sub = "mnnpy-" + native.source_digest()[:12]
    assert kernels_mod._cache_folder() == str(tmp_path / "numba" / sub)
    assert (tmp_path / "numba" / sub).is_dir()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert kernels_mod._cache_folder() == str(tmp_path / "elsewhere" / sub)


def test_numba_cache_folder_follows_the_kernel_sources(tmp_path, monkeypatch):
    """numba checks only a cached function's own file, not those it inlines (simd.activate):
    other kernel sources get another folder."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    before = kernels_mod._cache_folder()
    monkeypatch.setattr(native, "source_digest", lambda: "f" * 64)
    assert kernels_mod._cache_folder() == str(tmp_path / ("mnnpy-" + "f" * 12)) != before


def test_an_unusable_cache_folder_means_numpy_with_a_warning(tmp_path, monkeypatch):
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "file" / "numba"))  # cannot be made, even by root
    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    with pytest.warns(RuntimeWarning, match="numba kernel 'probe' unavailable"):
        assert kernels_mod.compiled("probe", lambda numba: numba.njit) is None


def test_falls_back_to_numpy_with_a_warning(monkeypatch):
    def broken(numba):
        raise OSError("read-only cache folder")

    monkeypatch.setattr(kernels_mod, "_BUILT", {})
    with pytest.warns(RuntimeWarning, match="numba kernel 'broken' unavailable"):
        assert kernels_mod.compiled("broken", broken) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernels_mod.compiled("broken", broken) is None  # warned once
    monkeypatch.setattr(dw_ops, "depthwise_kernels", lambda: None)
    model, feeds = _model((1, 5, 11, 9), 5, {"pads": [2, 1, 0, 2], "strides": [2, 1]}, True, "relu6", seed=3)
    check(model, feeds, **ACCUMULATE)


def test_one_session_from_several_threads():
    """The kernel split over the pool, one session run from four threads at once: every caller gets its result."""
    from concurrent.futures import ThreadPoolExecutor

    xs, k, attrs = GEOMETRY[-1]
    model, feeds = _model(xs, k, attrs, True, "relu6", seed=4)
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal(xs).astype(np.float32) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda x: next(iter(session.run({"x": x}).values())), inputs))
    for x, y in zip(inputs, outs):
        np.testing.assert_allclose(y, run_ort(model, {"x": x})[0], **ACCUMULATE)

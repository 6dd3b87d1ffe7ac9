"""Winograd Conv of the CPU backend (F(2x2, 3x3) and F(4x4, 3x3)): the kernels against a
float64 NumPy reference (also the error growth on 512 channels), and Conv through it
against onnxruntime (``ACCUMULATE``): pads 0/1/2 and asymmetric, maps that are not multiples
of the tile (1x1, 5x7, 13x13), N=2, with and without bias, each fused activation and one
left to NumPy (Sigmoid), both ways of splitting the work over threads; that Conv picks it by
the documented rule; and the fallback where numba cannot compile."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import mnnpy
from mnnpy.backends.cpu.kernels import winograd as wk
from mnnpy.backends.cpu.ops import conv as conv_ops
from mnnpy.backends.cpu.ops import winograd as wo
from mnnpy.converter import convert
from tests.backend_compare import CONV_ACTIVATIONS, conv_model
from tests.oracle import ACCUMULATE, check

ACTS = {k: CONV_ACTIVATIONS[k] for k in ("none", "relu", "relu6", "leaky", "sigmoid")}

GEOMETRY = [
    # (x shape, M, pads)
    ((1, 5, 1, 1), 3, [1, 1, 1, 1]),
    ((2, 3, 5, 7), 4, [1, 1, 1, 1]),
    ((1, 4, 13, 13), 6, [0, 0, 0, 0]),
    ((1, 8, 13, 11), 8, [2, 1, 0, 2]),
    ((2, 6, 9, 14), 5, [2, 2, 2, 2]),
    ((1, 16, 20, 17), 12, [0, 1, 2, 1]),
]


def reference(x, w, b, pads):
    """float64 Conv (3x3, stride 1): ``x: (N, C, H, W)``, ``w: (M, C, 3, 3)``, ``pads``
    ``(top, left, bottom, right)``."""
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho, wo_ = xp.shape[2] - 2, xp.shape[3] - 2
    y = np.zeros((x.shape[0], w.shape[0], ho, wo_))
    for i, j in itertools.product(range(3), range(3)):
        y += np.einsum("mc,nchw->nmhw", w[:, :, i, j].astype(np.float64), xp[:, :, i : i + ho, j : j + wo_])
    return y + b[None, :, None, None]


def winograd(x, w, b, pads, m, act=0, a0=0.0, a1=0.0):
    """Conv through the compiled kernels and ``np.matmul``, one band of all tile rows."""
    inp, outp, _ = wk.kernels()
    n, c = x.shape[:2]
    pt, pl, pb, pr = pads
    ho, wd = x.shape[2] + pt + pb - 2, x.shape[3] + pl + pr - 2
    th, tw = -(-ho // m), -(-wd // m)
    a2 = (m + 2) ** 2
    u = wk.weights(w, m)
    v, p = np.empty((a2, c, th * tw), np.float32), np.empty((a2, w.shape[0], th * tw), np.float32)
    y = np.empty((n, w.shape[0], ho, wd), np.float32)
    flags = np.full(n, 7, np.int64)
    for i in range(n):
        inp(x, v, i, 0, c, 0, th, tw, pt, pl, m, flags, i)
        np.matmul(u, v, out=p)
        outp(p, y, b, i, 0, w.shape[0], 0, th, tw, m, act, np.float32(a0), np.float32(a1))
    assert not flags.any()  # finite inputs: every call cleared its flag
    return y


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("case", range(len(GEOMETRY)))
def test_kernels_against_float64(case, m):
    xs, mo, pads = GEOMETRY[case]
    rng = np.random.default_rng(case)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal((mo, xs[1], 3, 3)) / np.sqrt(9 * xs[1])).astype(np.float32)
    b = rng.standard_normal(mo).astype(np.float32)
    np.testing.assert_allclose(winograd(x, w, b, pads, m), reference(x, w, b, pads), **ACCUMULATE)


@pytest.mark.parametrize(
    ("m", "act", "expect"),
    [(4, 1, lambda r: np.maximum(r, 0)), (2, 2, lambda r: np.clip(r, -0.5, 0.5)), (4, 3, lambda r: np.where(r < 0, 0.2 * r, r))],
)
def test_fused_activations(m, act, expect):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 6, 11, 9)).astype(np.float32)
    w = (rng.standard_normal((5, 6, 3, 3)) / np.sqrt(54)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    a0, a1 = {1: (0, 0), 2: (-0.5, 0.5), 3: (0.2, 0)}[act]
    got = winograd(x, w, b, (1, 1, 1, 1), m, act, a0, a1)
    np.testing.assert_allclose(got, expect(reference(x, w, b, (1, 1, 1, 1))), **ACCUMULATE)


@pytest.mark.parametrize("m", [2, 4])
def test_error_on_512_channels(m):
    """ResNet-18's widest layer with trained-net magnitudes (He weights, inputs after a Relu
    with values up to ~5): within the accumulating-op tolerance, F(4x4) at most ~10x F(2x2)."""
    rng = np.random.default_rng(11)
    x = np.maximum(rng.standard_normal((1, 512, 14, 14)) * 1.5, 0).astype(np.float32)
    w = (rng.standard_normal((512, 512, 3, 3)) * np.sqrt(2 / (9 * 512))).astype(np.float32)
    b = (rng.standard_normal(512) * 0.1).astype(np.float32)
    ref = reference(x, w, b, (1, 1, 1, 1))
    err = np.abs(winograd(x, w, b, (1, 1, 1, 1), m) - ref)
    assert np.all(err <= ACCUMULATE["atol"] + ACCUMULATE["rtol"] * np.abs(ref))
    assert err.max() < (2e-5 if m == 2 else 1e-4)


@pytest.fixture
def force(monkeypatch):
    """Make every float32 3x3 stride-1 Conv take Winograd with tile ``m`` and split ``split``."""

    def go(m, split=None):
        monkeypatch.setattr(wo, "MIN_SIDE", 1)
        monkeypatch.setattr(wo, "MIN_CHANNELS", 1)
        monkeypatch.setattr(wo, "F4_MIN_SIDE", 1 if m == 4 else 10**9)
        monkeypatch.setattr(wo, "SPLIT_CHANNELS", split)

    return go


def _model(xs, mo, pads, bias, act, seed):
    rng = np.random.default_rng(seed)
    attrs = {"kernel_shape": [3, 3], "pads": pads}
    return conv_model(rng, xs, (mo, xs[1], 3, 3), attrs, bias=bias, after=ACTS[act], b_scale=1.0)


@pytest.mark.parametrize(("case", "bias", "act"), list(itertools.product(range(len(GEOMETRY)), (True, False), ACTS)))
@pytest.mark.parametrize("m", [2, 4])
def test_conv_against_onnxruntime(force, case, bias, act, m):
    force(m)
    xs, mo, pads = GEOMETRY[case]
    model, feeds = _model(xs, mo, pads, bias, act, seed=case)
    check(model, feeds, **ACCUMULATE)


@pytest.mark.parametrize(("m", "split"), list(itertools.product((2, 4), (True, False))))
def test_both_thread_splits(force, m, split):
    force(m, split)
    model, feeds = _model((2, 24, 30, 27), 20, [1, 2, 1, 0], True, "relu6", seed=3)
    check(model, feeds, **ACCUMULATE)


def _picked(monkeypatch, model, feeds):
    picked = []
    real = wo._Winograd.__init__

    def spy(self, exe, x, w, y, bias, out, pads, m):
        picked.append(m)
        real(self, exe, x, w, y, bias, out, pads, m)

    monkeypatch.setattr(wo._Winograd, "__init__", spy)
    check(model, feeds, **ACCUMULATE)
    return picked


@pytest.mark.parametrize(
    ("side", "channels", "tile"),
    [(56, 16, [4]), (56, 32, [4]), (14, 16, [2]), (8, 16, [2]), (14, 32, []), (8, 32, []), (7, 16, []), (32, 4, [])],
)
def test_conv_picks_winograd_by_the_rule(monkeypatch, side, channels, tile):
    """F(4x4) from 16x16 maps; F(2x2) below, unless the direct kernel takes the Conv (32 or more
    output channels); nothing on 7x7 maps or under MIN_CHANNELS channels."""
    model, feeds = _model((1, channels, side, side), channels, [1, 1, 1, 1], True, "relu", seed=5)
    assert _picked(monkeypatch, model, feeds) == tile


def test_not_for_strides_dilations_groups(monkeypatch):
    rng = np.random.default_rng(6)
    for attrs in ({"strides": [2, 2]}, {"dilations": [2, 2]}, {"group": 2}):
        a = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], **attrs}
        model, feeds = conv_model(rng, (1, 16, 24, 24), (16, 16 // a.get("group", 1), 3, 3), a)
        assert _picked(monkeypatch, model, feeds) == []


def test_falls_back_without_numba(monkeypatch):
    monkeypatch.setattr(wo, "winograd_kernels", lambda: None)
    model, feeds = _model((1, 16, 20, 20), 16, [1, 1, 1, 1], True, "relu", seed=8)
    assert _picked(monkeypatch, model, feeds) == []


def test_one_session_from_several_threads(force):
    from concurrent.futures import ThreadPoolExecutor

    from tests.oracle import run_ort

    force(4)
    model, feeds = _model((1, 16, 33, 30), 16, [1, 1, 1, 1], True, "relu", seed=9)
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
    rng = np.random.default_rng(10)
    inputs = [rng.standard_normal((1, 16, 33, 30)).astype(np.float32) for _ in range(6)]
    with ThreadPoolExecutor(3) as pool:
        outs = list(pool.map(lambda x: next(iter(session.run({"x": x}).values())), inputs))
    for x, y in zip(inputs, outs):
        np.testing.assert_allclose(y, run_ort(model, {"x": x})[0], **ACCUMULATE)


def test_conv_module_routes_through_choose():
    assert conv_ops.winograd_tile is wo.choose


@pytest.mark.parametrize("m", [2, 4])
def test_weights_fed_at_run_time(monkeypatch, force, m):
    """Weights and bias as graph inputs: transformed again every run."""
    from onnx import helper

    from tests.oracle import make_model

    force(m)
    rng = np.random.default_rng(12)
    feeds = {
        "x": rng.standard_normal((1, 12, 15, 13)).astype(np.float32),
        "w": (rng.standard_normal((10, 12, 3, 3)) / 10).astype(np.float32),
        "b": rng.standard_normal(10).astype(np.float32),
    }
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], pads=[1, 0, 1, 2])
    assert _picked(monkeypatch, make_model([node], feeds, ["y"]), feeds) == [m]


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize(("m", "split"), list(itertools.product((2, 4), (True, False))))
def test_non_finite_input_reaches_only_its_windows(force, m, split, bad):
    """One inf or NaN in the input: the transforms would spread it over whole tiles (inf - inf);
    the exact path gives the outputs whose window reads it, as onnxruntime does."""
    from tests.oracle import run_ort

    force(m, split)
    model, feeds = _model((2, 9, 12, 13), 10, [2, 1, 0, 1], True, "relu", seed=11)
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
    for where in [(0, 4, 5, 6), (1, 0, 0, 0), (1, 8, 11, 12)]:
        x = feeds["x"].copy()
        x[where] = bad
        got, want = next(iter(session.run({"x": x}).values())), run_ort(model, {"x": x})[0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        fin = np.isfinite(want)
        assert 0 < fin.sum() < fin.size
        np.testing.assert_allclose(got[fin], want[fin], **ACCUMULATE)
    got = next(iter(session.run(feeds).values()))  # finite again: the Winograd path's result
    np.testing.assert_allclose(got, run_ort(model, feeds)[0], **ACCUMULATE)


@pytest.mark.parametrize("m", [2, 4])
def test_input_transform_flags_non_finite(m):
    inp = wk.kernels()[0]
    x = np.random.default_rng(12).standard_normal((1, 3, 9, 9)).astype(np.float32)
    th = tw = -(-9 // m)
    v = np.empty(((m + 2) ** 2, 3, th * tw), np.float32)
    flags = np.zeros(2, np.int64)
    for value, expect in [(1e29, 0), (1e38, 1), (-1e31, 1), (np.inf, 1), (np.nan, 1), (0.5, 0)]:
        x[0, 2, 8, 8] = value
        inp(x, v, 0, 0, 3, 0, th, tw, 1, 1, m, flags, 1)
        assert flags.tolist() == [0, expect]


@pytest.mark.parametrize("m", [2, 4])
def test_a_huge_finite_input_stays_in_its_windows(force, m):
    """A finite 1e37 overflows inside the transforms (inf - inf): such inputs take the exact path."""
    from tests.oracle import run_ort

    force(m)
    model, feeds = _model((1, 8, 16, 16), 8, [1, 1, 1, 1], False, "none", seed=13)
    x = feeds["x"].copy()
    x[0, 3, 8, 8] = 1e37
    got, want = (
        next(iter(mnnpy.Interpreter(convert(model)).create_session(backend="cpu").run({"x": x}).values())),
        run_ort(model, {"x": x})[0],
    )
    away = np.ones(got.shape[2:], bool)
    away[7:10, 7:10] = False  # the outputs whose window reads the value
    assert np.isfinite(got[:, :, away]).all()
    np.testing.assert_allclose(got[:, :, away], want[:, :, away], **ACCUMULATE)

"""The pointwise (1x1) Conv of the CPU backend (``backends/cpu/ops/pointwise.py``): products
cut into blocks per thread with bias and activation by the compiled epilogue
(``backends/cpu/kernels/epilogue.py``), against onnxruntime (``ACCUMULATE``) for every
fused activation, with and without bias, batch 1 and 2, groups, maps 1x1 to 40x40 and
products large enough to be split by columns and by rows; the epilogue kernel against a
float64 NumPy reference; and the NumPy path where numba cannot compile."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import mnnpy
from mnnpy.backends.cpu.kernels import epilogue
from mnnpy.backends.cpu.ops import pointwise as pw_ops
from mnnpy.converter import convert
from tests.backend_compare import CONV_ACTIVATIONS, conv_model
from tests.oracle import ACCUMULATE, check, run_ort

ACTS = CONV_ACTIVATIONS

SHAPES = [
    # (x shape, output channels, group)
    ((1, 8, 1, 1), 12, 1),
    ((1, 5, 3, 5), 7, 1),
    ((2, 6, 7, 7), 10, 1),
    ((1, 16, 40, 40), 24, 1),
    ((2, 8, 3, 5), 12, 2),
    ((1, 64, 40, 40), 192, 1),  # 39 MFLOPs: column blocks over the threads
    ((1, 512, 7, 7), 640, 1),  # 32 MFLOPs on 49 positions: row blocks
    ((2, 64, 20, 20), 128, 2),  # batched and grouped, split by columns
]


def _model(xs, m, g, bias, act, seed):
    rng = np.random.default_rng(seed)
    return conv_model(
        rng, xs, (m, xs[1] // g, 1, 1), {"group": g, "kernel_shape": [1, 1]}, bias=bias, after=ACTS[act], b_scale=1.0
    )


def _picked(monkeypatch):
    picked = []
    real = pw_ops._Pointwise.__init__

    def spy(self, *a, **kw):
        real(self, *a, **kw)
        picked.append(self)

    monkeypatch.setattr(pw_ops._Pointwise, "__init__", spy)
    return picked


@pytest.mark.parametrize(("case", "bias", "act"), list(itertools.product(range(len(SHAPES)), (True, False), ACTS)))
def test_pointwise_against_onnxruntime(case, bias, act, monkeypatch):
    picked = _picked(monkeypatch)
    xs, m, g = SHAPES[case]
    model, feeds = _model(xs, m, g, bias, act, seed=case)
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1 and picked[0].fused_activation == (act != "sigmoid")


def test_large_products_are_split_over_threads(monkeypatch):
    picked = _picked(monkeypatch)
    for case in (5, 6):  # column blocks, row blocks
        xs, m, g = SHAPES[case]
        model, feeds = _model(xs, m, g, True, "hardswish", seed=case)
        session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
        y = next(iter(session.run(feeds).values()))
        np.testing.assert_allclose(y, run_ort(model, feeds)[0], **ACCUMULATE)
        assert len(picked[-1].tasks) == 2
    assert pw_ops.blocks(640, 49, 32e6, 512, 2, True) == [(0, 320, 0, 49), (320, 640, 0, 49)]
    assert pw_ops.blocks(192, 1600, 39e6, 64, 2, True) == [(0, 192, 0, 800), (0, 192, 800, 1600)]
    assert pw_ops.blocks(192, 1600, 1e6, 64, 2, True) == [(0, 192, 0, 1600)]


def _reference(y, b, r0, r1, c0, c1, act, a0, a1):
    out = y.astype(np.float64)
    v = out[r0:r1, c0:c1] + b.astype(np.float64)[np.arange(r0, r1) % b.size, None]
    if act == "Relu":
        v = np.maximum(v, 0)
    elif act == "Clip":
        v = np.minimum(np.maximum(v, a0), a1)
    elif act == "LeakyRelu":
        v = np.where(v < 0, a0 * v, v)
    elif act == "HardSigmoid":
        v = np.clip(a0 * v + a1, 0, 1)
    elif act == "HardSwish":
        v = v * np.clip(v / 6 + 0.5, 0, 1) * a0 + a1
    out[r0:r1, c0:c1] = v
    return out


@pytest.mark.parametrize("act", list(epilogue.ACT))
def test_epilogue_kernel_against_float64(act):
    rng = np.random.default_rng(1)
    y = (rng.standard_normal((12, 37)) * 5).astype(np.float32)
    y[3, 4] = np.nan
    b = rng.standard_normal(4).astype(np.float32)  # rows are (N*M) with M = 4
    params = {"Clip": (-1.0, 2.5), "LeakyRelu": (0.2,), "HardSigmoid": (0.3, 0.45), "HardSwish": (1.5, -0.25)}.get(act, ())
    code, a0, a1 = epilogue.codes(act, params)
    want = _reference(y, b, 2, 11, 3, 30, act, float(a0), float(a1))
    epilogue.kernel()(y, b, 2, 11, 3, 30, code, a0, a1)
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    assert np.isnan(y[3, 4])


def test_codes():
    assert epilogue.codes("", []) == (0, 0.0, 0.0)
    assert epilogue.codes("Clip", [0.0, 6.0])[0] == epilogue.ACT["Clip"]
    assert epilogue.codes("Sigmoid", []) is None


def test_numpy_path_without_numba(monkeypatch):
    picked = _picked(monkeypatch)
    monkeypatch.setattr(epilogue, "kernel", lambda: None)
    for act in ("hardswish", "relu6", "none"):
        xs, m, g = SHAPES[3]
        model, feeds = _model(xs, m, g, True, act, seed=7)
        check(model, feeds, **ACCUMULATE)
        assert not picked[-1].fused_activation


@pytest.mark.parametrize(("xs", "packed"), [((1, 32, 3, 5), False), ((1, 32, 4, 4), True), ((2, 32, 4, 4), False)])
def test_packed_kernel_from_min_cols(monkeypatch, xs, packed):
    """Single images with at least ``packed_gemm.MIN_COLS`` positions take the packed-weight
    kernel (its weights packed at prepare), fewer positions and batches stay on BLAS."""
    picked = _picked(monkeypatch)
    model, feeds = _model(xs, 24, 1, True, "relu6", seed=3)
    check(model, feeds, **ACCUMULATE)
    assert (picked[-1].wp is not None) == packed

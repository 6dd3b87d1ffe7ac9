"""The packed-weight product of the CPU backend (``kernels/packed_gemm.py``) called directly,
against float64 NumPy (``ACCUMULATE``): output rows not a multiple of the panel, columns not a
multiple of the vector pair (masked last strip), a block of rows and columns inside larger
arrays (nothing outside it written), batches with one weight matrix or one per batch, inner
dimensions past one pass (partial sums stored and read back), the strip copy (rows of X far
apart, several panels), every fused activation and NaN passing through them; ``pack``'s layout."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mnnpy.backends.cpu.kernels import packed_gemm
from mnnpy.backends.cpu.kernels.epilogue import ACT
from mnnpy.backends.cpu.kernels.native import bind
from tests.oracle import ACCUMULATE

A0, A1 = np.float32(0.1), np.float32(0.6)


def _act(v, act):
    if act == "Relu":
        return np.where(v < 0, 0, v)
    if act == "Clip":
        return np.where(v < A0, A0, np.where(v > A1, A1, v))
    if act == "LeakyRelu":
        return np.where(v < 0, v * A0, v)
    if act == "HardSigmoid":
        return np.clip(v * A0 + A1, 0, 1)
    if act == "HardSwish":
        return v * np.clip(v / 6 + 0.5, 0, 1) * A0 + A1  # scale, shift
    return v


def _kernel():
    k = packed_gemm.kernel()
    if k is None:
        pytest.skip("numba cannot compile here")
    return k


# (M, K, columns, batches, weights per batch, rows r0:r1 or None for all)
SHAPES = [
    (13, 7, 5, 1, False, None),
    (37, 300, 49, 2, False, None),  # K past one pass (KC = 256), 49 columns: 32 + a masked 17
    (64, 147, 100, 1, False, None),  # X rows far apart, 8 panels: the strip copy
    (8, 16, 33, 2, True, None),  # one weight matrix per batch
    (40, 600, 20, 1, False, (16, 33)),  # a block of rows starting at a panel edge, ending inside one
    (5, 3, 1, 1, False, None),
    (24, 520, 70, 1, False, (8, 24)),  # K past two passes, copy, row block
]


@pytest.mark.parametrize(("case", "act"), list(itertools.product(range(len(SHAPES)), ACT)))
def test_against_float64(case, act):
    m, k, cols, batch, per_batch, rows = SHAPES[case]
    rng = np.random.default_rng(case)
    w = rng.standard_normal((batch if per_batch else 1, m, k), dtype=np.float32)
    x = rng.standard_normal((batch, k, cols + 9), dtype=np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    y = np.full((batch, m, cols + 11), 7.0, np.float32)
    r0, r1 = rows or (0, m)
    xc0, yc0 = 4, 6
    _kernel()(packed_gemm.pack(w), x, y, b, r0, r1, xc0, yc0, cols, ACT[act], A0, A1)
    want = _act(w.astype(np.float64) @ x[:, :, xc0 : xc0 + cols].astype(np.float64) + b[:, None], act)
    np.testing.assert_allclose(y[:, r0:r1, yc0 : yc0 + cols], want[:, r0:r1], **ACCUMULATE)
    outside = np.ones(y.shape, bool)
    outside[:, r0:r1, yc0 : yc0 + cols] = False
    assert (y[outside] == 7.0).all()


def test_no_bias_and_a_bound_call():
    """``b`` of length 0: no bias; the bound (native) call gives the same as the direct one."""
    rng = np.random.default_rng(9)
    w, x = rng.standard_normal((1, 20, 40), dtype=np.float32), rng.standard_normal((1, 40, 50), dtype=np.float32)
    y, y2 = np.zeros((1, 20, 50), np.float32), np.zeros((1, 20, 50), np.float32)
    k, wp, none = _kernel(), packed_gemm.pack(w), np.zeros(0, np.float32)
    k(wp, x, y, none, 0, 20, 0, 0, 50, 0, A0, A1)
    bind(k, wp, x, y2, none, 0, 20, 0, 0, 50, 0, A0, A1)()
    np.testing.assert_allclose(y[0], w[0].astype(np.float64) @ x[0], **ACCUMULATE)
    np.testing.assert_array_equal(y, y2)


@pytest.mark.parametrize("act", ACT)
def test_nan_passes_through(act):
    x = np.zeros((1, 2, 3), np.float32)
    x[0, 0, 1] = np.nan
    w = np.ones((1, 9, 2), np.float32)
    y = np.zeros((1, 9, 3), np.float32)
    _kernel()(packed_gemm.pack(w), x, y, np.zeros(9, np.float32), 0, 9, 0, 0, 3, ACT[act], A0, A1)
    assert np.isnan(y[0, :, 1]).all() and not np.isnan(y[0, :, [0, 2]]).any()


def test_pack_layout():
    w = np.arange(2 * 11 * 3, dtype=np.float32).reshape(2, 11, 3)
    p = packed_gemm.pack(w)
    assert p.shape == (2, 2, 3, packed_gemm.MR)
    for bw, r, kk in itertools.product(range(2), range(16), range(3)):
        want = w[bw, r, kk] if r < 11 else 0.0
        assert p[bw, r // packed_gemm.MR, kk, r % packed_gemm.MR] == want


def test_pack_order_pass_by_pass():
    """Past one pass of ``KC`` rows, each pass's panels follow each other (one stream a pass)."""
    mr, kc = packed_gemm.MR, packed_gemm.KC
    m, k = 20, 2 * kc + 88
    w = np.random.default_rng(5).standard_normal((2, m, k)).astype(np.float32)
    flat = packed_gemm.pack(w).reshape(2, -1)
    p = -(-m // mr)
    for bw, r, kk in itertools.product(range(2), range(p * mr), range(k)):
        k0 = kk // kc * kc
        at = k0 * p * mr + (r // mr) * min(kc, k - k0) * mr + (kk - k0) * mr + r % mr
        assert flat[bw, at] == (w[bw, r, kk] if r < m else 0.0)

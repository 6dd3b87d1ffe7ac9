"""The direct Conv kernel (``backends/cpu/kernels/direct.py``, taken by ``ops/direct.py``)
against onnxruntime (``ACCUMULATE``): 1 to 24 input channels, 32 to 72
output channels (blocks past ``M`` zero), strides, dilations, asymmetric pads, rows narrower
and wider than a step of eight outputs, a batch, with and without bias, every fused activation
and one left to NumPy (Sigmoid); which Convs take it; its row ranges write nothing else."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mnnpy.backends.cpu.kernels import direct as direct_kernel
from mnnpy.backends.cpu.ops import direct as direct_ops
from tests.backend_compare import CONV_ACTIVATIONS, conv_model, spy_inits
from tests.oracle import ACCUMULATE, check

GEOMETRY = [
    # (x shape, M, kernel, attrs)
    ((1, 3, 23, 21), 32, 3, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # a MobileNetV2 stem
    ((2, 3, 19, 17), 64, 7, {"strides": [2, 2], "pads": [3, 3, 3, 3]}),  # a ResNet stem, batched
    ((1, 1, 9, 30), 40, 3, {"pads": [0, 2, 1, 1], "dilations": [2, 1]}),  # 40 channels: a block past M
    ((1, 4, 12, 5), 72, 5, {"strides": [1, 2], "pads": [2, 0, 2, 3]}),  # output rows narrower than a step
    ((1, 3, 6, 6), 32, 3, {"pads": [4, 4, 4, 4]}),  # rows wholly in the padding
    ((1, 24, 14, 14), 48, 3, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # a strided conv deeper in a network
    ((1, 16, 9, 9), 32, 1, {"strides": [2, 2]}),  # a 1x1 stride-2 downsampling conv
]


def _model(case, bias, act, seed):
    xs, m, k, attrs = GEOMETRY[case]
    rng = np.random.default_rng(seed)
    return conv_model(
        rng, xs, (m, xs[1], k, k), {"kernel_shape": [k, k], **attrs}, bias=bias, after=CONV_ACTIVATIONS[act], b_scale=1.0
    )


@pytest.mark.parametrize(("case", "bias", "act"), list(itertools.product(range(len(GEOMETRY)), (True, False), CONV_ACTIVATIONS)))
def test_against_onnxruntime(monkeypatch, case, bias, act):
    picked = spy_inits(monkeypatch, direct_ops._Direct)
    model, feeds = _model(case, bias, act, seed=case)
    check(model, feeds, **ACCUMULATE)
    assert len(picked) == 1 and picked[0].fused_activation == (act != "sigmoid")


@pytest.mark.parametrize(
    ("c", "m", "group", "rows_bytes", "taken"),
    [
        (3, 32, 1, None, True),
        (40, 32, 1, None, True),
        (3, 16, 1, None, False),
        (4, 32, 2, None, False),
        (40, 32, 1, 4096, False),
        (2, 160, 1, 4096, False),
    ],
)
def test_which_convs_take_it(monkeypatch, c, m, group, rows_bytes, taken):
    """At least MIN_M output channels, group 1, input rows and a row of outputs within
    ROWS_BYTES (40 channels x 3 rows of 10 and their padding; 160 channels x 13 positions:
    each over 4 KiB)."""
    if rows_bytes is not None:
        monkeypatch.setattr(direct_ops, "ROWS_BYTES", rows_bytes)
    picked = spy_inits(monkeypatch, direct_ops._Direct)
    rng = np.random.default_rng(4)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "group": group}
    model, feeds = conv_model(rng, (1, c, 10, 10), (m, c // group, 3, 3), attrs)
    check(model, feeds, **ACCUMULATE)
    assert bool(picked) == taken


def _kernel_inputs(seed, x_shape, m, steps=8):
    """The compiled kernel of ``steps`` positions a step (skip without numba) and random ``x``,
    3x3 ``w`` of ``m`` channels, ``b``."""
    kernel = direct_kernel.kernel(steps)
    if kernel is None:
        pytest.skip("numba cannot compile here")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape, dtype=np.float32)
    w = rng.standard_normal((m, x_shape[1], 3, 3), dtype=np.float32)
    return kernel, x, w, rng.standard_normal(m).astype(np.float32)


@pytest.mark.parametrize("steps", [7, 8])
def test_row_ranges_write_only_their_rows(steps):
    kernel, x, w, b = _kernel_inputs(5, (2, 3, 9, 11), 33, steps)
    y = np.full((2, 33, 9, 11), 7.0, np.float32)
    args = (1, 1, 1, 1, 1, 1, 0, np.float32(0), np.float32(0))
    kernel(x, direct_kernel.pack(w), b, y, 3, 3, 4, 13, 0, 1 << 20, *args)  # rows 4..8 of image 0, 0..3 of image 1
    rows = y.transpose(0, 2, 1, 3).reshape(18, 33, 11)
    assert (rows[:4] == 7.0).all() and (rows[13:] == 7.0).all() and not (rows[4:13] == 7.0).any()


@pytest.mark.parametrize("steps", [7, 8])
def test_channel_block_ranges_write_only_their_channels(steps):
    kernel, x, w, b = _kernel_inputs(6, (1, 5, 7, 7), 70, steps)  # 70 channels: 6 blocks, the last partly past M
    args = (1, 1, 1, 1, 1, 1, 1, np.float32(0), np.float32(0))  # stride 1, pads 1, Relu
    whole = np.empty((1, 70, 7, 7), np.float32)
    kernel(x, direct_kernel.pack(w), b, whole, 3, 3, 0, 7, 0, 6, *args)
    y = np.full((1, 70, 7, 7), 7.0, np.float32)
    kernel(x, direct_kernel.pack(w), b, y, 3, 3, 0, 7, 2, 4, *args)  # channels 32..63
    np.testing.assert_array_equal(y[0, 32:64], whole[0, 32:64])
    assert (y[0, :32] == 7.0).all() and (y[0, 64:] == 7.0).all()
    y.fill(7.0)
    kernel(x, direct_kernel.pack(w), b, y, 3, 3, 0, 7, 4, 6, *args)  # the last pair, cropped to M
    np.testing.assert_array_equal(y[0, 64:], whole[0, 64:])
    assert (y[0, :64] == 7.0).all()


@pytest.mark.parametrize(
    ("rows", "pairs", "threads", "expect"),
    [(7, 16, 2, "pairs"), (56, 4, 2, "rows"), (8, 8, 2, "rows"), (1, 3, 2, "pairs"), (7, 1, 2, "rows"), (9, 4, 1, "rows")],
)
def test_cuts_take_the_more_even_split(rows, pairs, threads, expect):
    cuts = direct_ops.cuts_of(rows, pairs, threads)
    assert len(cuts) <= threads
    cells = {(r, q) for lo, hi, q0, q1 in cuts for r in range(lo, hi) for q in range(q0, q1)}
    assert len(cells) == sum((hi - lo) * (q1 - q0) for lo, hi, q0, q1 in cuts) == rows * 2 * pairs  # each once
    assert all(q0 % 2 == 0 and q1 % 2 == 0 for _, _, q0, q1 in cuts)
    by_pairs = any(q1 - q0 < 2 * pairs for _, _, q0, q1 in cuts)
    assert by_pairs == (expect == "pairs")


def test_split_by_channel_blocks_matches_onnxruntime(monkeypatch):
    """A 7x7 map of 128 channels over 2 threads: cut by channel blocks, against onnxruntime."""
    import mnnpy
    from mnnpy.converter import convert
    from tests.oracle import run_ort

    picked = spy_inits(monkeypatch, direct_ops._Direct)
    rng = np.random.default_rng(7)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    model, feeds = conv_model(rng, (1, 40, 13, 13), (128, 40, 3, 3), attrs, after=CONV_ACTIVATIONS["relu"], b_scale=1.0)
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu", num_threads=2)
    got = next(iter(session.run(feeds).values()))
    np.testing.assert_allclose(got, run_ort(model, feeds)[0], **ACCUMULATE)
    assert picked and len(picked[0].tasks) == 2 and direct_ops.cuts_of(7, 4, 2)[0][3] == 4  # two tasks of 2 pairs each


def test_small_convs_are_not_cut_by_blocks():
    assert direct_ops.cuts_of(1, 4, 2, flops=5e5) == [(0, 1, 0, 8)]  # one task, as a row cut gives
    assert len(direct_ops.cuts_of(1, 4, 2, flops=5e7)) == 2


@pytest.mark.parametrize("wo", [1, 5, 7, 8, 9, 13, 14, 16, 17, 28, 56, 112, 320])
def test_seven_and_eight_positions_a_step_agree(wo):
    """Both kernels (kernels/direct.py ``positions``) give the same sums on rows of every
    remainder against 7 and 8, with the definition's float64 result as the reference."""
    k7, x, w, b = _kernel_inputs(7, (2, 6, 5, wo), 40, 7)
    k8 = direct_kernel.kernel(8)
    args = (1, 1, 1, 1, 1, 1, 1, np.float32(0), np.float32(0))  # stride 1, pads 1, Relu
    ys = []
    for k in (k7, k8):
        y = np.full((2, 40, 5, wo), np.nan, np.float32)
        k(x, direct_kernel.pack(w), b, y, 3, 3, 0, 10, 0, 1 << 20, *args)
        ys.append(y)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 40, 5, wo)) + b[None, :, None, None]
    for ky in range(3):
        for kx in range(3):
            ref += np.einsum("nchw,mc->nmhw", xp[:, :, ky : ky + 5, kx : kx + wo], w[:, :, ky, kx].astype(np.float64))
    ref = np.maximum(ref, 0)
    np.testing.assert_allclose(ys[0], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ys[1], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("wo", "steps"), [(7, 7), (14, 7), (28, 7), (112, 7), (56, 7), (8, 8), (16, 8), (24, 8), (320, 7), (13, 7)]
)
def test_positions_a_step(wo, steps):
    """Seven positions a step unless eight compute fewer positions by more than the 9% a
    seven-position step saves per position."""
    assert direct_kernel.positions(wo) == steps

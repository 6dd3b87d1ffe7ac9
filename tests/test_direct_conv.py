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


def test_row_ranges_write_only_their_rows():
    kernel = direct_kernel.kernel()
    if kernel is None:
        pytest.skip("numba cannot compile here")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 9, 11), dtype=np.float32)
    w = rng.standard_normal((33, 3, 3, 3), dtype=np.float32)
    b = rng.standard_normal(33).astype(np.float32)
    y = np.full((2, 33, 9, 11), 7.0, np.float32)
    args = (1, 1, 1, 1, 1, 1, 0, np.float32(0), np.float32(0))
    kernel(x, direct_kernel.pack(w), b, y, 3, 3, 4, 13, *args)  # rows 4..8 of image 0, 0..3 of image 1
    rows = y.transpose(0, 2, 1, 3).reshape(18, 33, 11)
    assert (rows[:4] == 7.0).all() and (rows[13:] == 7.0).all() and not (rows[4:13] == 7.0).any()

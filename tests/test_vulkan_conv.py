"""Vulkan-only Conv checks: the channel split over a work group (local z), a chain of the three
shaders in one command buffer, 3-D Conv and a run-time bias falling back. What both GPU
backends do is in tests/test_gpu_conv.py. Skipped, with the reason, where Vulkan is unusable
(CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from mnnpy.backends.vulkan.execution import VulkanExecution
from tests.backend_compare import ACCUMULATE, compare
from tests.backend_compare import conv_model as _conv
from tests.backend_compare import he_weights as _weights
from tests.oracle import make_model, rand

_OK, _WHY = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _OK, reason=f"Vulkan unavailable: {_WHY}")


@pytest.fixture
def shaders(monkeypatch):
    """The SPIR-V variants of every dispatch described at resize, in order."""
    names: list[str] = []
    real = VulkanExecution.dispatch

    def spy(self, shader, *args, **kwargs):
        names.append(shader)
        return real(self, shader, *args, **kwargs)

    monkeypatch.setattr(VulkanExecution, "dispatch", spy)
    return names


def _compare(model, feeds, on_device=True):
    return compare(model, feeds, ACCUMULATE, on_device, backend="vulkan")


SPLIT = [
    ((1, 9, 5, 7), (5, 9, 3, 3), {"pads": [1, 1, 1, 1]}, 2),
    ((2, 24, 7, 5), (7, 24, 3, 3), {"pads": [1, 0, 1, 2], "strides": [1, 2]}, 4),
    ((1, 70, 3, 9), (6, 70, 1, 3), {"dilations": [1, 2]}, 16),  # 70 channels: 16 sums of 4 or 5
    ((1, 36, 5, 5), (10, 18, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, 4),
]


@pytest.mark.parametrize("xs,ws,attrs,split", SPLIT, ids=[f"{c[0]}-{c[1]}-split{c[3]}" for c in SPLIT])
def test_channel_split(rng, monkeypatch, xs, ws, attrs, split):
    """Small outputs split the input channels over a work group (local z), sums in shared memory."""
    seen = []
    real = VulkanExecution.dispatch

    def spy(self, shader, *args, local=None, **kwargs):
        seen.append((shader, local))
        return real(self, shader, *args, local=local, **kwargs)

    monkeypatch.setattr(VulkanExecution, "dispatch", spy)
    model, feeds = _conv(rng, xs, ws, attrs, after=[("HardSwish", {}, [])])
    _compare(model, feeds)
    assert seen[0][0] == "conv_general" and seen[0][1][2] == split


def test_chain_of_convs(rng, shaders):
    """1x1 expand -> depthwise -> 1x1 project + residual (MobileNetV2's block): the three
    shaders one after another in one command buffer, barriers between them."""
    x = rand(rng, 1, 6, 11, 9)
    inits = {
        "w1": _weights(rng, 18, 6, 1, 1),
        "b1": rand(rng, 18),
        "w2": _weights(rng, 18, 1, 3, 3),
        "b2": rand(rng, 18),
        "w3": _weights(rng, 6, 18, 1, 1),
        "b3": rand(rng, 6),
        "lo": np.float32(0),
        "hi": np.float32(6),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], group=18, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"]),
        helper.make_node("Add", ["c3", "x"], ["y"]),
    ]
    _compare(make_model(nodes, {"x": x}, ["y"], inits), {"x": x})
    assert shaders == ["gemm_nn", "conv_depthwise", "gemm_nn", "binary_add"]


def test_conv3d_falls_back(rng):
    model, feeds = _conv(rng, (1, 2, 5, 6, 7), (3, 2, 3, 3, 3), {})
    s = _compare(model, feeds, on_device=False)
    assert "Conv with 3 spatial dims (Vulkan runs 2-D)" in s.partitions()


def test_bias_at_run_time_falls_back(rng):
    x, w, b = rand(rng, 1, 3, 7, 7), _weights(rng, 4, 3, 3, 3), rand(rng, 4)
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"])], {"x": x, "b": b}, ["y"], {"w": w})
    s = _compare(model, {"x": x, "b": b}, on_device=False)
    assert "Conv bias computed at run time" in s.partitions()


def test_pointwise_conv_on_a_small_map_splits_k(rng, shaders):
    """MobileNetV2's 1x1 convolutions on 7x7 maps: few work groups over K = 960, so split-K;
    the fused ReLU6 and the bias are applied once, in the second pass."""
    model, feeds = _conv(rng, (1, 960, 7, 7), (320, 960, 1, 1), {}, after=[("Clip", {}, (0.0, 6.0))])
    _compare(model, feeds)
    assert shaders == ["gemm_nn", "gemm_splitk"]

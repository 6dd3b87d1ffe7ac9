"""Vulkan Conv: the general (register-blocked), depthwise and 1x1-GEMM shaders against the CPU.

Every shader variant on small odd shapes (channel counts not multiples of 4), batch 2,
pads/strides/dilations/auto_pad, groups, each fused activation, bias or none, a second
input shape, and the CPU fallbacks with their reasons. Skipped, with the reason, where
Vulkan is unusable (CI installs Mesa's lavapipe).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from mnnpy.backends.vulkan.execution import VulkanExecution
from tests.backend_compare import ACCUMULATE, compare, sessions
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


def _weights(rng, *shape):
    """He-like scale (1/sqrt(fan-in)) so that outputs stay O(1), as in trained nets."""
    return rand(rng, *shape, scale=1 / np.sqrt(np.prod(shape[1:])))


def _conv(rng, xs, ws, attrs, bias=True, after=()):
    """A model ``x -> Conv(w, b) -> after...`` (``after``: (op, attrs, extra constant inputs))."""
    x, inits = rand(rng, *xs), {"w": _weights(rng, *ws)}
    names = ["x", "w"]
    if bias:
        inits["b"] = rand(rng, ws[0], scale=0.5)
        names.append("b")
    nodes, prev = [helper.make_node("Conv", names, ["c0"], **attrs)], "c0"
    for i, (op, a, extra) in enumerate(after):
        ins = [prev]
        for j, v in enumerate(extra):
            inits[f"k{i}_{j}"] = np.asarray(v, np.float32)
            ins.append(f"k{i}_{j}")
        nodes.append(helper.make_node(op, ins, [f"c{i + 1}"], **a))
        prev = f"c{i + 1}"
    return make_model(nodes, {"x": x}, [prev], inits), {"x": x}


def _compare(model, feeds, on_device=True):
    return compare(model, feeds, ACCUMULATE, on_device, backend="vulkan")


# (x shape, w shape, attrs, shader the Execution picks)
CASES = [
    ((2, 5, 13, 11), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}, "conv_general"),
    ((1, 3, 19, 17), (13, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}, "conv_general"),  # ResNet stem
    ((1, 6, 12, 13), (9, 6, 1, 1), {"strides": [2, 2]}, "conv_general"),  # ResNet downsample
    ((2, 6, 9, 10), (9, 2, 3, 3), {"group": 3, "pads": [1, 0, 2, 1], "dilations": [2, 1]}, "conv_general"),
    ((1, 6, 7, 9), (10, 3, 1, 1), {"group": 2}, "conv_general"),  # grouped 1x1: not the GEMM
    ((1, 5, 7, 9), (6, 5, 2, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 1]}, "conv_general"),
    ((1, 5, 7, 9), (6, 5, 3, 2), {"auto_pad": "SAME_LOWER", "strides": [1, 2]}, "conv_general"),
    ((1, 5, 9, 9), (3, 5, 3, 3), {"auto_pad": "VALID", "dilations": [2, 2]}, "conv_general"),
    ((1, 3, 5, 23), (5, 3, 1, 5), {"pads": [0, 2, 0, 2]}, "conv_general"),  # 1x5 kernel
    ((1, 7, 9, 11), (14, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}, "conv_general"),  # channel multiplier 2
    ((1, 3, 6, 40), (3, 1, 1, 9), {"group": 3, "dilations": [1, 4]}, "conv_general"),  # depthwise, row too long
    ((2, 7, 13, 11), (9, 7, 1, 1), {}, "gemm_nn"),
    ((1, 33, 10, 10), (70, 33, 1, 1), {}, "gemm_nn"),  # more than one 64x64 tile, K across two TK steps
    ((1, 17, 3, 3), (3, 17, 1, 1), {}, "gemm_nn"),  # M <= 8: the thin tile
    ((2, 9, 5, 5), (11, 9, 1, 1), {"auto_pad": "SAME_UPPER"}, "gemm_nn"),  # SAME pads of a 1x1 are 0
    ((2, 7, 13, 11), (7, 1, 3, 3), {"group": 7, "pads": [1, 1, 1, 1]}, "conv_depthwise"),
    ((1, 5, 14, 15), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]}, "conv_depthwise"),
    ((1, 3, 11, 12), (3, 1, 5, 5), {"group": 3, "pads": [2, 2, 2, 2]}, "conv_depthwise"),
    ((1, 3, 11, 12), (3, 1, 3, 3), {"group": 3, "dilations": [2, 3], "pads": [0, 1, 2, 0]}, "conv_depthwise"),
    ((1, 6, 9, 9), (6, 1, 3, 3), {"group": 6, "auto_pad": "SAME_UPPER", "strides": [2, 2]}, "conv_depthwise"),
    ((1, 6, 9, 9), (6, 1, 2, 2), {"group": 6, "auto_pad": "SAME_LOWER"}, "conv_depthwise"),
]
IDS = [f"{c[3]}-{c[0]}-{c[1]}-{'-'.join(c[2])}" for c in CASES]


@pytest.mark.parametrize("xs,ws,attrs,shader", CASES, ids=IDS)
def test_conv(rng, shaders, xs, ws, attrs, shader):
    _compare(*_conv(rng, xs, ws, attrs))
    assert shaders == [shader]


@pytest.mark.parametrize("xs,ws,attrs,shader", CASES[::3], ids=IDS[::3])
def test_conv_no_bias(rng, shaders, xs, ws, attrs, shader):
    _compare(*_conv(rng, xs, ws, attrs, bias=False))
    assert shaders == [shader]


ACTS = [
    ("Relu", {}, []),
    ("Clip", {}, [-0.25, 0.5]),
    ("Clip", {}, [0.0]),  # min only: max stays +FLT_MAX
    ("LeakyRelu", {"alpha": 0.07}, []),
    ("Sigmoid", {}, []),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []),
    ("HardSwish", {}, []),
    ("Tanh", {}, []),
]
ACT_CASES = [CASES[0], CASES[3], CASES[11], CASES[13], CASES[15], CASES[16]]


@pytest.mark.parametrize("case", ACT_CASES, ids=[f"{c[3]}-{c[0]}" for c in ACT_CASES])
@pytest.mark.parametrize("act", ACTS, ids=[f"{a[0]}{len(a[2])}" for a in ACTS])
def test_fused_activation(rng, shaders, act, case):
    """The converter fuses the activation into Conv; the shader applies it (one op, one dispatch)."""
    xs, ws, attrs, shader = case
    model, feeds = _conv(rng, xs, ws, attrs, after=[act])
    s = _compare(model, feeds)
    assert shaders == [shader]
    assert s.partitions().count("\n  ") == 1, s.partitions()  # Conv alone


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


def test_dynamic_shapes_resize(rng):
    """A second input shape re-runs the resize (new geometry, new re-laid weights), then the first again."""
    w, b = _weights(rng, 6, 2, 3, 3), rand(rng, 6)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=2, pads=[1, 1, 1, 1], strides=[2, 1])]
    x0 = rand(rng, 1, 4, 9, 7)
    model = make_model(nodes, {"x": x0}, ["y"], {"w": w, "b": b}, input_shapes={"x": [1, 4, "h", "w"]})
    dev, cpu = sessions(model, backend="vulkan")
    for shape in [(1, 4, 9, 7), (1, 4, 12, 17), (1, 4, 9, 7)]:
        x = rand(rng, *shape)
        np.testing.assert_allclose(dev.run({"x": x})["y"], cpu.run({"x": x})["y"], atol=1e-4, rtol=1e-4)


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


def test_conv1d_falls_back(rng):
    model, feeds = _conv(rng, (1, 3, 17), (4, 3, 3), {})
    s = _compare(model, feeds, on_device=False)
    assert "Conv with 1 spatial dims (Vulkan runs 2-D)" in s.partitions()


def test_conv3d_falls_back(rng):
    model, feeds = _conv(rng, (1, 2, 5, 6, 7), (3, 2, 3, 3, 3), {})
    s = _compare(model, feeds, on_device=False)
    assert "Conv with 3 spatial dims (Vulkan runs 2-D)" in s.partitions()


def test_weights_at_run_time_fall_back(rng):
    x, w = rand(rng, 1, 3, 7, 7), _weights(rng, 4, 3, 3, 3)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"])
    s = _compare(model, {"x": x, "w": w}, on_device=False)
    assert "Conv weights computed at run time" in s.partitions()


def test_bias_at_run_time_falls_back(rng):
    x, w, b = rand(rng, 1, 3, 7, 7), _weights(rng, 4, 3, 3, 3), rand(rng, 4)
    model = make_model([helper.make_node("Conv", ["x", "w", "b"], ["y"])], {"x": x, "b": b}, ["y"], {"w": w})
    s = _compare(model, {"x": x, "b": b}, on_device=False)
    assert "Conv bias computed at run time" in s.partitions()

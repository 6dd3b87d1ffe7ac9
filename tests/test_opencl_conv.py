"""OpenCL-only Conv checks: fp16 storage, the 1x1 GEMM with and without local-memory tiles, the
``-D SPLIT`` channel split, blocks modelled on MobileNetV2/ResNet-18/PP-OCR. What both GPU
backends do is in tests/test_gpu_conv.py.

Skipped, with the reason, where no OpenCL device is usable.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from mnnpy.backend import backend_availability
from tests.backend_compare import ACCUMULATE, HALF, compare
from tests.backend_compare import conv_model as _conv
from tests.backend_compare import he_weights as _weights
from tests.oracle import make_model, rand
from tests.test_gpu_conv import ACTS as GPU_ACTS
from tests.test_gpu_conv import CASES as GPU_CASES

_OK, _WHY = backend_availability("opencl")
if not _OK:
    pytest.skip(f"OpenCL unavailable: {_WHY}", allow_module_level=True)


CASES = GPU_CASES["opencl"]  # (x shape, w shape, attrs, kernel the Execution picks)


ACTS = GPU_ACTS["opencl"]  # (activation op, attrs, constant inputs)


@pytest.mark.parametrize("case", [0, 1, 3, 10, 11, 14], ids=["conv2d", "stem", "grouped", "gemm", "gemm-tiles", "depthwise"])
def test_fp16_storage(rng, case):
    xs, ws, attrs, _ = CASES[case]
    model, feeds = _conv(rng, xs, ws, attrs, after=[("Clip", {}, (0.0, 6.0))])
    s = compare(model, feeds, HALF, precision="low")
    assert s.backends[0].storage == np.float16


@pytest.mark.parametrize("tiles", [True, False], ids=["local-tiles", "direct"])
@pytest.mark.parametrize("case", [10, 11, 12], ids=["odd", "tiles", "thin"])
def test_pointwise_gemm_variants(rng, monkeypatch, tiles, case):
    """The 1x1 GEMM with local-memory tiles (GPUs) and with direct loads (CPU devices)."""
    from mnnpy.backends.opencl import gemm

    monkeypatch.setattr(gemm, "LOCAL_TILES", tiles)
    xs, ws, attrs, _ = CASES[case]
    model, feeds = _conv(rng, xs, ws, attrs, after=[ACTS[2]])
    compare(model, feeds, ACCUMULATE)


SPLIT_CASES = [
    ((1, 64, 7, 7), (40, 64, 3, 3), {"pads": [1, 1, 1, 1]}),  # ResNet's 7x7 stage, smaller
    ((2, 37, 6, 5), (9, 37, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 1]}),  # channels not a multiple of the split
    ((1, 48, 5, 5), (30, 16, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
]


@pytest.mark.parametrize("xs,ws,attrs", SPLIT_CASES, ids=["resnet", "odd", "grouped"])
@pytest.mark.parametrize("precision", ["normal", "low"])
def test_channel_split(rng, monkeypatch, xs, ws, attrs, precision):
    """conv2d with -D SPLIT (GPUs, small outputs): input channels split over a work group."""
    from mnnpy.backends.opencl import gemm

    monkeypatch.setattr(gemm, "LOCAL_TILES", True)  # as on a GPU
    model, feeds = _conv(rng, xs, ws, attrs, after=[ACTS[0]])
    s = compare(model, feeds, ACCUMULATE if precision == "normal" else HALF, precision=precision)
    assert "-D SPLIT=" in next(iter(s._plan.executions.values())).launch.key


def _block(rng, nodes, x, inits, out):
    return make_model(nodes, {"x": x}, [out], inits), {"x": x}


def test_mobilenetv2_block(rng):
    """Inverted residual: 1x1 expand + Clip(0, 6), depthwise 3x3 + Clip, 1x1 project, residual
    Add; then GlobalAveragePool, Flatten and the classifier Gemm (transB)."""
    c, e = 12, 36
    x = rand(rng, 2, c, 15, 15)
    inits = {
        "w1": _weights(rng, e, c, 1, 1),
        "b1": rand(rng, e, scale=0.1),
        "w2": _weights(rng, e, 1, 3, 3),
        "b2": rand(rng, e, scale=0.1),
        "w3": _weights(rng, c, e, 1, 1),
        "b3": rand(rng, c, scale=0.1),
        "lo": np.float32(0),
        "hi": np.float32(6),
        "fc": _weights(rng, 10, c),
        "fb": rand(rng, 10, scale=0.1),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["a"]),
        helper.make_node("Clip", ["a", "lo", "hi"], ["a6"]),
        helper.make_node("Conv", ["a6", "w2", "b2"], ["d"], group=e, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]),
        helper.make_node("Conv", ["d6", "w3", "b3"], ["p"]),
        helper.make_node("Add", ["p", "x"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fb"], ["y"], transB=1),
    ]
    model, feeds = _block(rng, nodes, x, inits, "y")
    desc = compare(model, feeds, ACCUMULATE).partitions()
    assert "Clip '" not in desc  # both Clips fused


def test_resnet_block(rng):
    """Stem (7x7 stride 2 + BatchNorm + Relu) and a basic block with a 1x1 stride-2 shortcut."""
    x = rand(rng, 1, 3, 32, 32)
    bn = {f"bn_{k}": v for k, v in zip(("s", "b", "m", "v"), (rand(rng, 16) * 0.2 + 1, rand(rng, 16) * 0.1, rand(rng, 16) * 0.1))}
    bn["bn_v"] = np.abs(rand(rng, 16)) + 0.5
    inits = {
        "w0": _weights(rng, 16, 3, 7, 7),
        **bn,
        "w1": _weights(rng, 24, 16, 3, 3),
        "w2": _weights(rng, 24, 24, 3, 3),
        "ws": _weights(rng, 24, 16, 1, 1),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["s0"], pads=[3, 3, 3, 3], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["s0", "bn_s", "bn_b", "bn_m", "bn_v"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["s"]),
        helper.make_node("Conv", ["s", "w1"], ["a"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["a"], ["ar"]),
        helper.make_node("Conv", ["ar", "w2"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["s", "ws"], ["sc"], strides=[2, 2]),
        helper.make_node("Add", ["b", "sc"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model, feeds = _block(rng, nodes, x, inits, "y")
    desc = compare(model, feeds, ACCUMULATE).partitions()
    assert "BatchNormalization '" not in desc  # folded into the stem Conv, its Relu fused


def test_ppocr_block(rng):
    """PP-OCR style: depthwise 5x5 stride 2 with HardSwish, 1x1 with HardSwish, odd channels."""
    x = rand(rng, 1, 9, 24, 40)
    inits = {"w1": _weights(rng, 9, 1, 5, 5), "w2": _weights(rng, 27, 9, 1, 1), "b2": rand(rng, 27, scale=0.1)}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["d"], group=9, pads=[2, 2, 2, 2], strides=[2, 2]),
        helper.make_node("HardSwish", ["d"], ["dh"]),
        helper.make_node("Conv", ["dh", "w2", "b2"], ["p"]),
        helper.make_node("HardSwish", ["p"], ["y"]),
    ]
    model, feeds = _block(rng, nodes, x, inits, "y")
    compare(model, feeds, ACCUMULATE)

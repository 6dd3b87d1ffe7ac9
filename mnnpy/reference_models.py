"""MobileNetV2 and ResNet-18 as ONNX (opset 13) with seeded random weights, built with onnx.helper.

Both take ``input: (N, 3, S, S) float32`` (N dynamic, S = 224 unless ``size`` says otherwise,
ImageNet-normalised values, roughly N(0, 1)) and give ``output: (N, classes) float32``
logits (1000 classes). BatchNormalization is kept as its own node (folding it is the
converter's job) and ReLU6 is ``Clip(0, 6)``. Weights are He-normal (conv), BN has
gamma ~ 1, small beta/mean and positive variance, so activations stay O(1) through the
network. Used by the benchmarks (``bench/make_models.py`` writes them as files), the tests
and the reference workloads of ``mnnpy.capabilities``; nothing is downloaded.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class _Builder:
    """Accumulates nodes and initializers; each method returns the name of its output."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def const(self, value: np.ndarray, kind: str = "w") -> str:
        name = self._name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs) -> str:
        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, pad: int | None = None) -> str:
        """Conv without bias (BN follows), He-normal weights: std = sqrt(2 / fan_in)."""
        fan_in = cin // groups * k * k
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (cout, cin // groups, k, k))
        p = k // 2 if pad is None else pad
        return self.node(
            "Conv", [x, self.const(w)], kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p], group=groups
        )

    def bn(self, x: str, c: int, gamma: float = 1.0) -> str:
        """Inference BatchNormalization with random statistics (var > 0)."""
        r = self.rng
        params = [
            gamma * (1 + 0.1 * r.standard_normal(c)),
            0.1 * r.standard_normal(c),
            0.1 * r.standard_normal(c),
            r.uniform(0.5, 1.5, c),
        ]
        return self.node("BatchNormalization", [x] + [self.const(p, "bn") for p in params], epsilon=1e-5)

    def relu6(self, x: str) -> str:
        return self.node("Clip", [x, self.const(np.array(0.0), "min"), self.const(np.array(6.0), "max")])

    def head(self, x: str, c: int, classes: int = 1000) -> str:
        """GlobalAveragePool -> Flatten -> Gemm(c -> classes)."""
        x = self.node("Flatten", [self.node("GlobalAveragePool", [x])], axis=1)
        w = self.rng.normal(0.0, np.sqrt(1.0 / c), (classes, c))
        b = 0.01 * self.rng.standard_normal(classes)
        out = "output"
        self.nodes.append(helper.make_node("Gemm", [x, self.const(w), self.const(b, "b")], [out], name="fc", transB=1))
        return out

    def model(self, name: str, out: str, size: int = 224, classes: int = 1000) -> onnx.ModelProto:
        inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, size, size])
        outp = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", classes])
        graph = helper.make_graph(self.nodes, name, [inp], [outp], self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mnnpy-bench")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


# (expansion t, output channels c, repeats n, first stride s) of MobileNetV2 1.0
MBV2_CONFIG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def mobilenet_v2(seed: int = 0, size: int = 224, config=MBV2_CONFIG, last: int = 1280, classes: int = 1000) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): 3x3 s2 stem, 17 inverted residual blocks, 1x1 to 1280, GAP, Gemm 1000.

    ``size``: the input's height and width; ``config`` (``MBV2_CONFIG``'s rows), ``last`` (the
    final 1x1 conv's channels) and ``classes`` shrink it into a smaller net of the same kind."""
    b = _Builder(seed)
    x = b.relu6(b.bn(b.conv("input", 3, 32, 3, stride=2), 32))
    cin = 32
    for t, c, n, s in config:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x if t == 1 else b.relu6(b.bn(b.conv(x, cin, hidden, 1), hidden))
            y = b.relu6(b.bn(b.conv(y, hidden, hidden, 3, stride=stride, groups=hidden), hidden))
            y = b.bn(b.conv(y, hidden, c, 1), c, gamma=0.5)
            x = b.node("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
    x = b.relu6(b.bn(b.conv(x, cin, last, 1), last))
    return b.model("mobilenet_v2", b.head(x, last, classes), size, classes)


def resnet18(seed: int = 1) -> onnx.ModelProto:
    """ResNet-18: 7x7 s2 conv, 3x3 s2 max pool, 4 stages x 2 BasicBlocks (64..512), GAP, Gemm 1000."""
    b = _Builder(seed)
    x = b.node("Relu", [b.bn(b.conv("input", 3, 64, 7, stride=2), 64)])
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, c in enumerate([64, 128, 256, 512]):
        for i in range(2):
            stride = 2 if stage > 0 and i == 0 else 1
            y = b.node("Relu", [b.bn(b.conv(x, cin, c, 3, stride=stride), c)])
            y = b.bn(b.conv(y, c, c, 3), c, gamma=0.3)
            short = b.bn(b.conv(x, cin, c, 1, stride=stride, pad=0), c) if stride != 1 or cin != c else x
            x = b.node("Relu", [b.node("Add", [short, y])])
            cin = c
    return b.model("resnet18", b.head(x, 512))


MODELS = {"mobilenet_v2": mobilenet_v2, "resnet18": resnet18}

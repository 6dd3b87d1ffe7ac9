"""The reference workloads that ``mnnpy.capabilities`` times on a device and on the CPU backend.

One workload per field of NNAPI's ``Capabilities`` (``hardware/interfaces/neuralnetworks/
1.3/types.hal``), each an ONNX model built here with ``onnx.helper`` (nothing downloaded)
and its seeded inputs, at two scales: ``"full"`` (the CLI's default, seconds per device)
and ``"tiny"`` (tests: milliseconds per run). NNAPI's own drivers measure MobileNet float
and quantized; here:

- ``float32`` (``TENSOR_FLOAT32``): MobileNetV2 (``mnnpy.reference_models.mobilenet_v2``:
  full: width 1.0 at 1x3x224x224; tiny: the same kind of net, stem + two inverted residual
  blocks at 1x3x32x32, 10 classes).
- ``relaxed`` (``relaxedFloat32toFloat16Performance``): the same model at ``precision="low"``.
- ``quant8`` (``TENSOR_QUANT8_ASYMM``): QuantizeLinear (uint8) -> QLinearConv 3x3 -> QLinearConv
  3x3 -> DequantizeLinear, per-tensor scales (full: 1x32x56x56; tiny: 1x8x16x16).
- ``int32`` (``TENSOR_INT32``): Add, Mul, Sub, Max of two int32 tensors (full: 1x64x56x56).
- ``bool`` (``TENSOR_BOOL8``): And, Or, Xor, Not of two bool tensors (full: 1x64x56x56).
- ``if`` (``ifPerformance``): an If whose branches are float elementwise chains, the
  condition true (full: 1x64x56x56).
- ``while`` (``whilePerformance``): a Loop of 8 iterations (tiny: 4) carrying a float
  tensor through ``x * 0.5 + 1`` (full: 1x64x56x56).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mnnpy.reference_models import MBV2_CONFIG, mobilenet_v2

SCALES = ("full", "tiny")
OPSET = 13
# (N, C, H, W) of the elementwise, quantized and control-flow workloads per scale
SHAPES = {"full": (1, 64, 56, 56), "tiny": (1, 8, 16, 16)}
TINY_MBV2 = MBV2_CONFIG[:1] + [(6, 24, 1, 2)]


@dataclass(frozen=True)
class Workload:
    """One reference workload: ``name`` (the capability it measures), ``precision`` (the
    session's), ``build(scale) -> (model, feeds)`` and ``what`` (one line for reports)."""

    name: str
    what: str
    build: Callable[[str], tuple[onnx.ModelProto, dict[str, np.ndarray]]]
    precision: str = "normal"


def _model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], inits=None) -> onnx.ModelProto:
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    init = [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(nodes, "workload", ins, outs, init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def _rng() -> np.random.Generator:
    return np.random.default_rng(15)


def mobilenet(scale: str):
    """MobileNetV2 (module docstring) and a seeded N(0, 1) input."""
    size = 224 if scale == "full" else 32
    model = mobilenet_v2() if scale == "full" else mobilenet_v2(size=size, config=TINY_MBV2, last=64, classes=10)
    return model, {"input": _rng().standard_normal((1, 3, size, size)).astype(np.float32)}


def quant8(scale: str):
    """QuantizeLinear -> QLinearConv x2 -> DequantizeLinear (uint8, per-tensor scales)."""
    n, c, h, w = SHAPES[scale]
    c = c // 2
    rng = _rng()
    inits = {"s": np.float32(0.05), "z": np.uint8(128), "ws": np.float32(0.01), "wz": np.uint8(128)}
    for i in (1, 2):
        inits[f"w{i}"] = rng.integers(118, 139, (c, c, 3, 3)).astype(np.uint8)
        inits[f"b{i}"] = rng.integers(-100, 100, c).astype(np.int32)
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q0"]),
        helper.make_node("QLinearConv", ["q0", "s", "z", "w1", "ws", "wz", "s", "z", "b1"], ["q1"], **conv),
        helper.make_node("QLinearConv", ["q1", "s", "z", "w2", "ws", "wz", "s", "z", "b2"], ["q2"], **conv),
        helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"]),
    ]
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    return _model(nodes, {"x": x}, ["y"], inits), {"x": x}


def _binary_chain(ops: list[str], dtype, make) -> Callable:
    def build(scale: str):
        rng = _rng()
        feeds = {"a": make(rng, SHAPES[scale]).astype(dtype), "b": make(rng, SHAPES[scale]).astype(dtype)}
        nodes, prev = [], "a"
        for i, op in enumerate(ops):
            ins = [prev] if op == "Not" else [prev, "b"]
            nodes.append(helper.make_node(op, ins, [f"t{i}"]))
            prev = f"t{i}"
        return _model(nodes, feeds, [prev]), feeds

    return build


int32 = _binary_chain(["Add", "Mul", "Sub", "Max"], np.int32, lambda r, s: r.integers(-100, 100, s))
bool8 = _binary_chain(["And", "Or", "Xor", "Not"], np.bool_, lambda r, s: r.integers(0, 2, s))


def if_workload(scale: str):
    """If(cond) then ``(x * 2 + 1) * 2`` else ``x - 1``; cond true."""
    half, one, two = (helper.make_tensor(n, TensorProto.FLOAT, [], [v]) for n, v in (("h", 0.5), ("o", 1.0), ("t", 2.0)))
    const = [helper.make_node("Constant", [], [t.name], value=t) for t in (one, two, half)]
    then = const + [
        helper.make_node("Mul", ["x", "t"], ["m"]),
        helper.make_node("Add", ["m", "o"], ["a"]),
        helper.make_node("Mul", ["a", "t"], ["y_then"]),
    ]
    other = const + [helper.make_node("Sub", ["x", "o"], ["y_else"])]
    feeds = {"cond": np.array(True), "x": _rng().standard_normal(SHAPES[scale]).astype(np.float32)}
    branches = {
        "then_branch": helper.make_graph(then, "then", [], [helper.make_empty_tensor_value_info("y_then")]),
        "else_branch": helper.make_graph(other, "else", [], [helper.make_empty_tensor_value_info("y_else")]),
    }
    node = helper.make_node("If", ["cond"], ["y"], **branches)
    return _model([node], feeds, ["y"]), feeds


def loop_workload(scale: str):
    """Loop of ``trips`` iterations carrying ``x`` through ``x * 0.5 + 1``."""
    trips = 8 if scale == "full" else 4
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Constant", [], ["h"], value=helper.make_tensor("hv", f, [], [0.5])),
            helper.make_node("Constant", [], ["o"], value=helper.make_tensor("ov", f, [], [1.0])),
            helper.make_node("Mul", ["x_in", "h"], ["m"]),
            helper.make_node("Add", ["m", "o"], ["x_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", f, None),
        ],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("x_out", f, None)],
    )
    feeds = {"x": _rng().standard_normal(SHAPES[scale]).astype(np.float32)}
    inits = {"trips": np.array(trips, np.int64), "cond": np.array(True)}
    node = helper.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body)
    return _model([node], feeds, ["y"], inits), feeds


WORKLOADS = (
    Workload("float32", "MobileNetV2, float32", mobilenet),
    Workload("relaxed", "MobileNetV2, precision low (float32 relaxed to float16)", mobilenet, "low"),
    Workload("quant8", "QuantizeLinear, QLinearConv x2, DequantizeLinear (uint8)", quant8),
    Workload("int32", "Add, Mul, Sub, Max on int32", int32),
    Workload("bool", "And, Or, Xor, Not on bool", bool8),
    Workload("if", "If with float elementwise branches", if_workload),
    Workload("while", "Loop carrying a float tensor", loop_workload),
)

"""ONNX reductions, ArgMax/ArgMin and TopK -> canonical forms.

Sources: ONNX Changelog.md. Reduce*: ``axes`` attribute -> optional int64 input from
opset 18 (ReduceSum: 13); ``noop_with_empty_axes`` exists from the same opset.
ArgMax/ArgMin: ``select_last_index`` from 12 (absent means 0). TopK: ``k`` attribute
(opset 1-9) -> one-element int64 input (10+); ``largest``/``sorted`` from 11.
"""

from __future__ import annotations

import numpy as np

from mnnpy.converter.registry import copy_node, onnx_op
from mnnpy.ops.reductions import REDUCTIONS

_AXES_INPUT_SINCE = {"ReduceSum": 13}


@onnx_op("ReduceMean", *REDUCTIONS)
def reduce(node, ctx):
    """Reduce*: ``axes`` attribute (before opset 18, ReduceSum 13) -> constant input."""
    a = ctx.attrs(node)
    inputs = list(node.input[:2])
    if ctx.opset < _AXES_INPUT_SINCE.get(node.op_type, 18):
        axes = a.pop("axes", None)
        inputs = inputs[:1] + ([ctx.const(np.array(axes, np.int64))] if axes is not None else [])
    attrs = {k: v for k, v in a.items() if k in ("keepdims", "noop_with_empty_axes")}
    ctx.emit(node.op_type, inputs, list(node.output), attrs, node.name)


onnx_op("ArgMax", "ArgMin")(copy_node)


@onnx_op("TopK")
def topk(node, ctx):
    """TopK: opset < 10 ``k`` attribute -> constant input ``[k]``."""
    a = ctx.attrs(node)
    inputs = list(node.input[:2])
    if ctx.opset < 10:
        inputs = [node.input[0], ctx.const(np.array([a.pop("k")], np.int64))]
    attrs = {k: v for k, v in a.items() if k in ("axis", "largest", "sorted")}
    ctx.emit("TopK", inputs, list(node.output), attrs, node.name)

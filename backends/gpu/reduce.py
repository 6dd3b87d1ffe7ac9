"""Reduction op family shared by the GPU backends: ReduceXxx (opset-18 form, ``axes`` an input)
and Softmax / LogSoftmax (opset-13 form, one ``axis``), ONNX operators.md.

Every op is viewed as ``(outer, red, inner)`` of contiguous NCHW data: one result per
``p < outer * inner`` from the ``red`` elements at stride ``inner`` (``reduce_axes.py``). The
backend's class implements ``reduce(kind, x, y, outer, red, inner)`` (``kind`` a value of
``REDUCE_OPS``; pooling uses it too) and ``softmax(x, y, outer, red, inner, log)``.
"""

from __future__ import annotations

import math

from mnnpy.backends.gpu.execution import GPUExecution, checked_by
from mnnpy.backends.gpu.reduce_axes import collapse_axes, reduce_check

# op type -> the reduction's kind (shader variant reduce_<kind>, OpenCL -D OP_<KIND>)
REDUCE_OPS = {
    "ReduceSum": "sum",
    "ReduceMean": "mean",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
    "ReduceL1": "l1",
    "ReduceL2": "l2",
    "ReduceSumSquare": "sumsquare",
    "ReduceLogSum": "logsum",
    "ReduceLogSumExp": "logsumexp",
}


class ReduceBase(GPUExecution):
    """``reduced = f(data, axes, keepdims)``, data float32 of any rank (keepdims only changes
    the output's shape). The reduced axes (the shape function's ``axes``) must form one
    contiguous block of ``data``'s shape (size-1 dims aside). Empty ``axes`` with
    ``noop_with_empty_axes``: rows of one element, i.e. the elementwise part only
    (ReduceL1 -> |x|, ReduceLogSum -> log x), as on the CPU."""

    check = checked_by(reduce_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        outer, red, inner = collapse_axes(x.shape, self.geometry["axes"])
        self.reduce(REDUCE_OPS[self.op.type], x, y, outer, red, inner)


class SoftmaxBase(GPUExecution):
    """Softmax / LogSoftmax along ``axis`` (opset-13 semantics), float32 of any shape:
    ``exp(x - max) / sum(exp(x - max))`` / ``(x - max) - log(sum(exp(x - max)))``, max and sum
    by work-group reductions over one row per group slice."""

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        shape = x.shape
        axis = self.attrs["axis"] % len(shape)
        outer, red, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
        if red == 0:
            return
        self.softmax(x, y, outer, red, inner, self.op.type == "LogSoftmax")

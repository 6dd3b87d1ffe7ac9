"""CPU ReduceMean (ONNX operators.md #ReduceMean, opset-18 form: ``axes`` as an input)."""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution
from mnnpy.backends.cpu.scratch import scratch


@cpu_execution("ReduceMean")
class ReduceMean(Execution):
    """``Y = mean(X, axes, keepdims)``: all axes when ``axes`` is absent or empty, none
    (a copy) with ``noop_with_empty_axes``. Float: ``np.mean(out=)`` in the input dtype;
    integers: the sum in float64 scratch, then truncated toward zero (onnxruntime).
    """

    def on_resize(self, inputs, outputs):
        x = self.input_infos[0]
        self.axes = self.geometry["axes"]
        self.keep = bool(self.attrs["keepdims"])
        self.count = int(np.prod([x.shape[a] for a in self.axes], dtype=np.int64))
        self.scratch = None
        if x.dtype.kind != "f" and self.axes:
            self.scratch = scratch(outputs[0].shape, np.float64)

    def on_execute(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        if not self.axes:
            np.copyto(y, x)
        elif self.count == 0:
            y.fill(0)  # the mean of an empty set: 0, as onnxruntime gives
        elif self.scratch is None and x.dtype != np.float16:
            np.add.reduce(x, axis=self.axes, keepdims=self.keep, out=y)  # np.mean's own two steps, without its
            np.true_divide(y, self.count, out=y)  # Python wrapper (7 µs on silero's small mean, now 2)
        elif self.scratch is None:
            np.mean(x, axis=self.axes, keepdims=self.keep, out=y)  # float16: accumulated in float32
        else:
            s = self.scratch
            np.sum(x, axis=self.axes, keepdims=self.keep, dtype=np.float64, out=s)
            np.divide(s, self.count, out=s)
            np.trunc(s, out=s)
            np.copyto(y, s, casting="unsafe")

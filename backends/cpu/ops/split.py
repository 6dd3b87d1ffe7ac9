"""CPU Split (ONNX operators.md #Split): each output is a copy of a precomputed input slice."""

from __future__ import annotations

import numpy as np

from mnnpy.backend import Execution
from mnnpy.backends.cpu.registry import cpu_execution


@cpu_execution("Split")
class Split(Execution):
    """``outputs[k] = input[..., o_k : o_k + s_k, ...]`` along ``axis`` (absent outputs skipped)."""

    def on_resize(self, inputs, outputs):
        x = inputs[0]
        axis = self.attrs["axis"] % x.ndim
        self.pairs, start = [], 0
        for y, n in zip(outputs, self.geometry["split"]):
            if y is not None and y.size:
                self.pairs.append((y, x[(slice(None),) * axis + (slice(start, start + n),)]))
            start += n

    def on_execute(self, inputs, outputs):
        for dst, src in self.pairs:
            np.copyto(dst, src)

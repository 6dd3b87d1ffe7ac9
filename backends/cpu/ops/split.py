"""CPU Split (ONNX operators.md #Split): each output is a copy of a precomputed input slice."""

from __future__ import annotations

from mnnpy.backends.cpu.ops.shape_ops import SlabCopies
from mnnpy.backends.cpu.registry import cpu_execution


@cpu_execution("Split")
class Split(SlabCopies):
    """``outputs[k] = input[..., o_k : o_k + s_k, ...]`` along ``axis`` (absent outputs skipped)."""

    def on_resize(self, inputs, outputs):
        self.slabs(inputs[0], outputs, self.geometry["split"], to_whole=False)

"""ONNX converters of the signal ops (all since opset 17).

DFT: opset 17 has ``axis`` as an attribute (default 1); opset 20 made it an optional
input (default -2). The canonical form is opset 20's: an opset-17 node gets a constant
``axis`` input. Hann/Hamming/BlackmanWindow, STFT and MelWeightMatrix never changed.
"""

from __future__ import annotations

import numpy as np

from mnnpy.converter.registry import copy_node, onnx_op

onnx_op("HannWindow", "HammingWindow", "BlackmanWindow", "STFT", "MelWeightMatrix")(copy_node)


@onnx_op("DFT")
def dft(node, ctx):
    """DFT: the ``axis`` attribute (opset 17, default 1) -> a constant ``axis`` input."""
    a = ctx.attrs(node)
    inputs = list(node.input)
    if ctx.opset < 20:
        axis = a.pop("axis", 1)
        inputs = (inputs + [""])[:2] + [ctx.const(np.array(axis, np.int64))]
    attrs = {k: a[k] for k in ("inverse", "onesided") if k in a}
    ctx.emit("DFT", inputs, list(node.output), attrs, node.name)

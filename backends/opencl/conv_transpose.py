"""OpenCL ConvTranspose 2-D (ONNX operators.md #ConvTranspose), NCHW float32, gather form.

``X: (N, C, IH, IW)``, ``W: (C, M/G, KH, KW)`` (constant), ``B: (M,)`` (constant, optional)
-> ``Y: (N, M, OH, OW)``; group, strides, pads (after ``auto_pad`` / ``output_shape``),
dilations, output_padding. Each work item computes ``OCB`` output channels of one output
pixel pair (``ow``, ``ow + SW``: the same taps) by summing the input taps that reach them (``shaders/opencl/conv_transpose.cl``);
weights are re-laid at resize to ``[G][C/G][KH][KW][M/G padded]`` in fp32.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.gpu.checks import activation_check, conv_transpose_check
from mnnpy.backends.gpu.execution import checked_by
from mnnpy.backends.opencl.activation import activation
from mnnpy.backends.opencl.execution import OpenCLExecution
from mnnpy.backends.opencl.registry import opencl_execution

SOURCE = "conv_transpose.cl"


def _block(mg: int) -> int:
    """Output channels per work item: the smallest power of two >= ``mg``, at most 8."""
    b = 1
    while b < min(mg, 8):
        b *= 2
    return b


@opencl_execution("ConvTranspose")
class ConvTranspose(OpenCLExecution):
    """2-D ConvTranspose with constant W (and B); a fused ``activation`` attribute is applied when present."""

    check = checked_by(conv_transpose_check, activation_check)

    def prepare(self, inputs, outputs):
        x, y = inputs[0], outputs[0]
        w = np.asarray(self.input_infos[1].value, np.float32)
        b_info = self.input_infos[2] if len(self.input_infos) > 2 else None
        n, c, ih, iw = x.shape
        m, oh, ow = y.shape[1], y.shape[2], y.shape[3]
        g = self.attrs["group"]
        cg, mg, kh, kw = c // g, w.shape[1], w.shape[2], w.shape[3]
        a = self.attrs
        _, strides, dil, pads = self.geometry["window"].unpack()
        ocb = _block(mg)
        mgp = -(-mg // ocb) * ocb
        wt = np.zeros((g, cg, kh, kw, mgp), np.float32)
        wt[..., :mg] = w.reshape(g, cg, mg, kh, kw).transpose(0, 1, 3, 4, 2)
        bias = np.zeros((g, mgp), np.float32)
        if b_info is not None:
            bias[:, :mg] = np.asarray(b_info.value, np.float32).reshape(g, mg)
        self.w = self.backend.weights(wt)  # fp32 in both storage modes
        self.b = self.backend.weights(bias)
        option, a0, a1 = activation(a.get("activation", ""), a.get("activation_params", ()))
        zmax = n * g * (mgp // ocb)
        cols = -(-ow // strides[1])  # output columns of one phase (at most)
        qmax = strides[1] * ((cols + 1) // 2)  # phases x pairs of columns
        ints = (c, ih, iw, m, oh, ow, g, cg, mg, mgp, kh, kw, *strides, pads[0], pads[1], *dil, zmax, qmax)
        args = (x.buffer, np.int32(x.elem_offset), self.w.buffer, self.b.buffer, y.buffer, np.int32(y.elem_offset))
        args += tuple(np.int32(v) for v in ints) + (a0, a1)
        self.enqueue(SOURCE, "deconv", [f"-D OCB={ocb}", option], args, (qmax, oh, zmax))

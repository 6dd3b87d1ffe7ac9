"""Direct Conv for few input channels (a network's first layer) for the CPU Conv execution
(``conv.py``): ``kernels/direct.py``, output channels in the vector lanes, no column buffer.

Taken for float32 2-D Conv with ``group`` 1, at most ``MAX_C`` input channels and at least
``MIN_M`` output channels (the kernel sums two blocks of 16 channels at a time: fewer would
leave lanes empty), where numba compiles. Measured against the im2col path (column fill plus
the packed product), one thread, µs: ResNet-18's stem 3->64 7x7/2 at 224x224 1908 -> 1400,
MobileNetV2's 3->32 3x3/2 248 -> 228; PP-OCRv4 det's 3->16 3x3/2 at 640x640 1874 against
2021 (half the lanes empty): left on im2col.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.kernels import direct
from mnnpy.backends.cpu.kernels.epilogue import codes
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.parallel import parallel, split
from mnnpy.backends.cpu.scratch import scratch

MAX_C = 4  # input channels up to which the direct kernel is taken
MIN_M = 32  # output channels from which it is taken


class _Direct:
    """``X: (N, C, H, W) -> Y: (N, M, Ho, Wo)`` by the direct kernel with bias and the fused
    activation (the epilogue's; others applied by ``Conv`` afterwards); output rows split over
    the backend's threads."""

    fused_bias = True

    @staticmethod
    def usable(x, w, y, group) -> bool:
        """Whether the direct kernel takes this Conv (module doc)."""
        if x.ndim != 4 or group != 1 or x.shape[1] > MAX_C or w.shape[0] < MIN_M:
            return False
        if any(a.dtype != np.float32 for a in (x, w, y)) or not (x.flags.c_contiguous and y.flags.c_contiguous):
            return False
        return direct.kernel() is not None

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        m, kh, kw = w.shape[0], w.shape[2], w.shape[3]
        self.wq = scratch((2 * -(-m // 32), x.shape[1] * kh * kw, 16), np.float32, fill=None)  # written whole by prepare
        self.b = scratch((m,), np.float32)
        fused = codes(exe.attrs["activation"], exe.attrs["activation_params"])
        self.fused_activation = fused is not None  # else Conv applies the activation afterwards
        code, a0, a1 = fused or (0, np.float32(0), np.float32(0))
        rows = x.shape[0] * out[0]
        geo = (kh, kw)
        tail = (*strides, *dil, pads[0], pads[1], code, a0, a1)
        self.tasks = [
            bind(direct.kernel(), x, self.wq, self.b, y, *geo, lo, hi, *tail) for lo, hi in split(rows, exe.backend.num_threads)
        ]

    def prepare(self, w, b):
        direct.pack(np.asarray(w), self.wq)
        if b is not None:
            np.copyto(self.b, b)
        else:
            self.b.fill(0)

    def run(self, exe):
        parallel(exe.backend, self.tasks)

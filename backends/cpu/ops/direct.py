"""Direct Conv for the CPU Conv execution (``conv.py``): ``kernels/direct.py``, output channels
in the vector lanes, no column buffer.

Taken for float32 2-D Conv with ``group`` 1 that the im2col path would otherwise take (not
pointwise, Winograd or kn2row), with at least ``MIN_M`` output channels (the kernel sums two
blocks of 16 channels at a time: fewer would leave lanes empty) and at most ``ROWS_BYTES`` of
input rows per output row and of one output row (the kernel's own buffers, in cache), where
numba compiles. Measured
against the im2col path (column fill plus the packed product), one thread, µs: ResNet-18's
stem 3->64 7x7/2 at 224x224 1908 -> 1400, MobileNetV2's 3->32 3x3/2 248 -> 228; PP-OCRv4
det's 3->16 3x3/2 at 640x640 1874 against 2021 (half the lanes empty): left on im2col. Whole
models, one process, alternated, 2 threads: first layers only, ResNet-18 14.73 / 14.85 ->
13.95 / 14.33 ms, MobileNetV2 3.62 / 3.57 -> 3.42 / 3.37; every im2col Conv of 32 or more
output channels, ResNet-18 10.37 / 10.41 -> 10.16 / 10.00 (its strided 3x3 and 1x1 convs), det
27.3 / 26.7 -> 27.1 / 25.2, rec and cls unchanged.
"""

from __future__ import annotations

import numpy as np

from mnnpy.backends.cpu.blas import MIN_FLOPS
from mnnpy.backends.cpu.kernels import direct
from mnnpy.backends.cpu.kernels.epilogue import codes
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.parallel import parallel, split
from mnnpy.backends.cpu.prepared import bias_into
from mnnpy.backends.cpu.scratch import scratch

MIN_M = 32  # output channels from which the direct kernel is taken
ROWS_BYTES = 1 << 20  # ... and bytes of the input rows one output row reads (and of the row of
# outputs), up to which it is


def cuts_of(rows: int, pairs: int, threads: int, flops: float = float("inf")) -> list[tuple[int, int, int, int]]:
    """``(lo, hi, q0, q1)`` tasks of the kernel: output rows ``[lo, hi)`` and 16-channel blocks
    ``[q0, q1)`` (in pairs), at most ``threads`` of them, cut along whichever of rows and block
    pairs splits more evenly (rows on a tie): ResNet-18's 7 rows of 7x7 maps over 2 threads
    leave one thread 4 rows, its 16 pairs of blocks 8 each (the input rows are then copied by
    each task: 3 of a 3x3 kernel's rows per output row, little against the sums). Block pairs
    only for a Conv of at least ``blas.MIN_FLOPS`` (``flops``): silero VAD's one-row convs
    (0.1-0.5 MFLOP) stay one task, as the rows cut them (its run 0.17 -> 0.31-0.42 ms when
    they were cut in two)."""

    def worst(n):  # the largest share over its even share
        return -(-n // threads) * threads / n

    if threads > 1 and pairs > 1 and flops >= MIN_FLOPS and worst(pairs) < worst(rows):
        return [(0, rows, 2 * p0, 2 * p1) for p0, p1 in split(pairs, threads)]
    return [(lo, hi, 0, 2 * pairs) for lo, hi in split(rows, threads)]


class _Direct:
    """``X: (N, C, H, W) -> Y: (N, M, Ho, Wo)`` by the direct kernel with bias and the fused
    activation (the epilogue's; others applied by ``Conv`` afterwards); output rows or channel
    blocks split over the backend's threads (``cuts_of``)."""

    fused_bias = True

    @staticmethod
    def usable(x, w, y, group, out, strides, dil, pads) -> bool:
        """Whether the direct kernel takes this Conv (module doc); ``out``, ``strides``, ``dil``,
        ``pads`` the window's (2-D)."""
        if x.ndim != 4 or group != 1 or w.shape[0] < MIN_M:
            return False
        rows = direct.row_bytes(x.shape[1], w.shape[2], w.shape[3], x.shape[3], out[1], strides[1], dil[1], pads[1])
        if max(rows, direct.out_bytes(w.shape[0], out[1])) > ROWS_BYTES:  # the kernel's own buffers, not the plan's
            return False
        if any(a.dtype != np.float32 for a in (x, w, y)) or not (x.flags.c_contiguous and y.flags.c_contiguous):
            return False
        return direct.kernel(direct.positions(out[1])) is not None

    def __init__(self, exe, x, w, y, bias, out, strides, dil, pads):
        m, kh, kw = w.shape[0], w.shape[2], w.shape[3]
        self.wq = scratch((2 * -(-m // 32), x.shape[1] * kh * kw, 16), np.float32, fill=None)  # written whole by prepare
        self.b = scratch((m,), np.float32)
        fused = codes(exe.attrs["activation"], exe.attrs["activation_params"])
        self.fused_activation = fused is not None  # else Conv applies the activation afterwards
        code, a0, a1 = fused or (0, np.float32(0), np.float32(0))
        tail = (*strides, *dil, pads[0], pads[1], code, a0, a1)
        flops = 2.0 * x.shape[0] * out[0] * out[1] * m * x.shape[1] * kh * kw
        cuts = cuts_of(x.shape[0] * out[0], self.wq.shape[0] // 2, exe.backend.num_threads, flops)
        k = direct.kernel(direct.positions(out[1]))
        self.tasks = [bind(k, x, self.wq, self.b, y, kh, kw, *cut, *tail) for cut in cuts]

    def prepare(self, w, b):
        direct.pack(np.asarray(w), self.wq)
        bias_into(self.b, b)

    def native_phases(self):
        """``[tasks]``: the run is the compiled kernel's calls (``program.py``)."""
        return [self.tasks]

    def run(self, exe):
        parallel(exe.backend, self.tasks)

"""Pointwise Conv (1x1 kernel, stride 1, no pads) for the CPU Conv execution (``conv.py``).

``X: (N, C, *S)``, ``W: (M, C/G, 1...)``, ``B: (M,)`` -> ``Y: (N, M, *S)``, with ``L = prod(S)``::

    Y (N, G, M/G, L) = act(W (G, M/G, C/G) @ X (N, G, C/G, L) + B)

The product is cut into at most one block per pool thread (``blocks``: column blocks of
positions when each gets ``MIN_SPLIT_COLS``, else row blocks of output channels; one block
below ``MIN_FLOPS``), and each thread runs ``np.matmul`` into its block of ``Y``, then the
compiled epilogue (``kernels/epilogue.py``: bias and activation) over that block while it is
still in cache, instead of a second pass over all of ``Y`` afterwards. ``np.matmul`` keeps a
column block of ``Y`` (unit inner stride, row stride ``L``) on BLAS (measured: 0.26 ms for
24 blocks of 512 columns of a (96, 16) @ (16, 12544) product against 0.31 ms in one call).

A single image without groups (``N == G == 1``, every pointwise layer of the benchmark
models) takes the packed-weight kernel instead (``kernels/packed_gemm.py``, ``PACKED``): the
weights packed into panels at prepare, the product, bias and activation in one compiled call
per block (whole panels or column blocks): MobileNetV2 4.40 -> 4.28 ms, PP-OCRv4 rec 9.72 ->
9.41 (2 threads, one process, 200 runs alternated in blocks of 5, medians).

Measured on the 2-core machine (interleaved, medians, 1 thread; every layer of MobileNetV2,
PP-OCRv4 rec and cls): the 36 layer shapes took 7.1 ms against 11.9 ms for the product
followed by ``bias_activation``; cutting the blocks further into L2-sized column tiles (64 to
512 columns) was slower than one block per thread (9.9 to 13.3 ms for 2 threads), BLAS
packing costs more per call than the epilogue saves from cache. Activations the epilogue
does not compute (Sigmoid, Tanh), other dtypes, and machines where numba cannot compile
keep the former path: one ``MatMul``, then ``Conv`` applies bias and activation with NumPy.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from mnnpy.backends.cpu.blas import MatMul, blocks, native_product
from mnnpy.backends.cpu.kernels import epilogue, packed_gemm
from mnnpy.backends.cpu.kernels.native import bind
from mnnpy.backends.cpu.ops.windows import view_as
from mnnpy.backends.cpu.parallel import parallel
from mnnpy.backends.cpu.prepared import bias_into
from mnnpy.backends.cpu.scratch import scratch

PACKED = True  # the 2-D product on packed weights (kernels/packed_gemm.py) where it compiles


class _Pointwise:
    """1x1, stride 1, no pads: ``Y (N, G, M/G, L) = W (G, M/G, C/G) @ X (N, G, C/G, L)``, bias
    and activation by the compiled epilogue per block where ``fused(...)`` (module doc)."""

    @staticmethod
    def fused(exe, x, w, y) -> bool:
        """Whether the product takes the fused epilogue: float32, ``Y`` C-contiguous, an
        activation the epilogue computes, and numba compiles here."""
        if any(a.dtype != np.float32 for a in (x, w, y)) or not y.flags.c_contiguous:
            return False
        if epilogue.codes(exe.attrs["activation"], exe.attrs["activation_params"]) is None:
            return False
        return epilogue.kernel() is not None

    def __init__(self, exe, x, w, y, g):
        n, c, m = x.shape[0], x.shape[1], w.shape[0]
        hw = math.prod(x.shape[2:])
        two_d = n == 1 and g == 1
        if two_d:
            self.w, self.x, self.y = view_as(w, (m, c)), view_as(x, (c, hw)), view_as(y, (m, hw))
        else:
            self.w = view_as(w, (g, m // g, c // g))
            self.x, self.y = view_as(x, (n, g, c // g, hw)), view_as(y, (n, g, m // g, hw))
        self.fused_bias = self.fused_activation = self.fused(exe, x, w, y)
        self.wp = None
        self.beside = exe.backend.helper.submit if exe.const else None  # prepare runs once, in on_resize
        if not self.fused_bias:
            self.mm = MatMul(exe.backend, self.w, self.x, self.y)
            return
        code, a0, a1 = epilogue.codes(exe.attrs["activation"], exe.attrs["activation_params"])
        self.b = scratch((m,), np.float32)
        if two_d and PACKED and hw >= packed_gemm.MIN_COLS and (pk := packed_gemm.kernel()) is not None:
            self._packed(exe, pk, x, y, m, c, hw, (code, a0, a1))
            return
        rows = view_as(y, (n * m, hw))
        kernel = epilogue.kernel()
        self.tasks = []
        for r0, r1, c0, c1 in blocks(m, hw, 2.0 * y.size * (c // g), c // g, exe.backend.num_threads, two_d):
            one_call = native_product(self.w, self.x, self.y, r0, r1, c0, c0, c1 - c0, self.b, (code, a0, a1)) if two_d else None
            if one_call is not None:  # product and epilogue in one compiled call: a native task (worker_pool.py)
                self.tasks.append(one_call)
                continue
            if two_d:
                product = functools.partial(np.matmul, self.w[r0:r1], self.x[:, c0:c1], out=self.y[r0:r1, c0:c1])
            else:
                product = functools.partial(np.matmul, self.w, self.x[..., c0:c1], out=self.y[..., c0:c1])
            # rows of the (N*M, L) view: a row block only exists for 2-D products (N*M == M)
            tail = bind(kernel, rows, self.b, r0, r1 if two_d else n * m, c0, c1, code, a0, a1)
            self.tasks.append(functools.partial(self._block, product, tail))

    def _packed(self, exe, kernel, x, y, m, c, hw, act):
        """Tasks of the packed-weight kernel: column blocks when each thread gets
        ``MIN_SPLIT_COLS`` positions, else blocks of whole weight panels."""
        mr = packed_gemm.MR
        panels = -(-m // mr)
        self.wp = scratch((1, panels, c, mr), np.float32, fill=None)  # written whole by prepare
        x3, y3 = view_as(x, (1, c, hw)), view_as(y, (1, m, hw))
        cuts = blocks(m, hw, 2.0 * m * hw * c, c, exe.backend.num_threads, True)
        if len(cuts) > 1 and cuts[0][1] - cuts[0][0] < m:  # row blocks: whole panels each
            cuts = [(r0, r1, 0, hw) for r0, r1 in packed_gemm.panel_rows(m, len(cuts))]
        code, a0, a1 = act
        self.tasks = [bind(kernel, self.wp, x3, y3, self.b, r0, r1, c0, c0, c1 - c0, code, a0, a1) for r0, r1, c0, c1 in cuts]

    @staticmethod
    def _block(product, tail):
        product()
        tail()

    def prepare(self, w, b):
        # self.w is a view of the weight tensor (constant or the same arena view every run);
        # constant weights are packed once, beside the rest of the resize (ResizeHelper)
        if self.wp is not None:
            packed_gemm.pack_later(np.asarray(w).reshape(1, *self.w.shape), self.wp, self.beside)
        if self.fused_bias:
            bias_into(self.b, b)

    def native_phases(self):
        """``[tasks]`` where the run is the packed kernel's calls (``program.py``), else ``None``."""
        return [self.tasks] if self.fused_bias else None

    def run(self, exe):
        if self.fused_bias:
            parallel(exe.backend, self.tasks)
        else:
            self.mm()

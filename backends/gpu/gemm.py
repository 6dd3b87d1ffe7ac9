"""MatMul / Gemm op family shared by the GPU backends (ONNX operators.md #MatMul, #Gemm).

Both ops become one ``GemmProblem`` (``gemm_geometry.py``) run by the backend's GEMM
(``gemm(a, b, y, problem, c=None, table=None)``, a method of the backend's Execution class:
OpenCL ``gemm.cl``, Vulkan ``gemm.comp``). Constant operands are read as the backend's
kernels want them (``GPUBackend.fp32_operand``).
"""

from __future__ import annotations

from mnnpy.backends.gpu.execution import GPUExecution
from mnnpy.backends.gpu.gemm_geometry import gemm_problem, matmul_problem


class MatMulBase(GPUExecution):
    """``Y = A @ B`` (numpy.matmul: 1-D operands promoted then dropped, batch dims broadcast),
    float32. A: (..., M, K), B: (..., K, N) -> Y: (..., M, N). When B has no batch, A's batch
    folds into M: one (batch*M, K) x (K, N) GEMM; otherwise A and B are read at a stride per
    batch (0 where broadcast), or through a device table of offsets (``table_dtype``, set by
    the backend's class) for general broadcasts."""

    def prepare(self, inputs, outputs):
        a, b = self.operands = [self.backend.fp32_operand(h, i) for h, i in zip(inputs[:2], self.input_infos[:2])]
        problem, offsets = matmul_problem(a.shape, b.shape)
        table = None if offsets is None else self.backend.constant(offsets.astype(self.table_dtype))
        self.gemm(a, b, outputs[0], problem, table=table)


class GemmBase(GPUExecution):
    """``Y = alpha * A' @ B' + beta * C`` (A' = A.T if transA, B' = B.T if transB), float32.
    A: (M, K) or (K, M); B: (K, N) or (N, K); C (optional) unidirectionally broadcast to
    (M, N): (), (1,), (N,), (1, N), (M, 1), (M, N). Transposes are read in place, C through
    row/column strides (0 where broadcast); beta == 0 drops C."""

    def prepare(self, inputs, outputs):
        ops = [self.backend.fp32_operand(h, i) for h, i in zip(inputs, self.input_infos) if h is not None]
        a, b, y = ops[0], ops[1], outputs[0]
        c = ops[2] if len(ops) > 2 and float(self.attrs["beta"]) != 0.0 else None
        self.operands = [a, b, c]  # kept alive: the kernels read these buffers
        problem = gemm_problem(self.attrs, a.shape, b.shape, y.shape, None if c is None else c.shape)
        self.gemm(a, b, y, problem, c=c)

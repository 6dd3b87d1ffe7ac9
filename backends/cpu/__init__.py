"""The NumPy CPU backend: every op, the fallback of every session and the in-process oracle.

Memory: one ``numpy.uint8`` arena per session (and resize), laid out by the memory
planner; each dynamic tensor is a C-contiguous view at its planned offset, so that
``run`` allocates nothing for intermediate tensors. Constants are used in place
(zero-copy views of the model file). Matrix products use up to ``num_threads`` BLAS
threads, chosen per product (``blas.py``); other work runs on the calling thread
unless it is very large (measured: splitting it over Python threads beside spinning
BLAS workers cost more than it gained).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mnnpy.backend import Backend, BackendConfig, Execution, Runtime, TensorInfo
from mnnpy.backends.cpu.blas import BlasThreads
from mnnpy.backends.cpu.registry import executions
from mnnpy.backends.cpu.scratch import SharedBuffer, Workspace, scratch
from mnnpy.ir import Op
from mnnpy.memory_planner import ALIGN


class CPUBackend(Backend):
    """Per-session CPU backend; handles are ndarrays (arena views or constants)."""

    name = "cpu"

    def __init__(self, runtime: CPURuntime, config: BackendConfig):
        super().__init__(runtime, config)
        self.arena = np.empty(0, np.uint8)
        self.num_threads = config.num_threads or runtime.default_threads
        self.pool = runtime.pool(self.num_threads)
        self._blas_before = None
        self._temporaries = SharedBuffer()

    def workspace(self) -> Workspace:
        """An allocator for one Execution's temporaries, in memory shared with the others."""
        return Workspace(self._temporaries)

    def supports(self, op: Op, inputs: Sequence[TensorInfo], attrs: dict) -> tuple[bool, str]:
        if op.type in executions():
            return True, ""
        return False, f"no CPU execution for {op.type}"

    def create_execution(self, op, attrs, inputs, outputs) -> Execution | None:
        cls = executions().get(op.type)
        return None if cls is None else cls(self, op, attrs, inputs, outputs)

    def allocate_arena(self, nbytes: int) -> None:
        raw = scratch(nbytes + ALIGN, np.uint8)  # pages mapped now, not during the first run
        skip = (-raw.ctypes.data) % ALIGN
        self.arena = raw[skip : skip + nbytes]

    def acquire(self, tensor: TensorInfo, offset: int) -> np.ndarray:
        view = self.arena[offset : offset + tensor.nbytes]
        return view.view(tensor.dtype).reshape(tensor.shape)

    def acquire_constant(self, tensor: TensorInfo) -> np.ndarray:
        return tensor.value

    def upload(self, src: np.ndarray, dst: np.ndarray) -> None:
        np.copyto(dst, src)

    def download(self, src: np.ndarray) -> np.ndarray:
        return np.array(src)

    def on_execute_begin(self) -> None:
        # products are split over this backend's pool on a single-threaded BLAS (blas.py)
        self._blas_before = self.runtime.blas.use(1)

    def on_execute_end(self) -> None:
        if self._blas_before not in (None, 1):
            self.runtime.blas.use(self._blas_before)  # leave the caller's BLAS as it was

    def evaluate(self, op: Op, attrs: dict, values: list, specs: list) -> list[np.ndarray]:
        """Run one op on fresh arrays (resize-time evaluation of small tensors, constant folding)."""
        ins = [TensorInfo(-1, "", v.shape, v.dtype, v) if v is not None else None for v in values]
        outs = [TensorInfo(-1, "", s[0], s[1]) if s is not None else None for s in specs]
        out_arrays = [np.empty(s[0], s[1]) if s is not None else None for s in specs]
        exe = self.create_execution(op, attrs, ins, outs)
        exe.on_resize(list(values), out_arrays)
        exe.on_execute(list(values), out_arrays)
        return out_arrays


def _quiet_numpy() -> None:
    """Worker threads: no floating-point warnings (NaN/inf inputs propagate as in onnxruntime)."""
    np.seterr(all="ignore")


class CPURuntime(Runtime):
    """Process-wide CPU runtime: thread pools shared by sessions."""

    name = "cpu"

    def __init__(self):
        import os

        self.default_threads = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        self._pools: dict[int, ThreadPoolExecutor] = {}
        self.blas = BlasThreads()

    def pool(self, n: int) -> ThreadPoolExecutor:
        """A shared pool of ``n`` worker threads (numpy releases the GIL in large ops)."""
        if n not in self._pools:
            pool = self._pools[n] = ThreadPoolExecutor(n, thread_name_prefix="mnnpy-cpu", initializer=_quiet_numpy)
            # start the workers now (the executor starts them lazily, on a first run)
            barrier = threading.Barrier(n)
            for f in [pool.submit(barrier.wait) for _ in range(n)]:
                f.result()
        return self._pools[n]

    @classmethod
    def list_devices(cls) -> list[str]:
        """One line: the CPU, its cores and the BLAS NumPy uses."""
        import os
        import platform

        from threadpoolctl import threadpool_info

        blas = next((f"{i['internal_api']} {i['version']}" for i in threadpool_info() if i["user_api"] == "blas"), "?")
        return [f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores; NumPy {np.__version__}; BLAS {blas})"]

    def create_backend(self, config: BackendConfig) -> CPUBackend:
        return CPUBackend(self, config)

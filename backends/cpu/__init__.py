"""The NumPy CPU backend: every op, the fallback of every session and the in-process oracle.

Memory: one ``numpy.uint8`` arena per session (and resize), laid out by the memory
planner; each dynamic tensor is a C-contiguous view at its planned offset, so that
``run`` allocates nothing for intermediate tensors. Constants are used in place
(zero-copy views of the model file). Threads: every BLAS is single-threaded during a run
(``blas.py``); products and the compiled kernels are cut into blocks over the backend's
``num_threads`` threads (``worker_pool.py``: the caller and workers that poll for tasks
while a partition runs and sleep after it).
"""

from __future__ import annotations

import threading

import numpy as np

from mnnpy import limits
from mnnpy.backend import Backend, BackendConfig, Execution, OpInfo, Runtime, TensorInfo
from mnnpy.backends.cpu.blas import BlasThreads
from mnnpy.backends.cpu.fusion import fuse
from mnnpy.backends.cpu.program import replaced, segments
from mnnpy.backends.cpu.registry import execution
from mnnpy.backends.cpu.scratch import REGION, ResizeHelper, ScratchRegion, SharedBuffer, Workspace, mapped
from mnnpy.backends.cpu.worker_pool import WorkerPool
from mnnpy.errors import UnsupportedOperatorError
from mnnpy.heap import give_back_freed

PROGRAMS = True  # consecutive native ops run as one worker_pool.Program (program.py)


class CPUBackend(Backend):
    """Per-session CPU backend; handles are ndarrays (arena views or constants)."""

    name = "cpu"
    exit_gated = False  # no driver call that aborts when the interpreter exits mid-run (mnnpy.exit_gate)

    def __init__(self, runtime: CPURuntime, config: BackendConfig):
        super().__init__(runtime, config)
        self.arena = np.empty(0, np.uint8)
        self.num_threads = config.num_threads or runtime.default_threads
        self.pool = runtime.pool(self.num_threads)
        self.helper = ResizeHelper()  # maps pages and packs weights beside the resize
        self._temporaries = SharedBuffer(self.helper)

    def workspace(self) -> Workspace:
        """An allocator for one Execution's temporaries, in memory shared with the others."""
        return Workspace(self._temporaries)

    def supports(self, info: OpInfo) -> tuple[bool, str]:
        if execution(info.type) is not None:
            return True, ""
        return False, f"no CPU execution for {info.type}"

    def create_execution(self, info: OpInfo) -> Execution | None:
        cls = execution(info.type)
        return None if cls is None else cls(self, info)

    def on_resize_partition(self, partition) -> None:
        """Adjacent Executions whose tensor between them nothing else reads are fused
        (``fusion.py``); the pool's workers get their compiled spin-wait (``kernels/spin.py``);
        ``partition.recording`` keeps its ``PartitionState``."""
        fuse(partition)
        state = partition.recording = PartitionState(any(getattr(exe, "uses_blas", True) for exe in partition.executions))
        if self.num_threads > 1 and self.pool._spin is None:
            from mnnpy.backends.cpu.kernels.spin import kernel, serve_kernel, table_kernel

            self.pool.use_spin(kernel(), serve_kernel(), table_kernel())
        if self.num_threads > 1 and PROGRAMS:
            segs = segments(partition.runs, self.pool)
            if any(program is not None for program, _, _ in segs):
                state.segments = segs

    def allocate_arena(self, nbytes: int) -> None:
        self.arena = mapped(nbytes, self.helper)  # pages mapped by the resize's end (charged by the planner)

    def on_resize_begin(self) -> None:
        """The plan being made carves its scratch buffers from a ``ScratchRegion`` of its own."""
        plan = limits.current()
        if plan is not None:
            plan.regions.setdefault(REGION, ScratchRegion(self.helper))

    def on_resize_end(self) -> None:
        """The arena's, temporaries' and scratch buffers' pages are mapped (``ResizeHelper``) before the resize returns."""
        self.helper.wait()

    def on_close(self) -> None:
        """The session is closed: its memory (arenas, scratch regions, temporaries) goes to the
        process's pool of mapped pages as its plans are collected (``page_pool``)."""
        self.helper.close()
        self._temporaries.release()

    def on_plans_evicted(self) -> None:
        """The temporaries' buffer is kept only while kept plans use it; freed heap pages go
        back to the system (``give_back_freed``): memory follows the plans kept."""
        self._temporaries.release()
        give_back_freed()

    def acquire(self, tensor: TensorInfo, offset: int) -> np.ndarray:
        view = self.arena[offset : offset + tensor.nbytes]
        return view.view(tensor.dtype).reshape(tensor.shape)

    def acquire_constant(self, tensor: TensorInfo) -> np.ndarray:
        return tensor.value

    def upload(self, src: np.ndarray, dst: np.ndarray) -> None:
        dst[...] = src  # the session checked the dtype; 0.09 µs against np.copyto's 0.27 on small arrays

    def download(self, src: np.ndarray) -> np.ndarray:
        return src.copy()

    def download_into(self, src: np.ndarray, out: np.ndarray) -> None:
        np.copyto(out, src)

    def copy(self, src_backend: Backend, src, dst: np.ndarray) -> None:
        """Into the arena view ``dst``: the source backend writes it in place where it can
        (``download_into``), else through a host array."""
        into = getattr(src_backend, "download_into", None)
        if into is not None:
            into(src, dst)
        else:
            np.copyto(dst, src_backend.download(src))

    def copy_device(self, src_backend: Backend, src, dst: np.ndarray) -> bool:
        """Another CPU session's arena view ``src`` into ``dst``: one ``np.copyto``."""
        if not isinstance(src, np.ndarray) or src.shape != dst.shape:
            return False
        np.copyto(dst, src)
        return True

    def execute_partition(self, partition) -> None:
        """Each Execution in order, with BLAS single-threaded: products are split over this
        backend's pool (blas.py); the caller's BLAS setting is restored after. The pool's
        workers poll for tasks while the partition runs and sleep after it (``worker_pool.py``),
        unless its last run handed them nothing: waking them for nothing cost the silero VAD
        model (no op big enough to split) about 0.05 ms of its 0.15-0.2 ms. A partition whose
        Executions all say ``uses_blas = False`` leaves BLAS alone (about 1 µs a run)."""
        state, pool = partition.recording, self.pool
        if state is None:
            state = partition.recording = PartitionState(True)
        blas = self.runtime.blas if state.blas else None
        if blas is not None:
            blas.refresh()  # a len(sys.modules) test, unless modules were imported
            before = blas.use(1)
        pooled, dispatches = state.pooled, pool.dispatches
        if pooled:
            pool.wake()
        try:
            if self.run_deadline is None and state.segments is not None and not replaced(state.segments):
                for program, item, after in state.segments:
                    if program is None:
                        item[0].on_execute(item[1], item[2])
                    else:
                        pool.run_program(program)
                        if after is not None:
                            after()
            elif self.run_deadline is None:
                for exe, ins, outs in partition.runs:
                    exe.on_execute(ins, outs)
            else:
                super().execute_partition(partition)  # checks the deadline before each op
        finally:
            if pooled:
                pool.park()
            state.pooled = pool.dispatches != dispatches
            if blas is not None:
                blas.restore(before)  # leave the caller's BLAS as it was

    def run_host(self, info: OpInfo, inputs: list) -> list:
        """Run a dynamic op that is not control flow (the sequence ops) on host values:
        ``inputs`` ndarrays, lists of ndarrays (sequences) or ``None``; returns its outputs.
        Raises ``UnsupportedOperatorError`` when no host kernel is registered for it."""
        from mnnpy.backends.cpu import registry

        kernel = registry.host_kernel_of(info.type)
        if kernel is None:
            raise UnsupportedOperatorError({info.type: 1}, where=f"op '{info.op.name}' (no host kernel on the CPU)")
        return kernel(info.attrs, inputs)

    def evaluate(self, info: OpInfo) -> list[np.ndarray]:
        """Run one op whose inputs are all known (``info.inputs[k].value``) on fresh arrays:
        resize-time evaluation of small tensors and the converter's constant folding.
        Returns one array per output slot (``None`` for unused ones)."""
        values = [t.value if t is not None else None for t in info.inputs]
        out_arrays = [np.empty(t.shape, t.dtype) if t is not None else None for t in info.outputs]
        exe = self.create_execution(info)
        exe.on_resize(values, out_arrays)
        self.helper.wait()  # what on_resize left to the helper (packing)
        exe.on_execute(values, out_arrays)
        return out_arrays


class PartitionState:
    """What the CPU backend keeps of one partition (in ``PartitionStep.recording``): whether
    an Execution of it may call BLAS (``uses_blas``, default True), and whether its last run
    handed tasks to the pool (its workers are woken for the next run only then), and its
    ops' segments (``program.py``)."""

    __slots__ = ("blas", "pooled", "segments")

    def __init__(self, blas: bool):
        self.blas = blas
        self.pooled = True
        self.segments = None  # program.segments where it made a Program, else None (each op on its own)


def _blas() -> str:
    """The BLAS NumPy uses and its version (threadpoolctl), or ``"?"``."""
    from threadpoolctl import threadpool_info

    return next((f"{i['internal_api']} {i['version']}" for i in threadpool_info() if i["user_api"] == "blas"), "?")


class CPURuntime(Runtime):
    """Process-wide CPU runtime: thread pools shared by sessions."""

    name = "cpu"

    def __init__(self, device: int = 0):
        """``device``: always 0, the one CPU device (``device_list``)."""
        import os

        self.default_threads = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        self._pools: dict[int, WorkerPool] = {}
        self._pools_lock = threading.Lock()
        self.blas = BlasThreads()

    def queue_capacity(self) -> int:
        """A run takes as many units of the CPU's device queue as its session has threads."""
        return self.default_threads

    def pool(self, n: int) -> WorkerPool:
        """The shared pool of ``n`` threads (the caller and ``n - 1`` workers) of the sessions
        that run on ``n`` threads."""
        with self._pools_lock:
            if n not in self._pools:
                self._pools[n] = WorkerPool(n)
            return self._pools[n]

    @classmethod
    def warm_up(cls) -> None:
        """numba loads on a background thread (``kernels.warm_up``). The resize helper's thread
        (``ResizeHelper``) starts first: a thread started while that one loads kernels
        (``dlopen`` holds the GIL) waited up to 90 ms here for its first breath."""
        from mnnpy.backends.cpu.kernels import warm_up
        from mnnpy.backends.cpu.page_pool import helper

        helper().submit(int)
        warm_up()

    @classmethod
    def list_devices(cls) -> list[str]:
        """One line: the CPU, its cores and the BLAS NumPy uses."""
        import os
        import platform

        return [f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores; NumPy {np.__version__}; BLAS {_blas()})"]

    @classmethod
    def device_list(cls) -> tuple[list, str]:
        """The one CPU device: type cpu, driver version NumPy's and its BLAS's, feature level
        mnnpy's version (the backend is part of mnnpy, as NNAPI's CPU implementation is of the
        framework)."""
        import platform

        from mnnpy import __version__
        from mnnpy.device import Device

        name = platform.processor() or platform.machine()
        driver = f"NumPy {np.__version__}, BLAS {_blas()}"
        return [Device(name, "cpu", 0, "cpu", driver, f"mnnpy {__version__}", cls.list_devices()[0])], ""

    def create_backend(self, config: BackendConfig) -> CPUBackend:
        return CPUBackend(self, config)

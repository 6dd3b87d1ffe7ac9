"""onnxruntime, the apps' and benchmarks' reference backend (``backend="onnxruntime"``): the one
place that opens it (``onnxruntime_session``)."""

from __future__ import annotations

import os

from mnnpy import BackendUnavailableError, ModelFormatError


def onnxruntime_session(
    model: str | os.PathLike | bytes,
    num_threads: int | None = None,
    memory_arena: bool = True,
    optimize: bool = True,
    quiet: bool = False,
):
    """An ``onnxruntime.InferenceSession`` of ``model`` (an ONNX file's path, or its serialized
    bytes) on the CPU provider: ``num_threads`` intra-op threads (``None``: onnxruntime's
    choice) and one inter-op thread; warnings silenced (``quiet``: errors too).
    ``memory_arena=False``: without onnxruntime's CPU arena, which keeps the most memory any
    run needed (its memory then returns after each run: ``mnnpy stress`` measures RSS).
    ``optimize=False``: no graph optimizations (the conformance judge's plain reference).

    Raises ``BackendUnavailableError`` when the onnxruntime package is missing,
    ``ModelFormatError`` when onnxruntime cannot load the model (missing, garbage, invalid).
    """
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise BackendUnavailableError(
            f"backend 'onnxruntime' needs the onnxruntime package ({e}): pip install onnxruntime"
        ) from None
    opts = ort.SessionOptions()
    opts.log_severity_level = 4 if quiet else 3  # 3: errors only (real models carry unused initializers, each warned about)
    if num_threads:
        opts.intra_op_num_threads = num_threads
    opts.inter_op_num_threads = 1  # used only by the parallel execution mode; the benchmarks have always set it
    opts.enable_cpu_mem_arena = memory_arena
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source = model if isinstance(model, bytes) else str(model)
    try:
        return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own classes (Fail, InvalidProtobuf, NoSuchFile, InvalidGraph, ...)
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        name = f"of {len(model)} bytes" if isinstance(model, bytes) else str(model)
        raise ModelFormatError(f"ONNX model {name}: onnxruntime cannot load it: {why}") from None

"""onnxruntime, the apps' reference backend (``backend="onnxruntime"``): one place that opens it."""

from __future__ import annotations

import os

from mnnpy import BackendUnavailableError, ModelFormatError


def onnxruntime_session(model_path: str | os.PathLike, num_threads: int | None = None, memory_arena: bool = True):
    """An ``onnxruntime.InferenceSession`` of the ONNX file ``model_path`` on the CPU provider
    (``num_threads``: intra-op threads; ``None``: onnxruntime's choice), warnings silenced.
    ``memory_arena=False``: without onnxruntime's CPU arena, which keeps the most memory any
    run needed (its memory then returns after each run: ``mnnpy stress`` measures RSS).

    Raises ``BackendUnavailableError`` when the onnxruntime package is missing,
    ``ModelFormatError`` when onnxruntime cannot load the file (missing, garbage, invalid).
    """
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise BackendUnavailableError(
            f"backend 'onnxruntime' needs the onnxruntime package ({e}): pip install onnxruntime"
        ) from None
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # errors only: some real models carry unused initializers, each warned about
    if num_threads:
        opts.intra_op_num_threads = num_threads
    opts.enable_cpu_mem_arena = memory_arena
    try:
        return ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's own classes (Fail, InvalidProtobuf, NoSuchFile, InvalidGraph, ...)
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelFormatError(f"ONNX model {model_path}: onnxruntime cannot load it: {why}") from None

"""mnnpy: an MNN-style multi-backend neural-network inference engine.

Convert an ONNX model once (``mnnpy convert model.onnx model.mnnpy``), then load and
run it: ``mnnpy.load("model.mnnpy").run({"x": array})``. Importing mnnpy imports no
GPU package; backends load on demand, and ``devices()`` lists what each can run on
(``backend="vulkan:1"`` picks one). ``MAX_THREADS``: the most CPU threads a session
takes (``create_session(num_threads=...)``). Real models for tests and demos are in
``mnnpy.models``; applications built on this API (the OCR pipeline, the demo) in ``mnnpy.apps``.
A ``SessionSpec`` (picklable) prepares a Session in a worker process or a Ray actor
(``mnnpy.ray``, the only module that imports Ray).
``MNNPY_LOG=debug`` (or ``info``) logs placement, cache hits and misses, compile and resize
times to stderr (``mnnpy.log``).
"""

from mnnpy import log as _log
from mnnpy.device import Device, devices, get_device
from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import (
    BackendUnavailableError,
    DeadlineMissedError,
    DependencyFailedError,
    InputError,
    LoopTimeoutError,
    MnnpyError,
    ModelFormatError,
    OutputBufferTooSmallError,
    ShapeError,
    StaleTensorError,
    UnsupportedOperatorError,
)
from mnnpy.fence import Fence
from mnnpy.interpreter import MAX_THREADS, Interpreter, load
from mnnpy.io_desc import IODesc
from mnnpy.model_file import FORMAT_VERSION
from mnnpy.session import Session
from mnnpy.session_spec import SessionSpec
from mnnpy.timing import RunOutputs, Timing

_log.configure_from_env()  # $MNNPY_LOG=debug|info: a stderr handler on the "mnnpy" logger

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "MAX_THREADS",
    "BackendUnavailableError",
    "DeadlineMissedError",
    "DependencyFailedError",
    "Device",
    "DeviceTensor",
    "Fence",
    "IODesc",
    "InputError",
    "Interpreter",
    "LoopTimeoutError",
    "MnnpyError",
    "ModelFormatError",
    "OutputBufferTooSmallError",
    "RunOutputs",
    "Session",
    "SessionSpec",
    "ShapeError",
    "StaleTensorError",
    "Timing",
    "UnsupportedOperatorError",
    "__version__",
    "devices",
    "get_device",
    "load",
]

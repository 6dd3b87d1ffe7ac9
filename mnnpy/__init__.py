"""mnnpy: an MNN-style multi-backend neural-network inference engine.

Convert an ONNX model once (``mnnpy convert model.onnx model.mnnpy``), then load and
run it: ``mnnpy.load("model.mnnpy").run({"x": array})``. Importing mnnpy imports no
GPU package; backends load on demand.
"""

from mnnpy.errors import (
    BackendUnavailableError,
    InputError,
    MnnpyError,
    ModelFormatError,
    ShapeError,
    UnsupportedOperatorError,
)
from mnnpy.interpreter import Interpreter, load
from mnnpy.model_file import FORMAT_VERSION
from mnnpy.session import IODesc, Session

__version__ = "0.1.0"

__all__ = [
    "FORMAT_VERSION",
    "BackendUnavailableError",
    "IODesc",
    "InputError",
    "Interpreter",
    "MnnpyError",
    "ModelFormatError",
    "Session",
    "ShapeError",
    "UnsupportedOperatorError",
    "__version__",
    "load",
]

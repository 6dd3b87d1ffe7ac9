"""An ``onnx.backend.base.Backend`` over mnnpy: ONNX's own node tests judge the engine.

``MnnpyBackend.prepare(model, backend="cpu")`` converts the ModelProto through the real
converter (in memory) and creates a session on the chosen mnnpy backend; the returned
``MnnpyRep.run(inputs)`` takes inputs in graph order (arrays, numpy scalars, lists) and
returns the outputs in graph order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from mnnpy.converter import convert
from mnnpy.errors import ModelFormatError
from mnnpy.interpreter import Interpreter
from mnnpy.session import Session


def as_array(value: Any) -> np.ndarray | list[np.ndarray]:
    """An input as an ndarray: TensorProtos decoded (``onnx.numpy_helper``), a list or
    tuple of arrays (an ONNX sequence) as a list of ndarrays, the rest ``np.asarray``."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (np.ndarray, onnx.TensorProto)) for v in value):
        return [as_array(v) for v in value]
    return value if isinstance(value, np.ndarray) else np.asarray(value)


class MnnpyRep(BackendRep):
    """A prepared model: a Session plus the graph's input and output names."""

    def __init__(self, session: Session):
        self.session = session
        self.input_names = [d.name for d in session.inputs]
        self.output_names = [d.name for d in session.outputs]

    def run(self, inputs: Any, **kwargs) -> tuple[np.ndarray, ...]:
        """Outputs in graph order for ``inputs`` (a sequence in graph order, or a name->value dict)."""
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            feeds = dict(zip(self.input_names, inputs))
        feeds = {k: as_array(v) for k, v in feeds.items()}
        out = self.session.run(feeds)
        return tuple(out[n] for n in self.output_names)


class MnnpyBackend(Backend):
    """ONNX backend API over mnnpy (``device`` "CPU"; ``backend`` picks the mnnpy backend)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", backend: str | Sequence[str] = "cpu", **kwargs) -> MnnpyRep:
        """Convert ``model`` in memory and create a session on ``backend``."""
        # no onnx.checker pass (the base class's): like onnxruntime, the converter takes any
        # model it can read, and reports what it cannot with an MnnpyError
        if not isinstance(model, onnx.ModelProto):
            raise ModelFormatError(f"prepare takes an onnx.ModelProto, got {type(model).__name__}")
        return MnnpyRep(Interpreter(convert(model)).create_session(backend=backend))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"


prepare = MnnpyBackend.prepare
run_model = MnnpyBackend.run_model
supports_device = MnnpyBackend.supports_device

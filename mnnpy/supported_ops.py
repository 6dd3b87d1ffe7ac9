"""Which ops of a model a device supports, and why not (NNAPI's
``ANeuralNetworksModel_getSupportedOperationsForDevices``; onnxruntime's ``GetCapability``).

The answer is the Schedule's own rule (``mnnpy.schedule.placeable``: the device's
``Backend.supports`` then ``supports_outputs``), applied to each op of the main graph as the
SizeComputer describes it for some input shapes; nothing here decides support itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mnnpy.schedule import placeable

HOST = "runs on the host: a control-flow or sequence op (its bodies' ops are placed one by one at run time)"
LATER = "not checked: its input shapes depend on values computed at run time (after {op})"


@dataclass(frozen=True)
class OpSupport:
    """One op of the main graph on one device: ``index`` (its position in the graph), ``name``,
    ``type`` (ONNX op type), ``supported`` (``True``/``False``; ``None`` where it cannot be told
    before a run: the op follows a control-flow op or a value-dependent shape) and ``reason``
    (why not, as the Schedule's fallback reasons word it; empty when supported)."""

    index: int
    name: str
    type: str
    supported: bool | None
    reason: str = ""

    def describe(self) -> str:
        """One line: ``yes``/``no``/``?``, the op, and the reason."""
        mark = {True: "yes", False: "no", None: "?"}[self.supported]
        return f"{mark:<4}{self.type} '{self.name}'" + (f": {self.reason}" if self.reason else "")


def supported_ops(interpreter, device, shapes: Mapping[str, tuple[int, ...]] | None = None) -> list[OpSupport]:
    """``Interpreter.supported_ops``: per op of ``interpreter``'s main graph, whether ``device``
    (a ``mnnpy.Device`` or a device name, ``"vulkan:1"``) supports it.

    ``shapes`` (input name -> shape): the ops are checked for those input shapes, limits that
    depend on sizes included (a device's buffer-size limit, ``supports_outputs``). Without
    it: for the declared shapes with batch 1 and every other dynamic dim 64
    (``mnnpy.tools.inputs.default_shape``, as ``mnnpy info --supported``; each dynamic dim 1
    made a pooling window larger than its input in PP-OCR cls). Ops computed at resize (their inputs all constant) are
    checked as any other. Raises ``InputError`` (a malformed device name, bad shapes),
    ``BackendUnavailableError`` (an unknown or unusable device) or ``ShapeError``."""
    from mnnpy.device import get_device

    dev = get_device(device)
    session = interpreter.unplanned_session(dev.id)
    try:
        if shapes is None:
            from mnnpy.tools.inputs import default_shape

            shapes = {d.name: default_shape(d.shape or ()) for d in session.inputs}
        sizes = session._described(shapes)[0].sizes
        backend = session.backends[0]
        ops = session.graph.ops
        end = len(ops) if sizes.barrier is None else sizes.barrier
        out = []
        for i, op in enumerate(ops):
            if i == sizes.dynamic:
                ok, why = False, HOST
            elif i >= end:
                ok, why = None, LATER.format(op=f"{ops[end - 1].type} '{ops[end - 1].name}'" if end else "the inputs")
            else:
                ok, why = placeable(backend, sizes.op_info(i))
            out.append(OpSupport(i, op.name, op.type, ok, "" if ok else why))
        return out
    finally:
        session.close()

"""The options of one execution (one run call, in NNAPI's sense), checked once when the call
is made: which outputs, the loop time-out, the caller's output arrays, timing, the deadline,
whether the outputs stay on the device (``outputs_on_device``: ``mnnpy.device_tensor``).

Caller-provided outputs (NNAPI's output memory; onnxruntime's IO binding of host arrays):
``outputs={name: array}`` gives, per output, a C-contiguous writable ndarray of the output's
dtype; the run writes the output into it (one copy from the backend's tensor, none
through a temporary) and returns a view of it shaped as the output. An array whose shape
is the output's is returned as is; one with more elements takes the output in its first
elements. One with fewer raises ``OutputBufferTooSmallError`` naming, for every output
given, the shape it needs (0 for a dimension not known yet): before the run when the
shapes are known from the plan, else when the output is read. Wrong names, dtypes, a
non-array, a read-only or non-contiguous array, or a sequence output raise ``InputError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mnnpy.deadline import resolve
from mnnpy.errors import InputError, OutputBufferTooSmallError

OPTIONS = ("outputs", "measure_timing", "deadline", "timeout_ms", "outputs_on_device")  # Session.run's keywords


@dataclass
class RunRequest:
    """A checked execution: ``wanted`` output tensors, ``loop_timeout`` (s),
    ``outputs`` (tensor -> the caller's array), ``measure_timing``, ``deadline``
    (``time.monotonic()`` s or ``None``), ``outputs_on_device`` (return ``DeviceTensor`` s)."""

    wanted: list[int]
    loop_timeout: float
    outputs: dict[int, np.ndarray] = field(default_factory=dict)
    measure_timing: bool = False
    deadline: float | None = None
    outputs_on_device: bool = False

    @classmethod
    def checked(cls, graph, wanted: list[int], loop_timeout: float, **options: Any) -> RunRequest:
        """The request of ``wanted`` outputs with the options of ``Session.run`` (``OPTIONS``)
        checked (``loop_timeout`` already is); raises ``InputError`` for another option name
        (the asynchronous runs and bursts take them as keywords), and for ``outputs`` with
        ``outputs_on_device`` (an output is either written into the caller's array or left on
        the device)."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise InputError(f"unknown run option(s) {unknown}; the options are {list(OPTIONS)} and loop_timeout")
        outputs, measure_timing = options.get("outputs"), options.get("measure_timing", False)
        deadline, timeout_ms = options.get("deadline"), options.get("timeout_ms")
        outputs_on_device = options.get("outputs_on_device", False)
        if not isinstance(outputs_on_device, (bool, np.bool_)):
            raise InputError(f"outputs_on_device must be True or False, got {outputs_on_device!r}")
        if outputs_on_device and outputs:
            raise InputError(
                "outputs and outputs_on_device exclude each other: outputs go either into your arrays or stay on the device"
            )
        return cls(
            wanted,
            loop_timeout,
            checked_outputs(graph, wanted, outputs),
            bool(measure_timing),
            resolve(deadline, timeout_ms),
            bool(outputs_on_device),
        )

    def into(self, graph, plan, t: int) -> np.ndarray | None:
        """The caller's array for output ``t`` as a view of ``t``'s shape in ``plan`` (``None``
        when not given or its shape is not known to ``plan`` yet). Raises
        ``OutputBufferTooSmallError`` when it cannot hold the output."""
        arr = self.outputs.get(t)
        shape = plan.sizes.shapes.get(t)
        if arr is None or shape is None:
            return None
        if arr.shape == tuple(shape):
            return arr
        n = math.prod(shape)
        if arr.size < n:
            raise OutputBufferTooSmallError(_too_small(graph, plan, self.outputs, t), needed_shapes(graph, plan, self.outputs))
        return arr.reshape(-1)[:n].reshape(shape)


def needed_shapes(graph, plan, outputs: Mapping[int, np.ndarray]) -> dict[str, tuple[int, ...]]:
    """Output name -> the shape it needs, for every output in ``outputs``: from ``plan``
    where known, else the declared shape with 0 for each dimension not known."""
    out = {}
    for t in outputs:
        shape = plan.sizes.shapes.get(t)
        if shape is None:
            declared = graph.tensors[t].shape or ()
            shape = tuple(d if isinstance(d, int) and d >= 0 else 0 for d in declared)
        out[graph.tensors[t].name] = tuple(int(d) for d in shape)
    return out


def _too_small(graph, plan, outputs, t: int) -> str:
    name, arr = graph.tensors[t].name, outputs[t]
    shape = tuple(plan.sizes.shapes[t])
    return (
        f"output '{name}': the array given has {arr.size} elements (shape {arr.shape}), "
        f"the output needs {math.prod(shape)} (shape {shape})"
    )


def checked_outputs(graph, wanted: list[int], outputs: Any) -> dict[int, np.ndarray]:
    """``outputs`` (output name -> ndarray) keyed by tensor, each checked (see the module doc);
    raises ``InputError``."""
    if outputs is None:
        return {}
    if not isinstance(outputs, Mapping):
        raise InputError(f"outputs must be a dict of output name -> array, got {type(outputs).__name__}")
    names = {graph.tensors[t].name: t for t in graph.outputs}
    out = {}
    for name, arr in outputs.items():
        if name not in names:
            raise InputError(f"outputs: unknown output name {name!r}; the model's outputs are {list(names)}")
        t = names[name]
        desc = graph.tensors[t]
        if t not in wanted:
            raise InputError(f"outputs: output '{name}' is not among the outputs asked for")
        if getattr(desc, "kind", "tensor") == "sequence":
            raise InputError(f"outputs: output '{name}' is a sequence; give arrays only for tensor outputs")
        if not isinstance(arr, np.ndarray):
            raise InputError(f"outputs: output '{name}' takes an ndarray, got {type(arr).__name__}")
        if arr.dtype != desc.dtype:
            raise InputError(f"outputs: output '{name}' is {desc.dtype}, the array given is {arr.dtype}")
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            raise InputError(f"outputs: the array for output '{name}' must be C-contiguous and writeable")
        out[t] = arr
    return out


def wanted_outputs(graph, output_names: list[str] | None) -> list[int]:
    """The output tensors of ``output_names`` (all outputs for ``None``); raises ``InputError``."""
    if output_names is None:
        return list(graph.outputs)
    names = {graph.tensors[t].name: t for t in graph.outputs}
    bad = [n for n in output_names if n not in names]
    if bad:
        raise InputError(f"unknown output name(s) {bad}; the model's outputs are {list(names)}")
    return [names[n] for n in output_names]

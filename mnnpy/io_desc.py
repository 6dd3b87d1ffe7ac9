"""``IODesc``: a graph input or output as the public API describes it, and what an input
accepts (shape and value checks behind ``Session.resize`` and ``Session.run``)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.device_tensor import DeviceTensor
from mnnpy.errors import InputError
from mnnpy.fence import FencedOutput


@dataclass(frozen=True)
class IODesc:
    """A graph input or output: name, shape (ints for fixed dims, str/None for dynamic), dtype,
    and ``kind``: ``"tensor"``, or ``"sequence"`` (a list of tensors of ``dtype``, each of
    ``shape`` where it is known)."""

    name: str
    shape: tuple[int | str | None, ...] | None
    dtype: np.dtype
    kind: str = "tensor"

    def check_shape(self, shape: Any) -> tuple[int, ...]:
        """``shape`` as a tuple of ints if this input takes it: a sequence of non-negative
        ints of the declared rank, equal to every fixed declared dim. Raises ``InputError``."""
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise InputError(f"input '{self.name}': shape must be a sequence of ints, got {shape!r}")
        shape = tuple(shape)
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) for d in shape):
            raise InputError(f"input '{self.name}': shape must be a sequence of ints, got {shape!r}")
        shape = tuple(int(d) for d in shape)
        declared = self.shape
        if declared is not None:
            if len(shape) != len(declared):
                raise InputError(
                    f"input '{self.name}': rank {len(shape)} {shape}, expected rank {len(declared)} {tuple(declared)}"
                )
            for i, (got, want) in enumerate(zip(shape, declared)):
                if isinstance(want, int) and want >= 0 and got != want:
                    raise InputError(f"input '{self.name}': dim {i} is {got}, expected {want} (shape {tuple(declared)})")
        if any(d < 0 for d in shape):
            raise InputError(f"input '{self.name}': negative dim in {shape}")
        return shape

    def array(self, value: Any) -> np.ndarray | list[np.ndarray]:
        """``value`` as an array of this input's dtype: an ndarray must already have it (no
        silent cast); Python scalars and nested lists are converted as NumPy would (an
        overflowing or non-numeric value is refused). A sequence input takes a list or tuple
        of such values (a list of ndarrays). A ``DeviceTensor`` (``mnnpy.device_tensor``) of
        this dtype is returned as it is (never read here), a ``FencedOutput`` too (checked
        when its fence has signalled). Raises ``InputError``
        (``StaleTensorError`` for a device tensor whose session ran again)."""
        if self.kind == "sequence":
            if not isinstance(value, (list, tuple)):
                raise InputError(f"input '{self.name}' is a sequence: give a list of arrays, got {type(value).__name__}")
            element = IODesc(f"{self.name}[]", self.shape, self.dtype)
            return [element.array(v) for v in value]
        if isinstance(value, FencedOutput):  # checked once known (fenced_job)
            return value
        if isinstance(value, DeviceTensor):  # checked without reading it; its shape at resize
            if value.dtype != self.dtype:
                raise InputError(f"input '{self.name}': device tensor '{value.name}' is {value.dtype}, expected {self.dtype}")
            value.check("fed to a run")
            return value
        if value is None:  # np.asarray(None, float32) would be NaN
            raise InputError(f"input '{self.name}': None is not a value; give an array of {self.dtype}")
        if isinstance(value, np.ndarray):
            if value.dtype != self.dtype:
                raise InputError(f"input '{self.name}': dtype {value.dtype}, expected {self.dtype}")
            return value
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)
                return np.asarray(value, dtype=self.dtype)
        except (ValueError, TypeError, OverflowError, RuntimeWarning) as e:
            raise InputError(f"input '{self.name}': cannot make a {self.dtype} array of {type(value).__name__}: {e}") from None


def check_names(
    index: Mapping[str, int], desc: Mapping[int, IODesc], feeds: Mapping[str, Any], sequences_given: bool = True
) -> None:
    """Every name in ``feeds`` is an input (``index``: input name -> tensor) and every input
    is there (sequence inputs only where ``sequences_given``: a shape dict has none).
    Raises ``InputError``."""
    unknown = [n for n in feeds if n not in index]
    if unknown:
        raise InputError(f"unknown input name(s) {unknown}; the model's inputs are {list(index)}")
    missing = [n for n, t in index.items() if n not in feeds and (sequences_given or desc[t].kind != "sequence")]
    if missing:
        raise InputError(f"missing input(s) {missing}; the model's inputs are {list(index)}")


def checked_feeds(
    index: Mapping[str, int], desc: Mapping[int, IODesc], feeds: Any, owner: Any = None, value_inputs=(), fences=()
) -> dict[int, Any]:
    """``feeds`` (input name -> value) checked (``check_names``, ``IODesc.array``) and keyed
    by tensor, device tensors read where they must be (``on_host_where_needed``). A
    ``FencedOutput`` is taken only where its fence is one of ``fences`` (``run_fenced``'s
    ``wait_for``). Raises ``InputError``."""
    if not isinstance(feeds, Mapping):
        raise InputError(f"run() takes a dict of input name -> array, got {type(feeds).__name__}")
    check_names(index, desc, feeds)
    out = {index[n]: desc[index[n]].array(v) for n, v in feeds.items()}
    for v in out.values():
        if isinstance(v, FencedOutput) and not any(v.fence is f for f in fences):
            raise InputError(f"{v!r} is known only after its fence signals: feed it to run_fenced with that fence in wait_for")
    return on_host_where_needed(out, owner, value_inputs)


def on_host_where_needed(arrays: dict[int, Any], owner: Any, value_inputs=()) -> dict[int, Any]:
    """``arrays`` with a ``DeviceTensor`` made by ``owner`` (the session about to run, which
    will overwrite it) or fed to one of ``value_inputs`` (tensors whose contents shape the
    plan) read into a host array now (``StaleTensorError`` if it is stale)."""
    for t, v in arrays.items():
        if isinstance(v, DeviceTensor) and (v.session is owner or t in value_inputs):
            arrays[t] = v.numpy()
    return arrays

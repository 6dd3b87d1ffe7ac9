"""Op schemas: each op declared once (inputs, outputs, attributes, shape function).

One declaration serves the converter (canonical attribute set), the loader's
validation (attribute names/types/choices), the SizeComputer (``infer``) and docs.
Register with the ``op_schema`` decorator on the op's shape function; registering a
type twice is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mnnpy.errors import ModelFormatError, ShapeError
from mnnpy.ir import GraphRef
from mnnpy.registry import Registry

REQUIRED = object()  # default of an attribute that must be present

ATTR_TYPES = ("int", "float", "string", "ints", "floats", "strings", "tensor", "graph")


@dataclass(frozen=True)
class Attr:
    """An attribute: type (one of ``ATTR_TYPES``), default (``REQUIRED`` if none), allowed values."""

    type: str
    default: Any = REQUIRED
    choices: tuple | None = None


@dataclass(frozen=True)
class In:
    """An input: ``optional`` may be absent (-1); ``variadic`` takes the rest;
    ``value``: the SizeComputer reads its *contents* (must be known at resize)."""

    name: str
    optional: bool = False
    variadic: bool = False
    value: bool = False


FlopsRule = Callable[["ShapeContext", list[tuple[int, ...]]], float]


@dataclass
class OpSchema:
    """Declaration of one op type. ``infer(ctx)`` returns ``[(shape, dtype), ...]`` per output.

    Facts the converter, the planner and the backends ask about instead of keeping lists
    of op names:

    - ``alias``: index of an input whose buffer output 0 may share (reshape-like ops that
      only change metadata);
    - ``elementwise``: ``Y[i] = f(inputs at i)``, the output shape is the (broadcast) input
      shape, so the work is one step per output element;
    - ``same_rank``: inputs (declaration indices; a variadic last one stands for all the
      rest) whose rank output 0 has: a lower bound on the output's rank before shapes are
      known (broadcast ops: the largest of theirs);
    - ``dynamic``: the op's outputs (their shapes, or sequence values) are known only after
      it ran (control flow: If, Loop, Scan; the sequence ops). Its shape function returns
      ``[(None, dtype), ...]``; the SizeComputer ends the segment after it, the op runs on
      the host at run time, and the rest of the graph is planned with its outputs' shapes;
    - ``flops(ctx, out_shapes)``: the op's floating-point operations (a count; ``mflops``
      gives MFLOPs) from its input shapes and attributes (``ctx``) and its output shapes
      (``mnnpy.ops.flops`` has the rules; its docstring is the rule in words);
    - ``check_attrs(attrs)``: rules between the resolved attributes that hold whatever the
      shapes (Conv: ``activation_params`` fits ``activation``); returns the broken rule in
      words, or ``None``. Checked at load by ``resolve_attrs`` (``ModelFormatError``).
    """

    type: str
    inputs: tuple[In, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Attr]
    infer: Callable[[ShapeContext], list[tuple[tuple[int, ...], np.dtype]]]
    alias: int | None = None
    variadic_outputs: bool = False
    doc: str = ""
    value_from_shape: bool = False  # outputs' values follow from input shapes alone (Shape, Size)
    elementwise: bool = False
    same_rank: tuple[int, ...] = ()
    flops: FlopsRule | None = None
    dynamic: bool = False
    check_attrs: Callable[[dict[str, Any]], str | None] | None = None

    def mflops(self, ctx: ShapeContext, out_shapes: Sequence[tuple[int, ...]]) -> float:
        """MFLOPs of one op: ``flops(ctx, out_shapes) / 1e6``."""
        return float(self.flops(ctx, list(out_shapes))) / 1e6

    def rank_inputs(self, n_inputs: int) -> list[int]:
        """Indices among ``n_inputs`` actual inputs whose rank output 0 has (``same_rank``)."""
        return [i for i in range(n_inputs) if min(i, len(self.inputs) - 1) in self.same_rank and self.input_spec(i)]

    def value_inputs(self, n_inputs: int) -> list[int]:
        """Indices of inputs whose values the shape function reads."""
        out = []
        for i in range(n_inputs):
            spec = self.input_spec(i)
            if spec is not None and spec.value:
                out.append(i)
        return out

    def input_spec(self, i: int) -> In | None:
        if i < len(self.inputs):
            return self.inputs[i]
        if self.inputs and self.inputs[-1].variadic:
            return self.inputs[-1]
        return None

    def resolve_attrs(self, given: dict[str, Any], where: str) -> dict[str, Any]:
        """Fill defaults and check names/types/choices; raises ``ModelFormatError``."""
        out: dict[str, Any] = {}
        for name in given:
            if name not in self.attrs:
                raise ModelFormatError(f"{where}: {self.type} has no attribute '{name}'")
        for name, spec in self.attrs.items():
            if name in given:
                value = given[name]
                _check_attr_type(value, spec, f"{where}: attribute '{name}'")
                if spec.choices is not None and value not in spec.choices:
                    raise ModelFormatError(f"{where}: attribute '{name}'={value!r} not one of {list(spec.choices)}")
                out[name] = value
            elif spec.default is REQUIRED:
                raise ModelFormatError(f"{where}: {self.type} requires attribute '{name}'")
            else:
                out[name] = spec.default
        broken = self.check_attrs(out) if self.check_attrs is not None else None
        if broken:
            raise ModelFormatError(f"{where}: {broken}")
        return out

    def check_arity(self, n_in: int, n_out: int, where: str) -> None:
        """Check input/output counts against the declaration; raises ``ModelFormatError``."""
        required = sum(1 for s in self.inputs if not s.optional and not s.variadic)
        variadic = bool(self.inputs) and self.inputs[-1].variadic
        if n_in < required or (not variadic and n_in > len(self.inputs)):
            raise ModelFormatError(
                f"{where}: {self.type} takes {required}..{'n' if variadic else len(self.inputs)} inputs, got {n_in}"
            )
        if self.variadic_outputs:
            if n_out < 1:
                raise ModelFormatError(f"{where}: {self.type} needs at least one output")
        elif not 1 <= n_out <= len(self.outputs):
            raise ModelFormatError(f"{where}: {self.type} has {len(self.outputs)} outputs, got {n_out}")


_ATTR_TYPES = {
    "int": lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (float, int, np.floating)),
    "string": lambda v: isinstance(v, str),
    "ints": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (int, np.integer)) for x in v),
    "floats": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (float, int, np.floating)) for x in v),
    "strings": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
    "tensor": lambda v: isinstance(v, np.ndarray),
    "graph": lambda v: isinstance(v, GraphRef),
}


def _check_attr_type(value: Any, spec: Attr, where: str) -> None:
    if not _ATTR_TYPES[spec.type](value):
        raise ModelFormatError(f"{where} must be of type {spec.type}, got {type(value).__name__}")


class ShapeContext:
    """What a shape function sees: the op, input shapes/dtypes, known input values, attributes.

    ``values[i]`` is the contents of input ``i`` when known at resize (constants and
    small tensors computed during resize), else ``None``. A shape function may call
    ``set_value(k, array)`` to publish output ``k``'s contents (e.g. ``Shape``), and
    ``derive(name=value)`` to record what it derived (pads after ``auto_pad``, strides,
    Resize scales, reduce axes...): the SizeComputer keeps it per op and every backend reads
    it from ``OpInfo.geometry`` instead of deriving it again.
    """

    def __init__(self, op, schema: OpSchema, shapes, dtypes, values, attrs):
        self.op = op
        self.schema = schema
        self.shapes: list[tuple[int, ...] | None] = shapes
        self.dtypes: list[np.dtype | None] = dtypes
        self.values: list[np.ndarray | None] = values
        self.attrs: dict[str, Any] = attrs
        self.out_values: dict[int, np.ndarray] = {}
        self.geometry: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        return self.attrs[name]

    def has(self, i: int) -> bool:
        """Whether optional input ``i`` is present."""
        return i < len(self.shapes) and self.shapes[i] is not None

    def value(self, i: int) -> np.ndarray:
        """Contents of input ``i``; raises ``ShapeError`` when not known at resize."""
        v = self.values[i] if i < len(self.values) else None
        if v is None:
            name = self.schema.input_spec(i).name if self.schema.input_spec(i) else str(i)
            self.fail(f"the value of input '{name}' must be known at resize (a constant or computed from shapes)")
        return v

    def set_value(self, k: int, value: np.ndarray) -> None:
        self.out_values[k] = value

    def derive(self, **facts: Any) -> None:
        """Record derived geometry (``OpInfo.geometry``) under the given names."""
        self.geometry.update(facts)

    def check_output(self, shape, dtype) -> int:
        """Bytes of an output of ``shape``/``dtype``, checked before a shape function computes
        anything that large (``limits.check_tensor``: rank, bytes within the memory limit of the
        plan being made); raises ``ShapeError`` naming the op and its input shapes."""
        from mnnpy.limits import check_tensor

        return check_tensor(shape, dtype, f"{self.op.type} '{self.op.name}' with input shapes {self.shapes}")

    def fail(self, rule: str):
        """Raise ``ShapeError`` naming the op, its input shapes and the broken rule."""
        raise ShapeError(f"{self.op.type} '{self.op.name}' with input shapes {self.shapes}: {rule}")


_SCHEMAS = Registry("op schema", "mnnpy.ops", skip=("registry", "common", "flops"), indexed=True)


def op_schema(
    type: str,
    inputs: Sequence[In | str],
    outputs: Sequence[str] = ("Y",),
    attrs: dict[str, Attr] | None = None,
    alias: int | None = None,
    variadic_outputs: bool = False,
    value_from_shape: bool = False,
    *,
    elementwise: bool = False,
    same_rank: Sequence[int] | None = None,
    flops: FlopsRule | None = None,
    doc: str | None = None,
    dynamic: bool = False,
    check_attrs: Callable[[dict[str, Any]], str | None] | None = None,
):
    """Decorator registering ``infer`` as the shape function of a new op schema.

    ``doc`` (default: ``infer``'s docstring) is the op's formula for ``docs/ops.md``.
    Defaults from the facts: an ``elementwise`` op has ``same_rank`` = every input and
    costs one FLOP per output element; an aliasing (reshape-like) op costs none. Raises
    ``ValueError`` when ``type`` is already registered.
    """
    from mnnpy.ops import flops as rules

    if same_rank is None:
        same_rank = range(len(inputs)) if elementwise else ()
    if flops is None:
        flops = rules.per_element(1) if elementwise else rules.MOVES if alias is not None else None

    def deco(infer):
        _SCHEMAS.add(
            type,
            OpSchema(
                type=type,
                inputs=tuple(i if isinstance(i, In) else In(i) for i in inputs),
                outputs=tuple(outputs),
                attrs=dict(attrs or {}),
                infer=infer,
                alias=alias,
                variadic_outputs=variadic_outputs,
                doc=(doc if doc is not None else infer.__doc__ or "").strip(),
                value_from_shape=value_from_shape,
                elementwise=elementwise,
                same_rank=tuple(same_rank),
                flops=flops,
                dynamic=dynamic,
                check_attrs=check_attrs,
            ),
        )
        return infer

    return deco


def get_schema(type: str) -> OpSchema | None:
    """The schema registered for ``type``, or ``None``."""
    return _SCHEMAS.get(type)


def resolve_attrs(graphs) -> None:
    """Set ``op.resolved`` (the schema's ``resolve_attrs``) on every op of ``graphs`` that
    lacks it; raises ``ModelFormatError`` naming the op. The loader resolves as it
    validates; this serves a ``Net`` handed over in memory."""
    for g in graphs:
        for op in g.ops:
            if op.resolved is None:
                schema = get_schema(op.type)
                if schema is None:
                    raise ModelFormatError(f"op '{op.name}': unknown op type '{op.type}'")
                op.resolved = schema.resolve_attrs(op.attrs, f"op '{op.name}'")


def all_schemas() -> dict[str, OpSchema]:
    """Every registered op schema, by type."""
    return dict(_SCHEMAS.entries())


def aliasing_ops() -> tuple[str, ...]:
    """Op types whose output 0 may share an input's buffer (``OpSchema.alias``: reshape-like
    ops, metadata only on contiguous storage), in registration order."""
    return tuple(t for t, s in all_schemas().items() if s.alias is not None)

"""Plan values as JSON data (``mnnpy.plan_cache``): an explicit allow-list of types, no pickle.

``encode(value)`` gives JSON-ready data and ``decode(data)`` the value back, equal in type and
bits; types (exact, subclasses refused):

======================  ==================================================================
``None bool int float   themselves (floats as Python writes them: exact; NaN and infinities
str``                   as JSON's ``NaN``/``Infinity`` extension, which ``json`` reads back)
``tuple``               a JSON array (the common case in geometry: windows, pads, axes)
``list``                ``{"l": [items]}``
``dict``                ``{"d": [[key, value], ...]}`` (keys of any type here, order kept)
``slice``               ``{"s": [start, stop, step]}``
``numpy.ndarray``       ``{"a": [dtype.str, shape, base64 of the C-order bytes]}``
NumPy scalar            ``{"n": [dtype.str, base64 of its bytes]}``
``GEOMETRY`` classes    ``{"c": [class name, [field values in order]]}`` (``Window``,
                        ``ResizeGeometry``: the dataclasses shape functions derive)
======================  ==================================================================

Arrays and scalars are of ``DTYPE_KINDS`` only (booleans, integers, floats, complex): an
object or structured dtype is not data. Anything else raises ``Unencodable`` (the plan is then
not cached); ``decode`` raises ``ValueError`` for anything ``encode`` cannot have written.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import fields
from typing import Any

import numpy as np

from mnnpy.ops.geometry import ResizeGeometry, Window

GEOMETRY = {c.__name__: c for c in (Window, ResizeGeometry)}
_FIELDS = {name: len(fields(c)) for name, c in GEOMETRY.items()}
DTYPE_KINDS = "biufc"  # numpy dtype kinds an array or scalar may have
_DTYPES: dict[str, np.dtype] = {}  # dtype text -> dtype, parsed once
_PLAIN = frozenset((type(None), bool, int, float, str))  # JSON scalars: decoded as themselves


class Unencodable(TypeError):
    """A value outside the allow-list (module docstring)."""


def dtype_text(dtype) -> str:
    """``dtype.str`` (``"<f4"``) of an allowed dtype; ``Unencodable`` otherwise."""
    dtype = np.dtype(dtype)
    if dtype.kind not in DTYPE_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise Unencodable(f"dtype {dtype}")
    return dtype.str


def parse_dtype(text: Any) -> np.dtype:
    """The dtype of ``dtype_text``'s ``text``; ``ValueError`` for anything else."""
    hit = _DTYPES.get(text) if type(text) is str else None
    if hit is not None:
        return hit
    if type(text) is not str or len(text) > 8:
        raise ValueError(f"not a dtype: {text!r:.40}")
    try:
        dtype = np.dtype(text)
    except TypeError as e:
        raise ValueError(f"not a dtype: {text!r} ({e})") from None
    if dtype.str != text or dtype.kind not in DTYPE_KINDS:
        raise ValueError(f"not an allowed dtype: {text!r}")
    _DTYPES[text] = dtype
    return dtype


def encode(v: Any) -> Any:
    """``v`` as JSON-ready data (module docstring); ``Unencodable`` outside the allow-list."""
    t = type(v)
    if v is None or t in (bool, int, float, str):
        return v
    if t is tuple:
        return [encode(x) for x in v]
    if t is list:
        return {"l": [encode(x) for x in v]}
    if t is dict:
        return {"d": [[encode(k), encode(x)] for k, x in v.items()]}
    if t is slice:
        return {"s": [encode(v.start), encode(v.stop), encode(v.step)]}
    if t is np.ndarray:
        return {"a": [dtype_text(v.dtype), list(v.shape), _b64(np.ascontiguousarray(v).tobytes())]}
    if isinstance(v, np.generic):
        return {"n": [dtype_text(v.dtype), _b64(v.tobytes())]}
    if GEOMETRY.get(t.__name__) is t:
        return {"c": [t.__name__, [encode(getattr(v, f.name)) for f in fields(v)]]}
    raise Unencodable(t.__name__)


def decode(d: Any) -> Any:
    """The value ``encode`` gave ``d`` for; ``ValueError`` for data it cannot have written."""
    t = type(d)
    if t in _PLAIN:
        return d
    if t is list:
        return tuple(_items(d))
    if t is not dict or len(d) != 1:
        raise ValueError(f"not a plan value: {d!r:.60}")
    ((tag, body),) = d.items()
    if type(body) is not list:
        raise ValueError(f"malformed {tag!r} value")
    if tag == "l":
        return list(_items(body))
    if tag == "d":
        return {decode(k): decode(x) for k, x in (_pair(p) for p in body)}
    if tag == "s" and len(body) == 3:
        return slice(*(decode(x) for x in body))
    if tag == "a" and len(body) == 3:
        return array(*body)
    if tag == "n" and len(body) == 2:
        dtype = parse_dtype(body[0])
        return _buffer(body[1], dtype, 1)[0]
    if tag == "c" and len(body) == 2 and body[0] in GEOMETRY and type(body[1]) is list:
        cls, n = GEOMETRY[body[0]], _FIELDS[body[0]]
        if len(body[1]) != n:
            raise ValueError(f"{body[0]} with {len(body[1])} fields, not {n}")
        return cls(*_items(body[1]))
    raise ValueError(f"not a plan value: tag {tag!r:.20}")


def array(dtype: Any, shape: Any, data: Any) -> np.ndarray:
    """A new (writable) array of ``dtype`` text, ``shape`` (a list of ints >= 0) and base64
    ``data``; ``ValueError`` when they do not fit together."""
    dtype = parse_dtype(dtype)
    if type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"not a shape: {shape!r:.40}")
    n = 1
    for s in shape:
        n *= s
    return _buffer(data, dtype, n).reshape(shape).copy()


def _buffer(data: Any, dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` elements of ``dtype`` from base64 ``data``, exactly; ``ValueError`` otherwise."""
    if type(data) is not str:
        raise ValueError("array bytes are not text")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error as e:
        raise ValueError(f"array bytes: {e}") from None
    if len(raw) != count * dtype.itemsize:
        raise ValueError(f"{len(raw)} bytes for {count} elements of {dtype}")
    return np.frombuffer(raw, dtype)


def _items(body: list) -> list:
    """``body``'s items decoded (itself when they are all plain JSON scalars: the common case)."""
    if _PLAIN.issuperset(map(type, body)):
        return body
    return [decode(x) for x in body]


def _pair(p: Any) -> list:
    if type(p) is not list or len(p) != 2:
        raise ValueError("a dict item is not a [key, value] pair")
    return p


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")

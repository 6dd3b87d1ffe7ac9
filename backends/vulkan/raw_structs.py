"""Arrays of Vulkan structs filled a field at a time with NumPy.

A cffi array of ``n`` structs is viewed as an ``n x sizeof`` byte matrix; each field is a
column of it (``columns``), so that one NumPy assignment fills a field of every struct. The
``vulkan`` package's wrappers convert each struct field in Python, and even raw cffi field
assignments cost about 0.1 µs each: PP-OCRv4 rec's 489 descriptor writes (9 fields each)
took about 1 ms on the H200 machine's CPU. Field offsets and sizes come from cffi
(``ffi.offsetof``, ``ffi.sizeof``), i.e. from the Vulkan headers the package was built from.
"""

from __future__ import annotations

import numpy as np

_KINDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def columns(ffi, array, ctype: str, n: int) -> dict[str, np.ndarray]:
    """Writable views, one per field of struct ``ctype``, of the ``n`` structs of the cffi
    array ``array`` (``ffi.new(f"{ctype}[{n}]")``): field name -> 1-D unsigned array of ``n``
    elements (a handle or pointer field is a uint64 holding its address). Only fields of 1,
    2, 4 or 8 bytes are listed (nested structs and fixed arrays are not)."""
    size = ffi.sizeof(ctype)
    raw = np.frombuffer(ffi.buffer(array, size * n), np.uint8).reshape(n, size)
    out = {}
    for name, field in ffi.typeof(ctype).fields:
        width = ffi.sizeof(field.type)
        kind = _KINDS.get(width)
        if kind is not None and field.type.kind in ("primitive", "pointer", "enum"):
            out[name] = raw[:, field.offset : field.offset + width].view(kind)[:, 0]
    return out


def address(ffi, handle) -> int:
    """The address a handle or pointer ``handle`` (a cffi ``cdata``) holds, as an int (the
    value a uint64 column of ``columns`` takes)."""
    return int(ffi.cast("uintptr_t", handle))

"""Reading flatbuffer tables a vtable at a time, for ``mnnpy.model_reader``.

The ``flatbuffers`` package's generated accessors (``mnnpy/schema/model_generated.py``,
used to write files) look each field up through four Python calls; reading PP-OCRv4 det
took 27,500 of them, 20 ms of a 60 ms session creation. ``FlatTable`` reads a table's whole
vtable with one ``struct.unpack_from`` and each field with one more. Layout (FlatBuffers'
"internals" documentation): a table starts with an ``int32`` soffset to its vtable
(``table - soffset``); the vtable is ``uint16`` words: its own size in bytes, the table's
size, then one offset per field in schema order (0 or beyond the vtable's end: absent,
the default applies); an offset field (string, vector, table) holds a ``uint32`` relative
to its own position; a vector or string starts with its ``uint32`` length.

Every position is checked to lie inside the buffer; a position that does not raises
``IndexError`` (with ``struct.error`` from a short read), which the model reader turns
into ``ModelFormatError``.
"""

from __future__ import annotations

import struct

import numpy as np

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")
_WORDS: dict[int, struct.Struct] = {}  # "<nH" by n
_OFFSETS: dict[int, struct.Struct] = {}  # "<nI" by n


def _words(n: int) -> struct.Struct:
    s = _WORDS.get(n)
    if s is None:
        s = _WORDS[n] = struct.Struct(f"<{n}H")
    return s


class FlatTable:
    """A table at byte ``pos`` of ``buf`` (``bytes``/``memoryview``/``mmap`` of ``n`` bytes).

    Fields are addressed by their index in the schema (``model.fbs``: the first field is 0).
    Raises ``IndexError`` for a position outside the buffer."""

    __slots__ = ("buf", "n", "pos", "slots")

    def __init__(self, buf, n: int, pos: int):
        self.buf, self.n, self.pos = buf, n, pos
        self.slots = slots(buf, n, pos)

    def scalar(self, field: int, fmt: struct.Struct, default):
        """Scalar ``field`` read with ``fmt`` (a ``struct.Struct`` of one value), else ``default``."""
        if field >= len(self.slots) or not self.slots[field]:
            return default
        return fmt.unpack_from(self.buf, self.pos + self.slots[field])[0]

    def _target(self, field: int) -> int | None:
        """Position an offset field points at, ``None`` when absent."""
        if field >= len(self.slots) or not self.slots[field]:
            return None
        at = self.pos + self.slots[field]
        to = at + _U32.unpack_from(self.buf, at)[0]
        if to > self.n - 4:
            raise IndexError(f"offset at {at} points outside the buffer ({self.n} bytes)")
        return to

    def string(self, field: int) -> tuple[int, int] | None:
        """``(start, length)`` of string ``field``'s bytes (``None`` when absent); the caller
        copies them (``bytes(buf[start:start + length])``) once it has checked its budget."""
        to = self._target(field)
        return None if to is None else self._span(to)

    def _span(self, to: int) -> tuple[int, int]:
        length = _U32.unpack_from(self.buf, to)[0]
        if to + 4 + length > self.n:
            raise IndexError(f"string at {to} of {length} bytes runs past the buffer ({self.n} bytes)")
        return to + 4, length

    def vector(self, field: int) -> tuple[int, int]:
        """``(start, length)`` of vector ``field``: its elements' position and count (``(0, 0)``
        when absent). The caller bounds ``length`` by the element size."""
        to = self._target(field)
        if to is None:
            return 0, 0
        return to + 4, _U32.unpack_from(self.buf, to)[0]

    def numbers(self, start: int, length: int, dtype: np.dtype) -> np.ndarray:
        """The ``length`` scalars of ``dtype`` at ``start`` (a read-only view of the buffer);
        ``ValueError`` when they run past its end."""
        return np.frombuffer(self.buf, dtype=dtype, count=length, offset=start)

    def positions(self, start: int, length: int) -> list[int]:
        """Where the ``length`` tables of a vector of tables whose elements start at ``start`` are."""
        s = _OFFSETS.get(length)
        if s is None:
            s = struct.Struct(f"<{length}I")
            if length <= 4096:
                _OFFSETS[length] = s
        rel = s.unpack_from(self.buf, start)
        return [start + 4 * k + r for k, r in enumerate(rel)]

    def at(self, pos: int) -> FlatTable:
        """The table at ``pos`` of the same buffer."""
        return FlatTable(self.buf, self.n, pos)

    def strings(self, start: int, length: int) -> list[tuple[int, int]]:
        """``(start, length)`` of each of the ``length`` strings of a vector of strings whose
        elements start at ``start``."""
        out = []
        for k in range(length):
            at = start + 4 * k
            out.append(self._span(at + _U32.unpack_from(self.buf, at)[0]))
        return out


def slots(buf, n: int, pos: int) -> tuple[int, ...]:
    """The field offsets (vtable entries after its two sizes) of the table at ``pos`` of
    ``buf`` (``n`` bytes); ``IndexError`` when the table or its vtable is outside the buffer."""
    if not 0 <= pos <= n - 4:
        raise IndexError(f"table at {pos} outside the buffer ({n} bytes)")
    vt = pos - _I32.unpack_from(buf, pos)[0]
    if not 0 <= vt <= n - 4:
        raise IndexError(f"vtable at {vt} outside the buffer ({n} bytes)")
    size = _U16.unpack_from(buf, vt)[0]
    words = size // 2
    if words < 2 or vt + 2 * words > n:
        raise IndexError(f"vtable at {vt} of {size} bytes does not fit the buffer ({n} bytes)")
    return _words(words).unpack_from(buf, vt)[2:]


def root(buf, n: int) -> FlatTable:
    """The root table of the flatbuffer in ``buf`` (``n`` bytes)."""
    return FlatTable(buf, n, _U32.unpack_from(buf, 0)[0])

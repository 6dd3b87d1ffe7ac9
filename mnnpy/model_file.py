"""``.mnnpy`` files (schema: ``mnnpy/schema/model.fbs``): ``load``, ``save``, ``serialize``.

Layout: a flatbuffer (identifier ``FILE_IDENTIFIER``, ``FORMAT_VERSION``) followed by a
data section; every constant's bytes start at a file offset that is a multiple of
``ALIGN`` bytes, so loading a constant is ``numpy.frombuffer`` on the memory-mapped file
(no copy). ``mnnpy.model_writer`` writes the bytes; ``mnnpy.model_reader`` reads and
validates them (every size, index, dtype, attribute, acyclicity), raising
``ModelFormatError`` naming what is wrong.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading
import time

import numpy as np

from mnnpy import model_memo
from mnnpy.cache_sources import stat_key
from mnnpy.errors import ModelFormatError
from mnnpy.files import atomic_write, open_regular
from mnnpy.ir import Net
from mnnpy.model_reader import ModelReader
from mnnpy.model_writer import write_model

FILE_IDENTIFIER = b"MNPY"
FORMAT_VERSION = 1
ALIGN = 64  # bytes; the file offset of every constant is a multiple of it


def serialize(net: Net) -> bytes:
    """Encode ``net`` as ``.mnnpy`` bytes (constants aligned in the trailing data section).

    Does not validate (``load`` does); raises ``ModelFormatError`` only for an attribute
    value that no attribute type can hold.
    """
    return write_model(net, identifier=FILE_IDENTIFIER, version=FORMAT_VERSION, align=ALIGN)


def save(net: Net, path: str | os.PathLike) -> None:
    """Write ``net`` to ``path`` as an ``.mnnpy`` file, atomically: a temporary file beside it
    renamed over it (``mnnpy.files.atomic_write``), so a process that has the old file loaded
    (memory-mapped) keeps running on it unchanged. Raises as ``serialize`` does, ``OSError``
    when the file cannot be written."""
    atomic_write(path, serialize(net), private=False, devices_in_place=True)


def load(source: str | os.PathLike | bytes | bytearray | memoryview) -> Net:
    """Read and validate a model from a path or bytes; raises ``ModelFormatError``.

    A path is memory-mapped so that constants are zero-copy views of the file. ``bytes``
    (immutable) are viewed in place where their address is 16-byte aligned (CPython's are:
    every constant's element then is); other buffers, which the caller could change later,
    are copied once into a 64-byte aligned buffer that the constants then view. The mapping
    lives as long as the ``Net``: mnnpy replaces files atomically (``save``), but a file
    rewritten in place by another program (``cp new.mnnpy loaded.mnnpy``) changes the mapped
    pages under it (README, "Model files"). Bytes whose SHA-256 equals that of a model read
    twice before in this process are not read again: the ``Net`` is rebuilt from the validated
    skeleton the second read kept (``mnnpy.model_memo``, which says when it waits for the hash).
    """
    key = None
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf, where = _aligned_copy(source), "model bytes"
    else:
        where = os.fspath(source)
        buf, key = _map_file(source, where)
    digest = SourceDigest(buf, key)  # computed on another thread while the model is read
    net = model_memo.lookup(buf, digest)  # the same bytes read before in this process
    if net is None:
        t0 = time.perf_counter()
        net = ModelReader(buf, where, identifier=FILE_IDENTIFIER, version=FORMAT_VERSION, align=ALIGN).read()
        model_memo.remember(net, buf, digest, time.perf_counter() - t0)
    net.source = buf  # the very bytes the constants view (the compilation cache's token hashes them)
    net.source_digest = digest
    return net


class SourceDigest:
    """The SHA-256 of a model's bytes ``buf`` (the default compilation-cache token,
    ``Interpreter.model_token``), computed by a daemon thread started here: hashing releases
    the GIL, so it overlaps with reading the model (PP-OCRv4 det's 4.7 MB: about 2.5 ms;
    ResNet-18's 46.8 MB: about 30). Below ``THREAD_BYTES`` it is computed when asked for.
    ``key``: the mapped file's identity (``cache_sources.stat_key``), None for bytes; the
    compilation cache guesses the token from it while the hash runs (``mnnpy.cache_sources``)."""

    THREAD_BYTES = 1 << 20

    def __init__(self, buf, key: str | None = None):
        self._buf, self._hex, self.key = buf, None, key
        self.seconds: float | None = None  # how long the hash took, once computed
        self._thread = None
        if len(buf) >= self.THREAD_BYTES:
            self._thread = threading.Thread(target=self._compute, name="mnnpy-model-digest", daemon=True)
            self._thread.start()

    def _compute(self) -> None:
        t0 = time.perf_counter()
        self._hex = hashlib.sha256(self._buf).hexdigest()
        self.seconds = time.perf_counter() - t0
        self._buf = None  # kept by a model memo's entry (``mnnpy.model_memo``), this would keep the bytes

    def done(self) -> bool:
        """Whether ``hexdigest`` would return without waiting for the thread."""
        return self._thread is None or not self._thread.is_alive()

    def hexdigest(self) -> str:
        """64 lower-case hex digits (waits for the thread where one runs)."""
        if self._thread is not None:
            self._thread.join()
        if self._hex is None:
            self._compute()
        return self._hex


def _map_file(path: str | os.PathLike, where: str) -> tuple[mmap.mmap | bytes, str]:
    """The file's bytes, memory-mapped read-only (``b""`` for an empty file), and its identity
    as mapped (``cache_sources.stat_key`` of the open descriptor). Only a regular
    file is opened (non-blocking, ``mnnpy.files.open_regular``): a named pipe or a device is a
    ``ModelFormatError`` at once, never a hang."""
    try:
        with open_regular(path) as f:
            st = os.fstat(f.fileno())
            return (mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if st.st_size else b""), stat_key(st)
    except (OSError, ValueError) as e:  # ValueError: a path with a NUL byte
        raise ModelFormatError(f"{where}: cannot read model file: {e}") from e


IN_PLACE_ALIGN = 16  # bytes at this alignment are read in place: every dtype's elements stay aligned


def _aligned_copy(data) -> memoryview:
    """``data`` as a read-only byte view whose constants stay aligned: immutable ``bytes`` at an
    ``IN_PLACE_ALIGN``-aligned address in place (copying 45 MB cost ~50 ms of page faults),
    anything else a copy starting at a 64-byte aligned address."""
    view = memoryview(data)
    if not view.c_contiguous:  # a strided view: its bytes gathered once (cast needs contiguous memory)
        view = memoryview(view.tobytes())
    src = np.frombuffer(view.cast("B"), np.uint8)
    if isinstance(data, bytes) and src.ctypes.data % IN_PLACE_ALIGN == 0:
        return memoryview(data)
    raw = np.empty(src.size + ALIGN, np.uint8)
    skip = (-raw.ctypes.data) % ALIGN
    out = raw[skip : skip + src.size]
    out[:] = src
    out.flags.writeable = False
    return memoryview(out)

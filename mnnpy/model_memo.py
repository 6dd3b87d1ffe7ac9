"""Models read before in this process, rebuilt without reading them again (``model_file.load``).

Reading and validating PP-OCRv4 det's flatbuffer (``ModelReader``: 287 tensors, 132 ops,
about 53,000 Python calls) takes 5 to 20 ms on this project's 2-core machine, a third of a
warm session's creation. Once a model has been read, its validated ``Net`` is kept here as a
skeleton: the ``Net`` pickled in memory, every constant (a view of the model's bytes)
replaced by its offset, dtype and shape. A later load of bytes whose SHA-256 (the model's
``SourceDigest``, computed over the bytes in memory, also the compilation cache's default
token) equals a skeleton's unpickles it (0.9-1.8 ms for det, beside the hash thread: 3.3-3.5 ms
in all against 9-15 for reading) and views the constants in the new bytes: new objects every
time, never shared with an earlier ``Net``. Equal hashes mean equal bytes, so the skeleton is
what reading them would give; a model that failed to read is never kept. A load does not wait
for the hash where no skeleton has its byte length, nor where hashing such bytes took longer
than the read that made the skeleton (ResNet-18: 46.8 MB of constants, 30 ms to hash, 3 ms to
read): those bytes are read again. A skeleton is made on the second read of bytes of a length
seen before (pickling det's costs about 2 ms): a process that reads a model once pays nothing.

At most ``MAX_ENTRIES`` skeletons and ``MAX_BYTES`` bytes of them are kept, the least
recently used dropped first. ``MNNPY_MODEL_MEMO=0`` keeps none.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import threading
from collections import OrderedDict

import numpy as np

from mnnpy.dtypes import STORED
from mnnpy.ir import Net

MAX_ENTRIES = 16
MAX_BYTES = 16 << 20  # of pickled skeletons (det's: 39 KB)
ENV = "MNNPY_MODEL_MEMO"

_lock = threading.Lock()
# id -> (length, digest, skeleton, seconds the read that made it took)
_entries: OrderedDict[int, tuple[int, object, bytes, float]] = OrderedDict()
_seen: OrderedDict[int, None] = OrderedDict()  # byte lengths read, most recent last
_next_id = 0


def enabled() -> bool:
    """Whether skeletons are kept (``MNNPY_MODEL_MEMO`` is not ``0``)."""
    return os.environ.get(ENV, "1") != "0"


def lookup(buf, digest) -> Net | None:
    """A new ``Net`` for model bytes ``buf`` (whose ``model_file.SourceDigest`` is ``digest``)
    from the skeleton of equal bytes read before, else None. Waits for the hash only where a
    skeleton of the same byte length is kept; the most recent such skeleton is unpickled while
    the hash runs and returned only if the hashes then agree."""
    if not enabled():
        return None
    n = len(buf)
    with _lock:
        kept = reversed(_entries.items())
        candidates = [(key, d, blob) for key, (length, d, blob, read_s) in kept if length == n and _worth(d, read_s)]
    if not candidates:
        return None
    key, d, blob = candidates[0]
    net = _Unpickler(io.BytesIO(blob), buf).load()  # beside the hash thread; used only if the hashes agree
    hexdigest = digest.hexdigest()
    for key, d, blob in candidates:
        if d.hexdigest() == hexdigest:
            with _lock:
                if key in _entries:
                    _entries.move_to_end(key)
            return net if blob is candidates[0][2] else _Unpickler(io.BytesIO(blob), buf).load()
    return None


def remember(net: Net, buf, digest, read_s: float) -> None:
    """Keep ``net`` (just read and validated from ``buf`` in ``read_s`` seconds, whose hash
    ``digest`` computes) as a skeleton where bytes of its length were read before (module
    doc). Does not wait for the hash. A ``Net`` that cannot be pickled is not kept."""
    if not enabled():
        return
    with _lock:
        first = len(buf) not in _seen
        _seen[len(buf)] = None
        _seen.move_to_end(len(buf))
        while len(_seen) > 4 * MAX_ENTRIES:
            _seen.popitem(last=False)
    if first:
        return
    try:
        out = io.BytesIO()
        _Pickler(out, buf).dump((net.graphs, net.metadata, net.producer_name, net.producer_version, net.format_version))
    except (pickle.PicklingError, TypeError, AttributeError, ValueError):
        return
    blob = out.getvalue()
    if len(blob) > MAX_BYTES:
        return
    if digest.done():
        digest.hexdigest()  # a small model's hash, computed now (microseconds): the entry then holds no bytes
    global _next_id
    with _lock:
        _next_id += 1
        _entries[_next_id] = (len(buf), digest, blob, read_s)
        while len(_entries) > MAX_ENTRIES or sum(len(e[2]) for e in _entries.values()) > MAX_BYTES:
            _entries.popitem(last=False)


def clear() -> None:
    """Drop every skeleton."""
    with _lock:
        _entries.clear()
        _seen.clear()


def _worth(digest, read_s: float) -> bool:
    """Whether waiting for a hash of these bytes is quicker than reading them: the skeleton's
    own hash (``digest.seconds``, bytes of the same length) took less than the read that made it."""
    return digest.done() and digest.seconds is not None and digest.seconds < read_s


def _base(buf) -> tuple[int, int]:
    """(address, length) of ``buf``'s bytes."""
    view = np.frombuffer(buf, np.uint8)
    return view.__array_interface__["data"][0], view.size


def _const(at: int, dtype: str, shape: tuple) -> np.ndarray:
    """Stands in for a constant in a skeleton; ``_Unpickler`` resolves it to a view of the new bytes."""
    raise pickle.UnpicklingError("a skeleton's constant outside _Unpickler")


class _Pickler(pickle.Pickler):
    """Pickles a ``Net`` with its constants (C-contiguous views of ``buf``) as ``_const(offset,
    dtype, shape)`` and dtypes by name, so that unpickling gives the canonical dtypes. Reducers
    by type (``dispatch_table``): NumPy's builtin types stay on the C pickler's fast paths."""

    def __init__(self, file, buf):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._start, self._n = _base(buf)
        self.dispatch_table = {np.ndarray: self._array, **{type(d): _dtype for d in STORED}}

    def _array(self, a: np.ndarray):
        at = a.__array_interface__["data"][0] - self._start
        if not (a.flags.c_contiguous and 0 <= at and at + a.nbytes <= self._n):
            raise pickle.PicklingError("an array that is not a view of the model's bytes")
        return _const, (at, a.dtype.str, a.shape)


def _dtype(d: np.dtype):
    return np.dtype, (d.str,)


class _Unpickler(pickle.Unpickler):
    """Rebuilds ``_Pickler``'s ``Net`` over the new bytes ``buf`` (equal to the old ones)."""

    def __init__(self, file, buf):
        super().__init__(file)
        self._buf = buf

    def find_class(self, module, name):
        if module == __name__ and name == "_const":
            return self._view
        return super().find_class(module, name)

    def _view(self, at: int, dtype: str, shape: tuple) -> np.ndarray:
        return np.frombuffer(self._buf, dtype=np.dtype(dtype), count=math.prod(shape), offset=at).reshape(shape)

    def load(self) -> Net:  # noqa: D102 (pickle.Unpickler.load, returning the Net)
        graphs, metadata, producer_name, producer_version, format_version = super().load()
        return Net(graphs, metadata, producer_name, producer_version, format_version)

"""Hash-checked cache files shared by the GPU backends: folder choice, file format, atomic writes.

Used by the OpenCL program-binary cache (``backends/opencl/program.py``), its tuning
file, and the Vulkan pipeline cache (``backends/vulkan/pipeline.py``).

Folder (``resolve_directory``): the path in the backend's environment variable
(``$MNNPY_OPENCL_CACHE``, ``$MNNPY_VULKAN_CACHE``), or ``mnnpy.models.cache_dir() /
<subfolder>`` (``$MNNPY_CACHE`` moves that root); a value in ``OFF`` (``0``, ``off``, ...)
turns the disk cache off. A folder that cannot be created disables it with one warning.

Entry format (``pack``/``unpack``), all integers little-endian::

    magic (8 bytes) | format u32 | key length u32 | key (utf-8) | payload length u64
    | sha256(everything before it + payload) (32 bytes) | payload

A reader reads a file's bytes once (``read_limited``, bounded) and checks magic, format,
key, length and hash on those very bytes before the payload is handed to a driver (no
time-of-check/time-of-use gap). The hash detects corruption and accidental edits; it is not
a signature: whoever may write the folder may also write a consistent file (the folder is
the user's own). Writers write a temporary file beside the target and rename it over the
target (``atomic_write``, from ``mnnpy.files``; mode 0600): a reader sees the old file or the new one,
never a partial one. A reader opens a file non-blocking and reads it only when it is a regular
file (``read_limited``): a named pipe or a device in place of an entry is a bad entry, never a hang.
"""

from __future__ import annotations

import hashlib
import os
import struct
import warnings
from pathlib import Path

from mnnpy.files import NotRegularFileError, read_regular
from mnnpy.files import atomic_write as atomic_write  # the writers' atomic replacement (mode 0600)

OFF = ("0", "off", "false", "no", "none")
MAX_FILE = 1 << 28  # bytes (256 MiB): a larger file is not read (no unbounded allocation)
HEAD = struct.Struct("<8sII")  # magic, format, key length
LEN = struct.Struct("<Q")  # payload length in bytes
DIGEST = 32  # bytes of a sha256 digest


def resolve_directory(env: str, subfolder: str, label: str, stacklevel: int = 3) -> Path | None:
    """The cache folder (not created here): ``$env`` if set, else ``cache_dir() / subfolder``.

    None when ``$env`` is one of ``OFF``, or (with a ``RuntimeWarning`` naming ``label``)
    when the mnnpy cache root cannot be created."""
    value = os.environ.get(env, "").strip()
    if value.lower() in OFF:
        return None
    if value:
        return Path(value).expanduser()
    try:
        from mnnpy.models import cache_dir

        return cache_dir() / subfolder
    except Exception as e:  # ModelFetchError: the root cannot be created
        warnings.warn(f"{label} disk cache disabled: {e}", RuntimeWarning, stacklevel=stacklevel)
        return None


def usable_directory(path: Path | None, label: str, stacklevel: int = 3) -> Path | None:
    """``path`` once created, or None (with a ``RuntimeWarning`` naming ``label``) when it cannot be."""
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        warnings.warn(f"{label} disk cache disabled: cannot create {path}: {e}", RuntimeWarning, stacklevel=stacklevel)
        return None
    return path


def read_limited(path: Path, limit: int = MAX_FILE) -> bytes | None:
    """The bytes of ``path`` (one read), None when it does not exist; ValueError past ``limit``
    bytes or when ``path`` is not a regular file (a named pipe, a device: never opened
    blocking, ``mnnpy.files.read_regular``), so that callers treat it as a bad entry."""
    try:
        return read_regular(path, limit)
    except NotRegularFileError as e:
        raise ValueError(str(e)) from None


def pack(magic: bytes, fmt: int, key: str, payload: bytes) -> bytes:
    """The file content for ``key`` and ``payload`` (format in the module docstring)."""
    k = key.encode()
    head = HEAD.pack(magic, fmt, len(k)) + k + LEN.pack(len(payload))
    return head + hashlib.sha256(head + payload).digest() + payload


def unpack(data: bytes, magic: bytes, fmt: int, key: str, *, whole_file_hashed: bool = False, view: bool = False) -> bytes:
    """The payload of ``data`` if it is a valid, non-empty entry for ``key``; else ValueError
    saying what is wrong. ``whole_file_hashed``: the caller has matched the SHA-256 of all of
    ``data`` against a record made when ``pack`` wrote it (the compilation cache's mapping),
    which covers the content hash inside, so that one is not computed again. ``view``: a
    ``memoryview`` of ``data`` (the payload is not copied)."""
    if len(data) < HEAD.size:
        raise ValueError(f"truncated header ({len(data)} bytes)")
    got_magic, got_fmt, klen = HEAD.unpack_from(data)
    if got_magic != magic:
        raise ValueError("bad magic")
    if got_fmt != fmt:
        raise ValueError(f"format {got_fmt}, expected {fmt}")
    k = key.encode()
    end = HEAD.size + klen
    if klen != len(k) or data[HEAD.size : end] != k:
        raise ValueError("entry of another key")
    if len(data) < end + LEN.size + DIGEST:
        raise ValueError("truncated header")
    (plen,) = LEN.unpack_from(data, end)
    start = end + LEN.size + DIGEST
    if plen != len(data) - start:
        raise ValueError(f"payload length {len(data) - start}, header says {plen}")
    payload = memoryview(data)[start:] if view else data[start:]
    if not whole_file_hashed and hashlib.sha256(data[: end + LEN.size] + payload).digest() != data[end + LEN.size : start]:
        raise ValueError("content hash mismatch")
    if not payload:
        raise ValueError("empty payload")
    return payload

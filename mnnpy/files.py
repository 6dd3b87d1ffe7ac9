"""Files mnnpy writes and reads back: atomic replacement, and reads of regular files only.

**Writes** (``atomic_write``): every file a process may have loaded or memory-mapped (model
files from ``model_file.save`` and ``mnnpy convert``, the cached conversions of
``mnnpy.models``, the GPU backends' caches) is written to a temporary file in the target's
folder and renamed over the target (``os.replace``, atomic on POSIX and Windows). A process
that mapped the old file keeps the old inode, whole and unchanged, until it unmaps it; a
reader sees the old file or the new one, never a partial one. Rewriting a file in place
(``open(path, "wb")``, ``cp new loaded``) instead truncates the very pages another process
has mapped: its next access past the new end is ``SIGBUS``, and its constants silently
change where the new bytes differ.

**Reads** (``open_regular``, ``read_regular``): a path is opened non-blocking and checked
to be a regular file (``fstat``) before anything is read, so a named pipe, a device or a
folder where a model or a cache entry is expected is refused at once instead of blocking
``open`` or ``read`` forever (a FIFO without a writer) or reading without end (``/dev/zero``).
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


class NotRegularFileError(OSError):
    """A path names something other than a regular file (a named pipe, a device, a folder)."""


def _kind(mode: int) -> str:
    """What ``st_mode`` names, in words."""
    for test, what in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def open_regular(path: str | os.PathLike):
    """``path`` opened for binary reading (a buffered file object), once ``fstat`` says it is a
    regular file. Opened with ``O_NONBLOCK`` (cleared before returning) so that a named pipe
    without a writer cannot block the ``open``. Raises ``NotRegularFileError`` naming what the
    path is instead, ``FileNotFoundError`` and other ``OSError``s as ``open`` does."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(f"{os.fspath(path)} is {_kind(st.st_mode)}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, limit: int) -> bytes | None:
    """The bytes of the regular file ``path`` (one read of at most ``limit + 1`` bytes); None
    when it does not exist. Raises ``ValueError`` when it holds more than ``limit`` bytes,
    ``NotRegularFileError`` when it is not a regular file, ``OSError`` when unreadable."""
    try:
        f = open_regular(path)
    except FileNotFoundError:
        return None
    with f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data


def atomic_write(path: str | os.PathLike, data: bytes, *, private: bool = True, devices_in_place: bool = False) -> None:
    """Replace ``path`` with a file holding ``data``: written to a temporary file beside it,
    then renamed over it (module docstring). A symbolic link is followed (its target is
    replaced, the link kept) for a file the user names (``private=False``: a model saved over
    a linked model file); a cache's file (``private``) replaces the link itself, so that
    whoever can write into a cache folder cannot point mnnpy's writes at another file (a link
    to ``/dev/zero`` or to a user's file). Permissions: ``private`` gives a new file mode 0600 (caches);
    otherwise a new file gets 0666 less the umask, as ``open`` would, and a replaced regular
    file keeps its mode. ``devices_in_place``: where ``path`` exists and is not a regular file
    (``/dev/stdout``, a named pipe a reader waits on), ``data`` is written into it instead
    (nothing can map those); a named pipe without a reader raises ``OSError`` (ENXIO) at once.
    Raises ``OSError`` (the temporary file is removed)."""
    target = Path(os.path.abspath(path) if private else os.path.realpath(path))
    try:
        st = os.lstat(target) if private else os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and devices_in_place:
        # O_NONBLOCK: a named pipe without a reader is ENXIO at once rather than a blocked open
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600 if private else 0o666)  # the umask applies to 0o666
    try:
        with os.fdopen(fd, "wb") as f:
            if st is not None and stat.S_ISREG(st.st_mode) and not private and hasattr(os, "fchmod"):
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
            f.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

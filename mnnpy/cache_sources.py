"""Which token a model file had: a guess that lets a warm session start before its hash is done.

The compilation cache's default token is the SHA-256 of the model's bytes
(``Interpreter.model_token``). ResNet-18's 46.8 MB take about 27 ms to hash on the H200's
host, more than half of a warm session's creation on Vulkan; the model itself reads in 2 ms.
So the cache folder keeps, in its ``sources`` file, the token last computed for each model
file, keyed by the file's identity when it was mapped (``stat_key``: device, inode, size,
modification and change times in ns). A later process that maps the same file guesses the
token from it and prepares the session with that token's entries while the hash runs on its
thread (``model_file.SourceDigest``); ``CompilationCache`` writes nothing under a guessed
token, and ``GraphRunner.plan_for`` compares the guess with the hash after each plan, before
the plan is used (``CompilationCache.settle``): after a wrong guess (a file rewritten in place
within one change-time tick, an edited ``sources`` file) the cache takes the true token and
the plan is made again. The guess is never trusted: it only picks which entries to read,
and those are verified as always (``mnnpy.compilation_cache``).

File: a ``cache_file.pack`` entry (magic ``MAGIC``, key ``"sources"``) holding JSON
``{stat_key: token}``, at most ``LIMIT`` files (the oldest forgotten first). A missing,
damaged or malformed file is no guess (never an error); it is rewritten under the
folder's lock (``compilation_cache.locked``).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from mnnpy.cache_file import pack, read_limited, unpack
from mnnpy.files import atomic_write

MAGIC, FORMAT, NAME = b"MNNPYSRC", 1, "sources"
LIMIT = 256  # model files remembered per cache folder
_TOKEN = re.compile(r"[0-9a-f]{64}")
_MAX_BYTES = 1 << 20  # a larger sources file is not read (256 keys take about 40 KB)


def stat_key(st: os.stat_result) -> str:
    """The identity of a mapped model file (``os.fstat`` of the descriptor it was mapped
    from): ``"dev:ino:size:mtime_ns:ctime_ns"``. Any write to the file changes its change
    time (set by the kernel, not settable by a program)."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def read_sources(folder: Path) -> dict[str, str]:
    """``{stat_key: token}`` of ``folder``'s sources file; ``{}`` when it is missing, damaged
    or malformed (a guess is only a guess)."""
    try:
        data = read_limited(folder / NAME, _MAX_BYTES)
        if data is None:
            return {}
        table = json.loads(unpack(data, MAGIC, FORMAT, NAME))
    except (ValueError, OSError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, str) and _TOKEN.fullmatch(v)}


def guess(folder: Path, key: str) -> str | None:
    """The token last recorded for the model file ``key`` in ``folder``, or None."""
    return read_sources(folder).get(key)


def remember(folder: Path, key: str, token: str) -> None:
    """Record ``token`` for ``key`` (the caller holds the folder's lock); ``OSError`` when the
    file cannot be written. Nothing is written when it is recorded already."""
    table = read_sources(folder)
    if table.get(key) == token:
        return
    table.pop(key, None)
    table[key] = token  # newest last
    for old in list(table)[: max(0, len(table) - LIMIT)]:
        del table[old]
    atomic_write(folder / NAME, pack(MAGIC, FORMAT, NAME, json.dumps(table).encode()))

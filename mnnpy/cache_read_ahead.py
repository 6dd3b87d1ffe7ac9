"""Reading a compilation cache's entries ahead of their use, on another thread.

A warm session spends part of its creation reading its cache entries and computing their
SHA-256 (PP-OCRv4 det's Winograd weights and plan: about 4 ms of 32 here); both release
the GIL, so a thread can do them while the session's own thread plans and prepares
Executions (Python, holding the GIL). ``ReadAhead`` starts one daemon thread over a
token's entries, plans first, then most recently used first, up to ``BYTES`` in all; ``take(name)`` hands
over the bytes read and their digest (waiting for that entry if the thread is on it), or
``None`` where the entry was not read ahead: the caller reads it itself, and the thread skips
an entry asked for before it got to it. A thread that needs the GIL between its reads gets it
only when the session's thread lets go of it (up to 5 ms, Python's switch interval, while that
thread runs Python): waiting for it cost PP-OCRv4 det's warm resize about 4 ms, where reading
its 5 KB plan and 330 KB Winograd entries on the session's thread takes well under 1 ms. The trust rule
does not change: the digest is computed over the bytes in memory, and those bytes are the
ones used (``CompilationCache.load`` compares it with the mapping's).

A process forked while the thread ran takes nothing from it (the child has no such thread:
it reads its entries itself). ``stop`` (after the first plan's ``flush``) ends the thread after its current entry and
drops what was read but not taken: the read-ahead serves a session's creation, and a later
resize reads the entries it needs.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from mnnpy.cache_file import read_limited

BYTES = 64 << 20  # bytes read ahead at most per session (larger entries are read when used)
PLAN_PREFIX = "plan/"  # entry names of plans (``mnnpy.plan_cache``)


class ReadAhead:
    """The entries ``records`` (name -> mapping record) of the token folder ``folder``,
    read and hashed by a daemon thread, plans first, then the most recently used, up to
    ``BYTES`` in all."""

    def __init__(self, folder: Path, records: dict):
        # plans first (a resize loads its plan before any Execution asks for prepared data), then
        # the most recently used
        order = sorted(records.items(), key=lambda kv: (not kv[0].startswith(PLAN_PREFIX), -float(kv[1].get("used", 0))))
        chosen, total = [], 0
        for name, rec in order:
            size = int(rec.get("size", 0))
            if total + size <= BYTES:
                chosen.append((name, folder / str(rec.get("file"))))
                total += size
        self._pid = os.getpid()  # a forked child has no such thread: it reads for itself
        self._ready = {name: threading.Event() for name, _ in chosen}
        self._got: dict[str, tuple[bytes, str] | None] = {}
        self._lock = threading.Lock()
        self._reading: str | None = None  # the entry the thread is on
        self._claimed: set[str] = set()  # entries the caller reads itself
        self._stopped = False
        self._thread = threading.Thread(target=self._read, args=(chosen,), name="mnnpy-cache-read-ahead", daemon=True)
        self._thread.start()

    def _read(self, chosen: list[tuple[str, Path]]) -> None:
        for name, path in chosen:
            if self._stopped:
                break
            with self._lock:
                if name in self._claimed:
                    continue
                self._reading = name
            try:
                data = read_limited(path)
                got = None if data is None else (data, hashlib.sha256(data).hexdigest())
            except (ValueError, OSError):
                got = None  # the caller reads it again and reports what is wrong
            self._got[name] = got
            self._ready[name].set()
        for event in self._ready.values():  # stopped: whatever was not reached is the caller's to read
            event.set()

    def take(self, name: str) -> tuple[bytes, str] | None:
        """``(bytes, SHA-256 hex of those bytes)`` of entry ``name`` as read ahead (once), or
        ``None`` where it was not, or not yet (the caller reads the file; the thread skips it)."""
        event = self._ready.get(name)
        if event is None or os.getpid() != self._pid:
            return None
        with self._lock:
            if not event.is_set() and self._reading != name:  # not reached yet: the caller's to read
                self._claimed.add(name)
                return None
        event.wait()
        return self._got.pop(name, None)

    def stop(self) -> None:
        """End the thread after its current entry and drop what was read and not taken."""
        self._stopped = True
        self._got.clear()

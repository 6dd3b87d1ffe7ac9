"""``DiskCache``: what the GPU backends' disk caches share (OpenCL program binaries and
work-group tuning, Vulkan pipeline cache): counters, discarding a file that fails its checks,
and one warning when writing fails. File format, folders and atomic writes: ``mnnpy.cache_file``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from mnnpy.log import get_logger

_log = get_logger("cache")


class DiskCache:
    """Base of a disk cache named ``label`` (in warnings). ``stats``: the counters named in
    ``counters`` (``rejected`` among them: files discarded); ``last_rejection``: why the last
    file was discarded (None if none)."""

    def __init__(self, label: str, counters: tuple[str, ...]):
        self.label = label
        self.stats = dict.fromkeys(counters, 0)
        self.last_rejection: str | None = None
        self._warned = False

    def reject(self, path: Path, reason: str) -> None:
        """Count and delete the file at ``path`` that failed a check (``reason``); returns None."""
        self.stats["rejected"] += 1
        self.last_rejection = f"{path.name}: {reason}"
        _log.info("%s: discarded %s: %s", self.label, path, reason)
        try:
            path.unlink()
        except OSError:  # gone already, or another process holds it
            pass

    def write_failed(self, what: str, error: Exception, stacklevel: int = 2) -> None:
        """A ``RuntimeWarning`` that ``what`` could not be written (once per cache); the cache
        goes on in memory. ``stacklevel`` as ``warnings.warn``'s, counted from the caller."""
        if not self._warned:
            self._warned = True
            warnings.warn(f"{self.label}: cannot write {what}: {error}", RuntimeWarning, stacklevel=stacklevel + 1)

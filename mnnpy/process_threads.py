"""Thread pools kept per process: started at their first use and kept for the process's life.

A pool made per resize cost a thread start each time; a pool kept in a module global would
be inherited by a child after ``fork`` without its threads (they do not survive ``fork``), so
the pools are keyed by the process id as well as by name.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor


def threads(name: str, count: int) -> ThreadPoolExecutor:
    """This process's pool ``name`` of ``count`` threads (named ``mnnpy-<name>``), made at the
    first call with that name and count in this process."""
    return _pool(os.getpid(), name, int(count))


@functools.cache
def _pool(pid: int, name: str, count: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(count, thread_name_prefix=f"mnnpy-{name}")

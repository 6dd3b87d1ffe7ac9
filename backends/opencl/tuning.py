"""Work-group size choice for OpenCL launches: the default, or timed candidates (MNN's tuning levels).

Modes (``BackendConfig.tuning``):

- ``"none"``: keep the launch's local size (the kernel's preference or ``default_local``);
  the tuning cache is neither read nor written, so results never depend on what is on disk.
- ``"fast"``: time a handful of candidates (groups of 32..256 items filled from dim 0, a
  squarer split for 2-D and 3-D work, the default).
- ``"wide"``: time every power-of-two local size whose product fits the kernel's limit and
  each dimension the device's limit and its work size rounded up to a power of two.

Each candidate runs on a profiling queue of the Runtime's context (one warm-up, then a few
repetitions; the median of ``end - start``). The default wins unless a candidate is faster
by more than ``MARGIN``. Kernels whose local size is part of their algorithm are never
tuned: those with a ``reqd_work_group_size`` attribute or using local memory (more than
the driver reports for a kernel that declares none).

Results persist in ``tuning.json`` in the OpenCL cache folder (``program.cache_directory``),
keyed by device name, driver and platform version, the launch's ``key`` (file, kernel,
build options) and its work size; the file carries a sha256 of its entries, verified on
load (a file that fails is discarded and the launches re-tuned). A hit applies the stored
local size without timing; a ``"fast"`` result is re-tuned by ``"wide"``, not the reverse.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
import time
from pathlib import Path

from mnnpy.backends.gpu.cache import DiskCache
from mnnpy.backends.opencl.launch import default_local, round_up
from mnnpy.backends.opencl.program import atomic_write, cache_directory, device_identity, read_limited, usable_directory
from mnnpy.log import get_logger

_log = get_logger("cache")

MODES = ("none", "fast", "wide")
FILE = "tuning.json"
FORMAT = 1
MARGIN = 0.03  # a candidate must beat the default by 3% to replace it
REPEATS = {"fast": 3, "wide": 5}
FAST_GROUPS = (32, 64, 128, 256)
MAX_FILE = 1 << 24
PROBE = "__kernel void probe(__global float *x) { x[get_global_id(0)] = 0.0f; }"


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _digest(entries: dict) -> str:
    return hashlib.sha256(json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _valid_entry(e) -> bool:
    return (
        isinstance(e, dict)
        and e.get("mode") in MODES[1:]
        and isinstance(e.get("local"), list)
        and all(isinstance(v, int) and v > 0 for v in e["local"])
    )


def candidates(work, default, limit: int, dim_limits, mode: str) -> list[tuple[int, ...]]:
    """Local sizes to time for a logical global size ``work``: the default first, then the
    mode's candidates that fit ``limit`` (items per group), ``dim_limits`` (per dimension)
    and ``work`` rounded up to a power of two per dimension."""
    caps = [max(1, min(_pow2_at_least(w), int(m))) for w, m in zip(work, dim_limits)]

    def fits(c):
        return all(v <= cap for v, cap in zip(c, caps)) and math.prod(c) <= limit

    out = [tuple(default)]
    if mode == "wide":
        axes = [[1 << i for i in range(cap.bit_length()) if (1 << i) <= cap] for cap in caps]
        pool = itertools.product(*axes)
    else:
        pool = []
        for g in FAST_GROUPS:
            pool.append(default_local(work, limit, g))
            if len(work) >= 2:  # a squarer split of g over dims 0 and 1
                a = 1 << ((g.bit_length() - 1 + 1) // 2)
                pool.append((min(a, caps[0]), max(1, g // a), *([1] * (len(work) - 2))))
    for c in pool:
        c = tuple(int(v) for v in c)
        if c not in out and fits(c):
            out.append(c)
    return out


class Tuner(DiskCache):
    """Picks a launch's local size; ``tune(launch, mode, limit)`` may change ``launch.local``.

    ``stats``: ``hits`` (cache hits applied), ``tuned`` (launches timed), ``timings`` (kernel
    runs timed), ``skipped`` (launches not tunable), ``rejected`` (tuning files discarded);
    ``last_rejection``: why; ``path``: the tuning file, None without a disk cache."""

    def __init__(self, runtime, directory: Path | None | bool = True):
        self.runtime = runtime
        d = usable_directory(cache_directory() if directory is True else directory or None)
        self.path = None if d is None else d / FILE
        self.identity = device_identity(runtime.device)
        super().__init__("OpenCL tuning cache", ("hits", "tuned", "timings", "skipped", "rejected"))
        self._entries: dict | None = None  # loaded lazily
        self._queue = None
        self._base: int | None = None
        self._lock = threading.RLock()

    def tune(self, launch, mode: str, limit: int) -> None:
        """Set ``launch``'s local size for ``mode`` (module docstring) within ``limit`` work items: a cached result, or the
        fastest timed candidate."""
        if mode not in MODES[1:] or not launch.work or not all(launch.work):
            return
        key = f"{self.identity}|{launch.key}|{'x'.join(map(str, launch.work))}"
        with self._lock:
            if not self._tunable(launch):
                self.stats["skipped"] += 1
                return
            dims = self.runtime.device.max_work_item_sizes
            entries = self._load()
            e = entries.get(key)
            if e is not None and len(e["local"]) == len(launch.work) and (e["mode"] == "wide" or mode == "fast"):
                if math.prod(e["local"]) <= limit and all(v <= m for v, m in zip(e["local"], dims)):
                    launch.set_local(e["local"])
                    self.stats["hits"] += 1
                    _log.debug("OpenCL tuning %s %s: hit, local %s", launch.key, launch.work, e["local"])
                    return
            t0 = time.perf_counter()
            cands = candidates(launch.work, launch.local, limit, dims, mode)
            best = self._time(launch, cands, REPEATS[mode]) if len(cands) > 1 else launch.local
            launch.set_local(best)
            ms = (time.perf_counter() - t0) * 1e3
            _log.info(
                "OpenCL tuning %s %s: miss, %d candidates in %.1f ms, local %s", launch.key, launch.work, len(cands), ms, best
            )
            entries[key] = {"local": list(best), "mode": mode}
            self._save(key, entries[key])

    def _tunable(self, launch) -> bool:
        """False when the kernel fixes its group size or uses local memory (its algorithm depends on it)."""
        cl, dev = self.runtime.cl, self.runtime.device
        info = cl.kernel_work_group_info
        try:
            if any(launch.kernel.get_work_group_info(info.COMPILE_WORK_GROUP_SIZE, dev)):
                return False
            return launch.kernel.get_work_group_info(info.LOCAL_MEM_SIZE, dev) <= self._baseline()
        except Exception:  # a driver without these queries: leave the default
            return False

    def _baseline(self) -> int:
        """The local memory a driver reports for a kernel that declares none (NVIDIA: 1 byte, PoCL: 0)."""
        if self._base is None:
            cl = self.runtime.cl
            prg = cl.Program(self.runtime.context, PROBE).build()
            k = cl.Kernel(prg, "probe")
            self._base = int(k.get_work_group_info(cl.kernel_work_group_info.LOCAL_MEM_SIZE, self.runtime.device))
        return self._base

    def _time(self, launch, cands, repeats: int) -> tuple[int, ...]:
        """The fastest candidate (median of ``repeats`` timed runs after one warm-up); the default on a tie."""
        cl = self.runtime.cl
        if self._queue is None:
            props = cl.command_queue_properties.PROFILING_ENABLE
            self._queue = cl.CommandQueue(self.runtime.context, self.runtime.device, properties=props)
        q = self._queue
        self.runtime.queue.finish()  # nothing in flight on the run queues touches the same memory
        if self.runtime.timed_queue is not None:
            self.runtime.timed_queue.finish()
        times = []
        for c in cands:
            glob = tuple(round_up(w, v) for w, v in zip(launch.work, c))
            try:
                cl.enqueue_nd_range_kernel(q, launch.kernel, glob, c).wait()
                runs = []
                for _ in range(repeats):
                    ev = cl.enqueue_nd_range_kernel(q, launch.kernel, glob, c)
                    ev.wait()
                    runs.append(ev.profile.end - ev.profile.start)
                    self.stats["timings"] += 1
            except Exception:  # the driver refuses this local size (resources): not a candidate
                continue
            runs.sort()
            times.append((runs[len(runs) // 2], c))
        q.finish()
        self.stats["tuned"] += 1
        default = tuple(launch.local)
        base = next((t for t, c in times if c == default), None)
        if not times:
            return default
        t, c = min(times)
        return c if base is None or t < base * (1 - MARGIN) else default

    def _load(self) -> dict:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> dict:
        """The verified entries of the tuning file ({} when absent, unusable or tampered: then deleted)."""
        if self.path is None:
            return {}
        try:
            data = read_limited(self.path, MAX_FILE)
            if data is None:
                return {}
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise ValueError("not a tuning file of this format")
            entries = doc.get("entries")
            if not isinstance(entries, dict) or doc.get("sha256") != _digest(entries):
                raise ValueError("content hash mismatch")
            if not all(isinstance(k, str) and _valid_entry(e) for k, e in entries.items()):
                raise ValueError("malformed entry")
            return entries
        except (OSError, ValueError, RecursionError) as e:  # json.JSONDecodeError, UnicodeDecodeError are ValueErrors
            self.reject(self.path, str(e))
            return {}

    def _save(self, key: str, entry: dict) -> None:
        """Merge ``entry`` into the file as it is now on disk (other processes' results kept); atomic."""
        if self.path is None:
            return
        merged = self._read()
        merged.update(self._entries or {})
        merged[key] = entry
        doc = {"format": FORMAT, "sha256": _digest(merged), "entries": merged}
        try:
            atomic_write(self.path, json.dumps(doc, sort_keys=True, indent=1).encode())
        except OSError as e:
            self.write_failed(str(self.path), e, stacklevel=4)

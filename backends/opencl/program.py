"""Built OpenCL programs, cached in memory and as verified device binaries on disk.

Directory: ``mnnpy.models.cache_dir() / "opencl"`` (``$MNNPY_CACHE`` moves the root), or
the path in ``$MNNPY_OPENCL_CACHE``; ``MNNPY_OPENCL_CACHE=0`` (or ``off``) keeps programs in
memory only. One file per key (device name, driver version, platform version, sha256 of
the source, build options), named by the sha256 of the key text. A file is::

    b"MNNPYCLB" | format u32 | key length u32 | key (utf-8) | payload length u64
    | sha256(everything before it + payload) (32 bytes) | payload

    payload = probed u8 (1: a child process built it) | the device binary

``get`` reads a file's bytes once and checks magic, format, key, length and hash on those
very bytes before the payload goes to ``clCreateProgramWithBinary`` (time-of-check/time-of-use
safe). A binary not yet marked probed is first built in a child process (``probe.py``: a
binary the driver crashes on, such as a truncated one, must not take the caller down), then
marked. Any mismatch, a binary the driver will not build (any exception, or the child's
death), or a program without a kernel asked of it (``kernel``: another program's binary)
deletes the file; the program is then built from source and written afresh (temporary
file + ``os.replace``, atomic).
A disk hit refreshes the file's modification time; after each write, files beyond
``MAX_ENTRIES`` are deleted, least recently used first (the folder stays bounded as sources,
options and drivers change). The hash detects corruption and accidental edits; it is not a
signature: whoever may
write the directory may also write a consistent file (the directory is the user's own).
A directory that cannot be created or written disables the disk cache with one warning.

A session with a compilation cache (``create_session(cache_dir=...)``, ``mnnpy.compilation_cache``)
keeps its programs' binaries there instead, as entries ``token_name(file, key)`` of the model's
token (environment: the device identity), with the same payload, probed before it is saved (the
next process loads it without a child process; the cold one pays the probe): the compilation cache checks
the bytes in memory (SHA-256 against its mapping, key, own hash); a probe, build or kernel
failure refuses the entry with a ``RuntimeWarning`` and the rebuilt binary replaces it.
Folder resolution, file format, bounded reads and atomic writes: ``mnnpy.cache_file``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import warnings
from pathlib import Path

from mnnpy import cache_file
from mnnpy.backends.gpu.cache import DiskCache
from mnnpy.cache_file import DIGEST as _DIGEST  # noqa: F401 - the layout, for tests
from mnnpy.cache_file import HEAD as _HEAD  # noqa: F401
from mnnpy.cache_file import LEN as _LEN  # noqa: F401
from mnnpy.cache_file import OFF as OFF
from mnnpy.cache_file import atomic_write  # a module global: tests replace it here
from mnnpy.log import get_logger

_log = get_logger("cache")

CACHE_ENV = "MNNPY_OPENCL_CACHE"
MAGIC = b"MNNPYCLB"
FORMAT = 2  # 2: the payload starts with the probed flag (entries of format 1 are rebuilt)
SUFFIX = ".clbin"
MAX_FILE = cache_file.MAX_FILE  # bytes (256 MiB): a larger file is not read (no unbounded allocation)
MAX_ENTRIES = 1000  # program binaries kept in the folder: beyond it, the least recently used are deleted


def cache_directory() -> Path | None:
    """The OpenCL cache folder (not created here), or None when ``$MNNPY_OPENCL_CACHE`` turns it off.

    Also None, with a warning, when the mnnpy cache root cannot be created."""
    return cache_file.resolve_directory(CACHE_ENV, "opencl", "OpenCL", stacklevel=4)


def usable_directory(path: Path | None) -> Path | None:
    """``path`` once created, or None (with a warning) when it cannot be."""
    return cache_file.usable_directory(path, "OpenCL", stacklevel=4)


def read_limited(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` (one read), None when it does not exist; ValueError past ``limit`` (``MAX_FILE``)."""
    return cache_file.read_limited(path, MAX_FILE if limit is None else limit)


def token_name(file: str, key: str) -> str:
    """The compilation-cache entry name of a program: ``opencl/<file>/<sha256 of key, 24 hex digits>``
    (the key names device, driver, source and options; the entry's environment names the device)."""
    return f"opencl/{file}/{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def device_identity(device) -> str:
    """``name|driver version|platform version``: what a device binary or a tuning result depends on."""
    return f"{device.name}|{device.driver_version}|{device.platform.version}"


def pack(key: str, binary: bytes, probed: bool = False) -> bytes:
    """The file content for ``key`` and a device ``binary`` (format above, ``mnnpy.cache_file``);
    ``probed``: a child process built this binary (``probe.py``), so readers load it directly."""
    return cache_file.pack(MAGIC, FORMAT, key, bytes([probed]) + binary)


def unpack(data: bytes, key: str) -> bytes:
    """The payload of ``data`` if it is a valid entry for ``key``; else ValueError saying what is wrong."""
    return cache_file.unpack(data, MAGIC, FORMAT, key)


class ProgramCache(DiskCache):
    """``get(file, source, options) -> cl.Program``, built once per (source, options) per process
    and reloaded from a verified device binary on disk across processes; ``kernel`` also
    creates one of its kernels.

    ``stats``: ``memory_hits``, ``disk_hits``, ``built`` (from source), ``rejected`` (disk entries
    discarded), ``written``, ``evicted`` (deleted beyond ``MAX_ENTRIES``), ``probed`` (binaries
    built in a child process first); ``last_rejection``: why the last entry was discarded
    (None if none); ``directory``: the disk cache folder, None when off or unusable."""

    def __init__(self, runtime, directory: Path | None | bool = True):
        self.runtime = runtime
        self.directory = usable_directory(cache_directory() if directory is True else directory or None)
        self.identity = device_identity(runtime.device)
        super().__init__(
            "OpenCL program cache", ("memory_hits", "disk_hits", "built", "rejected", "written", "evicted", "probed")
        )
        self._built: dict[tuple[str, tuple[str, ...]], object] = {}
        self._keys: dict[tuple[str, tuple[str, ...]], str] = {}  # (source, options) -> key
        self._from_disk: set[tuple[str, tuple[str, ...]]] = set()  # programs loaded from a binary
        self._prober = None  # probe.Prober, started at the first binary not yet probed
        self._lock = threading.RLock()

    def key(self, source: str, options: list[str]) -> str:
        """The key text: device identity, source sha256, build options (computed once per source and options)."""
        mem = (source, tuple(options))
        key = self._keys.get(mem)
        if key is None:
            key = self._keys[mem] = f"{self.identity}|{hashlib.sha256(source.encode()).hexdigest()}|{' '.join(options)}"
        return key

    def path(self, key: str) -> Path | None:
        """The entry file of ``key`` (None without a disk cache)."""
        if self.directory is None:
            return None
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def get(self, file: str, source: str, options: list[str], cache=None):
        """The built ``cl.Program`` of ``source`` with build ``options`` (``file`` names it in
        warnings): from memory, a verified binary, or built and stored. ``cache``: a session's
        ``CompilationCache`` (``create_session(cache_dir=...)``): binaries are read from and
        written to its entries (``token_name``) instead of this cache's folder, and a program
        found in memory is saved there when the token has no entry for it yet."""
        mem = (source, tuple(options))
        with self._lock:
            prg = self._built.get(mem)
            if prg is not None:
                self.stats["memory_hits"] += 1
                _log.debug("OpenCL program %s %s: memory hit", file, options)
                if cache is not None and token_name(file, key := self.key(source, list(options))) not in cache.records:
                    self._save(cache, file, key, prg, options)
                return prg
            key = self.key(source, list(options))
            t0 = time.perf_counter()
            prg = self._load_token(cache, file, key, options) if cache is not None else self._load_file(key, options)
            if prg is None:
                return self._build(file, source, options, key, cache)
            self._from_disk.add(mem)
            _log.debug("OpenCL program %s %s: disk hit, loaded in %.1f ms", file, options, (time.perf_counter() - t0) * 1e3)
            self._built[mem] = prg
            return prg

    def _build(self, file: str, source: str, options, key: str, cache):
        """The program built from ``source``, kept in memory and saved (``cache``'s entry, or this cache's folder)."""
        t0 = time.perf_counter()
        prg = self.runtime.cl.Program(self.runtime.context, source).build(options=list(options), cache_dir=False)
        self.stats["built"] += 1
        _log.info("OpenCL program %s %s: miss, built in %.1f ms", file, options, (time.perf_counter() - t0) * 1e3)
        self._save(cache, file, key, prg, options)
        self._built[(source, tuple(options))] = prg
        return prg

    def kernel(self, file: str, source: str, options: list[str], name: str, cache=None):
        """A new ``cl.Kernel`` ``name`` of ``get(file, source, options, cache)``. Where a program
        loaded from a binary lacks it (``clCreateKernel`` fails: the entry held another
        program's binary), the entry is discarded (a file deleted; a compilation-cache entry
        replaced, with a ``RuntimeWarning``) and the program built from source, once; a
        program built from source that lacks it raises pyopencl's error as it is."""
        cl = self.runtime.cl
        prg = self.get(file, source, options, cache)
        try:
            return cl.Kernel(prg, name)
        except Exception as e:  # cl.LogicError INVALID_KERNEL_NAME
            mem = (source, tuple(options))
            with self._lock:
                if mem not in self._from_disk:
                    raise
                self._from_disk.discard(mem)
                key = self.key(source, list(options))
                why = f"no kernel '{name}' in the cached binary ({type(e).__name__})"
                if cache is None:
                    self.reject(self.path(key), why)
                else:
                    self._refuse(token_name(file, key), why)
                prg = self._build(file, source, options, key, cache)
            return cl.Kernel(prg, name)

    def _load_file(self, key: str, options: list[str]):
        """The program built from the verified entry file of ``key``, or None (a bad file is deleted)."""
        path = self.path(key)
        if path is None:
            return None
        try:
            data = read_limited(path)
            if data is None:
                return None
            payload = unpack(data, key)
        except (OSError, ValueError) as e:
            return self.reject(path, str(e))
        prg, why, probed = self._from_binary(payload, options)
        if why is not None:
            return self.reject(path, why)
        if probed:
            try:
                atomic_write(path, pack(key, payload[1:], probed=True))
            except OSError:  # read-only folder: probed again next time
                pass
        try:
            os.utime(path)  # recently used: kept by eviction
        except OSError:
            pass
        return prg

    def _load_token(self, cache, file: str, key: str, options: list[str]):
        """The program built from ``cache``'s verified entry for ``key`` (``CompilationCache.load``:
        hash-checked in memory), or None (absent, or refused with a ``RuntimeWarning``)."""
        name = token_name(file, key)
        payload = cache.load(name, self.identity)
        if payload is None:
            return None
        prg, why, probed = self._from_binary(payload, options)
        if why is not None:
            return self._refuse(name, why)
        if probed:
            cache.save(name, self.identity, bytes([1]) + payload[1:])
        return prg

    def _refuse(self, name: str, why: str) -> None:
        """Count and warn that the compilation-cache entry ``name`` was refused (it is replaced when rebuilt)."""
        self.stats["rejected"] += 1
        self.last_rejection = f"{name}: {why}"
        warnings.warn(f"compilation cache entry {name!r} rejected ({why}); rebuilding", RuntimeWarning, 5)

    def _probe(self, binary: bytes, options) -> str | None:
        """None when ``binary`` builds in a child process (``probe.py``), else why not."""
        if self._prober is None:
            from mnnpy.backends.opencl.probe import Prober

            self._prober = Prober(self.runtime)
        self.stats["probed"] += 1
        why = self._prober.check(binary, list(options))
        return None if why is None else f"binary does not build in a child process: {why}"

    def _from_binary(self, payload: bytes, options: list[str]) -> tuple[object | None, str | None, bool]:
        """``(program, None, probed now)`` built from a verified entry's payload (probed flag |
        device binary), or ``(None, why, False)``. A binary not yet probed is first built in a
        child process (``probe.py``)."""
        probed, binary = payload[0], payload[1:]
        if probed != 1:
            why = self._probe(binary, options)
            if why is not None:
                return None, why, False
        try:
            prg = self.runtime.cl.Program(self.runtime.context, [self.runtime.device], [binary]).build(options=list(options))
        except Exception as e:  # cl.Error: the driver refuses the binary
            return None, f"binary does not build: {str(e).splitlines()[0] if str(e) else type(e).__name__}", False
        self.stats["disk_hits"] += 1
        return prg, None, probed != 1

    def _evict(self) -> None:
        """Delete the least recently used entries beyond ``MAX_ENTRIES`` (other processes may
        delete or write files meanwhile: errors are ignored)."""
        entries = []
        for f in self.directory.glob("*" + SUFFIX):
            try:
                entries.append((f.stat().st_mtime, f))
            except OSError:
                pass
        entries.sort()
        for _, f in entries[: max(0, len(entries) - MAX_ENTRIES)]:
            try:
                f.unlink()
                self.stats["evicted"] += 1
            except OSError:
                pass

    def _save(self, cache, file: str, key: str, prg, options) -> None:
        """Save ``prg``'s device binary: as ``cache``'s entry ``token_name(file, key)``, or (no
        ``cache``) as this cache's file of ``key``; nothing without either. For ``cache`` the
        binary is probed first (``_probe``; one that fails is not saved), so that the next
        process, the one a compilation cache is for, loads it without a child process.
        Failures warn once (``write_failed``; the compilation cache warns itself)."""
        if cache is None and self.directory is None:
            return
        try:
            binary = self._binary(prg)
            if not binary:
                return
            if cache is not None:
                why = self._probe(binary, options)
                if why is not None:
                    _log.info("OpenCL program %s %s: not saved: %s", file, options, why)
                    return
                cache.save(token_name(file, key), self.identity, bytes([1]) + binary)
            else:
                atomic_write(self.path(key), pack(key, binary))
                self._evict()
            self.stats["written"] += 1
        except Exception as e:  # OSError (read-only, full disk), or a driver without binaries
            self.write_failed(f"{file} to {self.directory if cache is None else cache.folder}", e, stacklevel=4)

    def _binary(self, prg) -> bytes:
        """``prg``'s device binary (empty where the driver gives none); ValueError for a short one."""
        binaries = prg.get_info(self.runtime.cl.program_info.BINARIES)
        if not binaries or not binaries[0]:
            return b""
        sizes = prg.get_info(self.runtime.cl.program_info.BINARY_SIZES)
        if len(binaries[0]) != sizes[0]:  # a binary shorter than the driver says is not stored
            raise ValueError(f"the driver returned {len(binaries[0])} bytes of a {sizes[0]}-byte binary")
        return bytes(binaries[0])

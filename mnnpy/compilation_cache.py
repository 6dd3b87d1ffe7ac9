"""Compilation cache: prepared artefacts of a model kept on disk under a token (NNAPI's
compilation caching, ``ANeuralNetworksCompilation_setCaching(compilation, cacheDir, token)``).

``Interpreter.create_session(cache_dir=..., cache_token=...)`` opens a ``CompilationCache``;
the token names the model (NNAPI: ``ANEURALNETWORKS_BYTE_SIZE_OF_CACHE_TOKEN``, 32 bytes;
here 32 ``bytes`` or 64 hex digits, default the SHA-256 of the model file's bytes). Backends
ask it for entries by name (``array``/``load``) and give it what they computed (``save``).

What it holds: the CPU backend's Winograd weights (``backends/cpu/prepared.py``), the OpenCL
program binaries (``opencl/...``), the Vulkan pipeline cache (``vulkan/pipeline-cache``), and
the plans of the input shapes sessions resized (``plan/<hash of the key>``, device ``"plan"``:
sizes, schedule and memory layout, ``mnnpy.plan_cache``; the Executions are made again).

Folder layout (``cache_dir``)::

    mapping                  the mapping file: token -> entry name -> file, SHA-256, size (bytes),
                             environment, last use (s since the epoch); JSON inside a
                             hash-checked ``mnnpy.cache_file`` entry
    lock                     ``fcntl.flock`` target: writers hold it exclusively
    sources                  model file identity -> its default token, a guess that lets a warm
                             session start while the model's hash runs (``mnnpy.cache_sources``:
                             compared with the hash after each plan, before the plan is used)
    entries/<token>/<sha>    one entry: a ``cache_file.pack`` file whose key is ``<token>/<name>``,
                             named by the SHA-256 of its bytes (content-addressed)

Trust (NNAPI's rule, "the cache is verified before it is trusted"): an entry's bytes are
read into memory once (``cache_file.read_limited``), their SHA-256 is computed over those
bytes, never over the file, and compared with the mapping's; then ``cache_file.unpack``
checks magic and key (token and name: a file of another token or entry is refused; the
mapping's hash covers the entry's own), and only those in-memory bytes are used (no
time-of-check/time-of-use gap). A session's entries are read and hashed ahead of their use
by another thread (``mnnpy.cache_read_ahead``) under the same rule. A
mismatch, a damaged, truncated or missing file, a damaged mapping, or an entry made for
another environment (mnnpy, NumPy, machine, device or driver): ``RuntimeWarning`` and the
caller recomputes and saves again; nothing is trusted. The hashes catch corruption and
edits, not an attacker who can write the folder (it is the user's own).

Concurrency: files are replaced atomically (``mnnpy.files.atomic_write``); entry files are
never rewritten with other content (their name is their hash), so readers take no lock; a
writer (``flush``) holds ``lock`` exclusively while it re-reads, merges and rewrites the
mapping and evicts. Size cap: ``max_bytes`` (default ``DEFAULT_MAX_BYTES``) over all tokens;
the least recently used entries are evicted first. Last-use times are written at most every
``TOUCH_S`` seconds per entry (``flush``: after a resize, after a plan made at run, at close).
The bookkeeping of one ``CompilationCache`` (shared by a session's lane siblings) is locked.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import platform
import re
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from mnnpy import cache_sources
from mnnpy.cache_file import pack, read_limited, unpack
from mnnpy.cache_read_ahead import ReadAhead
from mnnpy.errors import InputError
from mnnpy.files import atomic_write
from mnnpy.log import get_logger

MAGIC_MAP, MAGIC_ENTRY, FORMAT = b"MNNPYMAP", b"MNNPYENT", 1
_log = get_logger("cache")
DEFAULT_MAX_BYTES = 1 << 30  # bytes (1 GiB) over all tokens of one folder
TOUCH_S = 3600.0  # seconds: a last-use time younger than this is not rewritten
HEX_TOKEN = re.compile(r"[0-9a-f]{64}")
# test hook: called as after_verify(path, data) once an entry's bytes passed every check and
# before they are used (tests change the file on disk there: the bytes in memory stay in use)
after_verify = None


def checked_token(token: str | bytes) -> str:
    """``token`` as 64 lower-case hex digits: 32 ``bytes`` (NNAPI's token size) or 64 hex
    digits; ``InputError`` otherwise."""
    if isinstance(token, (bytes, bytearray)) and len(token) == 32:
        return bytes(token).hex()
    if isinstance(token, str) and HEX_TOKEN.fullmatch(token.lower()):
        return token.lower()
    raise InputError(f"cache_token must be 32 bytes or 64 hex digits (a SHA-256), got {token!r:.80}")


def environment(device: str) -> str:
    """What an entry depends on besides the model: mnnpy, NumPy and Python versions, the
    machine, and ``device`` (a backend's device and driver, e.g. ``"cpu"``)."""
    from mnnpy import __version__

    return f"mnnpy {__version__}; numpy {np.__version__}; python {platform.python_version()}; {platform.machine()}; {device}"


def sample_digest(w: np.ndarray, samples: int) -> str:
    """SHA-256 (hex, first 16 digits) of at most ``samples`` evenly spaced elements of ``w`` and
    its size in bytes: a cheap guard against one token given to two models (NNAPI makes the
    token's uniqueness the caller's promise; this catches a retrained model under an old token,
    not a deliberate collision)."""
    flat = np.asarray(w).reshape(-1)
    step = max(1, flat.size // samples)
    return hashlib.sha256(np.ascontiguousarray(flat[::step]).tobytes() + str(flat.nbytes).encode()).hexdigest()[:16]


def read_mapping(folder: Path) -> dict:
    """The mapping of ``folder`` (token -> name -> record); ``{}`` when absent; ``ValueError``
    saying what is wrong when damaged."""
    data = read_limited(folder / "mapping")
    if data is None:
        return {}
    tokens = json.loads(unpack(data, MAGIC_MAP, FORMAT, "mapping"))
    if not isinstance(tokens, dict) or not all(isinstance(v, dict) for v in tokens.values()):
        raise ValueError("mapping is not token -> entries")
    for token, names in tokens.items():  # names become paths: only hex digits (no "../")
        if not HEX_TOKEN.fullmatch(token) or not all(isinstance(r, dict) for r in names.values()):
            raise ValueError("mapping names a malformed token or record")
        for name, r in names.items():
            if not _good_record(r):
                raise ValueError(f"mapping record {name!r} of token {token[:12]}... is malformed")
    return tokens


def checked_folder(folder: str | os.PathLike) -> Path:
    """``cache_dir`` as a ``Path`` (``~`` expanded); ``InputError`` unless a non-empty path
    without NUL characters (no file system takes them)."""
    if not isinstance(folder, (str, os.PathLike)) or not os.fspath(folder):
        raise InputError(f"cache_dir must be a folder's path (a non-empty str or os.PathLike), got {folder!r}")
    if "\0" in str(os.fspath(folder)):
        raise InputError(f"cache_dir {os.fspath(folder)!r} holds a NUL character")
    return Path(folder).expanduser()


def _good_record(r: dict) -> bool:
    """Whether a mapping record has every field of the type ``save`` writes: ``file`` and
    ``sha256`` 64 hex digits, ``size`` an int >= 0, ``environment`` a str, ``used`` a finite
    number (s since the epoch)."""
    used, size = r.get("used"), r.get("size")
    return (
        all(isinstance(r.get(k), str) and HEX_TOKEN.fullmatch(r[k]) for k in ("file", "sha256"))
        and isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
        and isinstance(r.get("environment"), str)
        and isinstance(used, (int, float))
        and not isinstance(used, bool)
        and math.isfinite(used)
    )


@contextmanager
def locked(folder: Path):
    """``folder/lock`` held exclusively (``fcntl.flock``, released on exit; POSIX, imported here
    so that importing mnnpy does not need it)."""
    import fcntl

    with open(folder / "lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class CompilationCache:
    """The entries of one ``token`` in ``folder`` (module doc). ``InputError`` when ``folder``
    cannot be created or written, or for a malformed token. ``names_model``: set by the
    Interpreter where the token is the SHA-256 of the model's bytes (``create_session``'s
    default), so that it names the model exactly (``mnnpy.plan_cache`` keys graphs by position
    then). ``source``: the model's ``model_file.SourceDigest`` where ``token`` is its default
    one: with ``guessed``, ``token`` is the guess of ``cache_sources`` and nothing is written
    until ``confirmed``; without, the token is recorded for the file at ``flush``
    (``for_model``)."""

    def __init__(
        self,
        folder: str | os.PathLike,
        token: str | bytes,
        max_bytes: int = DEFAULT_MAX_BYTES,
        source=None,
        guessed: bool = False,
    ):
        self.token, self.folder, self.max_bytes = checked_token(token), checked_folder(folder), max_bytes
        try:
            (self.folder / "entries").mkdir(parents=True, exist_ok=True)
            (self.folder / "lock").touch()
        except OSError as e:
            raise InputError(f"cache_dir {self.folder} cannot be used: {e}") from None
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise InputError(f"cache_dir {self.folder} is not writable")
        self.saved: dict[str, dict] = {}  # name -> record, not yet in the mapping file
        self.touched: set[str] = set()
        self.names_model = False
        self._lock = threading.RLock()  # sibling sessions (run lanes) share the cache: one bookkeeper at a time
        self._ahead = None
        self._open(stacklevel=3)
        self._source = source if source is not None and source.key is not None else None
        self._guess = self._source if guessed else None  # compared with the token at confirmed()
        self.wrong = False  # a guessed token that was not the model's: nothing of it is kept

    def _open(self, stacklevel: int) -> None:
        """The records of ``token`` (from the mapping file), their read-ahead, counters at 0."""
        try:
            self.records = read_mapping(self.folder).get(self.token, {})
        except (ValueError, OSError) as e:
            warnings.warn(f"compilation cache {self.folder}: mapping file rejected ({e}); rebuilding", RuntimeWarning, stacklevel)
            self.records = {}
        self.hits = self.misses = 0
        if self._ahead is not None:
            self._ahead.stop()
        self._ahead = ReadAhead(self.folder / "entries" / self.token, self.records) if self.records else None

    @classmethod
    def for_model(cls, folder: str | os.PathLike, source, max_bytes: int = DEFAULT_MAX_BYTES) -> CompilationCache:
        """The cache of the model whose bytes ``source`` (a ``model_file.SourceDigest``) hashes,
        under their SHA-256; while the hash still runs, under the token ``cache_sources`` recorded
        for the same file (``guessed``, to be ``confirmed``), where there is one."""
        if source.key is not None and not source.done():
            token = cache_sources.guess(checked_folder(folder), source.key)
            if token is not None:
                return cls(folder, token, max_bytes, source, guessed=True)
        return cls(folder, source.hexdigest(), max_bytes, source)

    @property
    def guessed(self) -> bool:
        """Whether the token is a guess not yet compared with the model's hash."""
        return self._guess is not None

    def confirmed(self) -> bool:
        """Whether the token is the model's: a guessed one is compared with the model's
        SHA-256 (waiting for it) the first time; False sets ``wrong`` for good."""
        with self._lock:
            if self._guess is not None:
                self.wrong = self._guess.hexdigest() != self.token
                self._guess = None
                if not self.wrong:
                    self._source = None  # the guess came from the sources file: recorded already
            return not self.wrong

    def settle(self) -> bool:
        """Confirm a guessed token (``confirmed``); where it was wrong, the cache takes the
        model's SHA-256 as its token from now on (its records, nothing of the guess kept) and
        False says so: whatever was prepared under the guess (a plan loaded from another
        model's entry) must be prepared again. True otherwise. ``GraphRunner.plan_for`` calls
        it after each plan, before the plan is used or the mapping written."""
        with self._lock:
            if self.confirmed():
                return True
            self.token, self.wrong = self._source.hexdigest(), False
            self.saved.clear()
            self.touched.clear()
            self._open(stacklevel=4)
            _log.info("compilation cache: the token guessed for the model file is not its SHA-256; prepared again under the hash")
            return False

    def load(self, name: str, device: str, view: bool = False) -> bytes | None:
        """The verified payload of entry ``name`` made on ``device`` (``environment``), or None
        (absent, or rejected with a ``RuntimeWarning``: the caller recomputes). ``view``: a
        read-only ``memoryview`` of the bytes read rather than a copy (``cache_file.unpack``)."""
        rec = self.records.get(name) if not self.wrong else None
        if rec is None:
            self.misses += 1
            return None
        path = self.folder / "entries" / self.token / str(rec.get("file"))
        try:
            if rec.get("environment") != environment(device):
                raise ValueError(f"made for another environment ({rec.get('environment')})")
            ahead = self._ahead.take(name) if self._ahead is not None else None
            data, digest = ahead if ahead is not None else (read_limited(path), None)
            if data is None:
                raise ValueError("file missing")
            if (digest or hashlib.sha256(data).hexdigest()) != rec.get("sha256"):
                raise ValueError("SHA-256 differs from the mapping's")
            payload = unpack(data, MAGIC_ENTRY, FORMAT, f"{self.token}/{name}", whole_file_hashed=True, view=view)
        except (ValueError, OSError) as e:
            warnings.warn(f"compilation cache entry {name!r} rejected ({e}); rebuilding", RuntimeWarning, 3)
            self.misses += 1
            return None
        if after_verify is not None:
            after_verify(path, data)
        with self._lock:
            self.hits += 1
            self.touched.add(name)
        return payload

    def save(self, name: str, device: str, payload: bytes) -> None:
        """Write entry ``name`` (atomic); the mapping records it at ``flush``. An ``OSError``
        (a full disk) is a ``RuntimeWarning``: the session works without the entry. Nothing
        is written under a token that is not the model's (``confirmed``)."""
        if not self.confirmed():
            return
        data = pack(MAGIC_ENTRY, FORMAT, f"{self.token}/{name}", payload)
        sha = hashlib.sha256(data).hexdigest()
        try:
            (self.folder / "entries" / self.token).mkdir(parents=True, exist_ok=True)  # also after a `cache clear`
            atomic_write(self.folder / "entries" / self.token / sha, data)
        except OSError as e:
            warnings.warn(f"compilation cache entry {name!r} not saved: {e}", RuntimeWarning, 3)
            return
        record = {"file": sha, "sha256": sha, "size": len(data), "environment": environment(device), "used": time.time()}
        with self._lock:
            self.saved[name] = self.records[name] = record

    def array(self, name: str, device: str, compute) -> np.ndarray:
        """The array of entry ``name`` if a valid one is cached (a read-only view of the bytes
        read), else ``compute()`` (saved)."""
        payload = self.load(name, device, view=True)
        if payload is not None:
            try:
                return npy_view(payload)
            except ValueError as e:  # a payload that passed the hashes but is no array: never made by save
                warnings.warn(f"compilation cache entry {name!r} rejected ({e}); rebuilding", RuntimeWarning, 2)
        value = np.ascontiguousarray(compute())
        buf = io.BytesIO()
        np.save(buf, value, allow_pickle=False)
        self.save(name, device, buf.getvalue())
        return value

    def flush(self) -> None:
        """Record saved entries and last uses in the mapping file (under the lock), then evict
        the least recently used entries past ``max_bytes``. Nothing is written when nothing
        changed and every entry used was used less than ``TOUCH_S`` ago, nor while the token is
        a guess (``GraphRunner.plan_for`` settles it first) or a wrong one. Records
        the model file's token (``cache_sources``) where it is not yet."""
        with self._lock:
            if self._ahead is not None:  # the first plan is made: later resizes read what they need
                self._ahead.stop()
                self._ahead = None
            if self._guess is None and not self.wrong:
                self._flush()

    def _flush(self) -> None:
        now = time.time()
        stale = {n for n in self.touched if now - float(self.records[n].get("used", 0)) > TOUCH_S}
        source = self._source
        if not self.saved and not stale and source is None:
            return
        self._source = None  # recorded (or tried) once; remember writes nothing when it is recorded already
        try:
            with locked(self.folder):
                if source is not None:
                    cache_sources.remember(self.folder, source.key, self.token)
                if not self.saved and not stale:
                    return
                try:
                    tokens = read_mapping(self.folder)
                except ValueError:
                    tokens = {}  # damaged: rebuilt from what this session knows
                mine = tokens.setdefault(self.token, {})
                for n, rec in self.saved.items():  # a replaced entry's old file goes
                    if n in mine and mine[n]["file"] != rec["file"]:
                        (self.folder / "entries" / self.token / mine[n]["file"]).unlink(missing_ok=True)
                mine.update(self.saved)
                for n in stale & mine.keys():
                    mine[n]["used"] = now
                evict(self.folder, tokens, self.max_bytes)
                atomic_write(self.folder / "mapping", pack(MAGIC_MAP, FORMAT, "mapping", json.dumps(tokens).encode()))
        except OSError as e:
            warnings.warn(f"compilation cache {self.folder}: mapping not written: {e}", RuntimeWarning, 2)
        self.saved.clear()
        self.touched.clear()


def npy_view(payload: bytes) -> np.ndarray:
    """The array in ``payload`` (NumPy's ``.npy`` format, as ``np.save`` writes it) as a
    read-only view of those bytes (``np.load`` would copy them); ``ValueError`` when it is not
    one: a bad header, an object dtype, Fortran order or a size that does not match."""
    f = io.BytesIO(payload[:65536])
    version = np.lib.format.read_magic(f)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"npy version {version}")
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    if fortran or dtype.hasobject:
        raise ValueError("not a C-ordered array of numbers")
    count = math.prod(shape)
    if f.tell() + count * dtype.itemsize != len(payload):
        raise ValueError(f"{len(payload) - f.tell()} data bytes for shape {shape} of {dtype}")
    return np.frombuffer(payload, dtype, count, f.tell()).reshape(shape)


def _caches(backends) -> list[CompilationCache]:
    """The compilation caches of ``backends``, each once (sibling backends share one)."""
    return list({id(b.config.cache): b.config.cache for b in backends if b.config.cache is not None}.values())


def settle_caches(backends) -> bool:
    """``settle`` the compilation caches of ``backends`` (each once): False when a guessed
    token was wrong (the plan just made must be made again)."""
    return all([cache.settle() for cache in _caches(backends)])


def flush_caches(backends) -> None:
    """``flush`` the compilation caches of ``backends`` (each once): after each plan made
    (``GraphRunner.plan_for``, at resize or at run) and at a Session's ``close``."""
    for cache in _caches(backends):
        cache.flush()


def evict(folder: Path, tokens: dict, max_bytes: int) -> list[tuple[str, str]]:
    """Remove the least recently used entries of ``tokens`` (in place) and their files until
    their sizes add up to at most ``max_bytes``; the (token, name) pairs removed."""
    entries = sorted((float(r.get("used", 0)), t, n) for t, names in tokens.items() for n, r in names.items())
    total = sum(int(tokens[t][n].get("size", 0)) for _, t, n in entries)
    gone = []
    for _, t, n in entries:
        if total <= max_bytes:
            break
        rec = tokens[t].pop(n)
        total -= int(rec.get("size", 0))
        (folder / "entries" / t / str(rec.get("file"))).unlink(missing_ok=True)
        gone.append((t, n))
    for t in [t for t, names in tokens.items() if not names]:
        del tokens[t]
    return gone

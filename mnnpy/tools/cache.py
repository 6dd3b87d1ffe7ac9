"""``mnnpy cache list|verify|clear [--dir DIR]``: the compilation cache's folder
(``mnnpy.compilation_cache``; default ``<mnnpy cache>/compilation``, ``$MNNPY_CACHE`` moves it).

``list``: per token, its entries with size (bytes) and last use; ``verify``: reads every
entry into memory and checks it as a session would (mapping SHA-256, key, own hash), exit 1
when one is bad; ``clear``: removes the mapping, the model files' tokens (``mnnpy.cache_sources``) and every
entry (under the writers' lock).
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

from mnnpy.cache_file import read_limited, unpack
from mnnpy.compilation_cache import FORMAT, MAGIC_ENTRY, locked, read_mapping
from mnnpy.errors import InputError


def default_dir() -> Path:
    """``<mnnpy cache>/compilation``: where ``mnnpy cache`` looks without ``--dir``."""
    from mnnpy.models import cache_dir

    return cache_dir() / "compilation"


def add_arguments(p) -> None:
    p.add_argument("action", choices=("list", "verify", "clear"))
    p.add_argument(
        "--dir", type=Path, default=None, help="the cache_dir given to create_session (default <mnnpy cache>/compilation)"
    )


def _mapping(folder: Path) -> dict:
    try:
        return read_mapping(folder)
    except (ValueError, OSError) as e:
        raise InputError(f"{folder}/mapping is damaged ({e}); 'mnnpy cache clear --dir {folder}' removes it") from None


def check_entry(folder: Path, token: str, name: str, rec: dict) -> str:
    """'ok' or what is wrong with entry ``name`` of ``token`` (read once, checked in memory)."""
    try:
        data = read_limited(folder / "entries" / token / str(rec.get("file")))
        if data is None:
            return "file missing"
        if hashlib.sha256(data).hexdigest() != rec.get("sha256"):
            return "SHA-256 differs from the mapping's"
        unpack(data, MAGIC_ENTRY, FORMAT, f"{token}/{name}")
    except (ValueError, OSError) as e:
        return str(e)
    return "ok"


def is_cache_folder(folder: Path) -> bool:
    """Whether ``folder`` is a compilation cache's folder: a directory holding the writers'
    ``lock`` file that ``CompilationCache`` creates."""
    return folder.is_dir() and (folder / "lock").is_file()


def run(args) -> int:
    """``mnnpy cache ACTION``: 0, 1 when ``verify`` found a bad entry; ``InputError`` for a
    ``--dir`` that is not a compilation cache's folder (nothing is removed there) and for a
    ``clear`` the file system refuses (a read-only folder)."""
    folder = args.dir if args.dir is not None else default_dir()
    if not is_cache_folder(folder):
        if args.dir is None and not folder.exists():
            print(f"no compilation cache at {folder} yet")
            return 0
        raise InputError(f"{folder} is not a compilation cache folder (no 'lock' file from create_session(cache_dir=...))")
    if args.action == "clear":
        try:
            with locked(folder):
                (folder / "mapping").unlink(missing_ok=True)
                (folder / "sources").unlink(missing_ok=True)
                shutil.rmtree(folder / "entries", ignore_errors=True)
        except OSError as e:
            raise InputError(f"cannot clear {folder}: {e.strerror or e} ({e.filename or folder})") from None
        print(f"cleared {folder}")
        return 0
    tokens = _mapping(folder)
    if not tokens and args.action == "list":
        print(f"{folder}: no entries")
    bad = 0
    for token, names in sorted(tokens.items()):
        print(f"{token}: {len(names)} entries, {sum(int(r.get('size', 0)) for r in names.values())} bytes")
        for name, rec in sorted(names.items()):
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(rec.get("used", 0))))
            state = check_entry(folder, token, name, rec) if args.action == "verify" else ""
            bad += state not in ("", "ok")
            print(f"  {name}  {rec.get('size')} bytes  used {used}  {state}".rstrip())
    if args.action == "verify":
        print(f"{bad} bad entries" if bad else "all entries verified")
    return 1 if bad else 0

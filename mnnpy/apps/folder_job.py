"""A folder of inputs through an app's row class, here or on Ray, one result per input, sorted.

The row class (``mnnpy.apps.ocr_rows.OcrRows``) is made from picklable arguments once per
worker and maps batches ``{"path": (B,) str}`` to ``{"path", "json"}`` (one JSON object per
input). Where it runs:

- here, in this process (``workers=1``), or in ``workers`` processes started by ``spawn``
  (never ``fork``: GPU drivers do not survive it);
- on Ray (``mnnpy.ray.map_rows``): a new local cluster or the running one at ``address``, ``workers``
  actors, one GPU each where the backend is a GPU API and the cluster has GPUs.

Results are sorted by path before they are written, so the same inputs give the same file,
byte for byte, whichever way they ran (given the same backend and thread count per worker).
Every input must come back exactly once (``RuntimeError`` naming the first missing or
repeated one otherwise).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from mnnpy import InputError

_ROWS = None  # the row object of a spawned worker process (``_start_worker``)


def list_inputs(folder: str | os.PathLike, suffixes: tuple[str, ...]) -> list[str]:
    """The files under ``folder`` (recursively) whose suffix (lower case) is in ``suffixes``,
    as sorted paths relative to it; ``InputError`` for a missing folder or one without any, for
    a match that is not a regular file (a dangling link, a pipe) or a name that is not UTF-8."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{folder}: {'not a folder' if root.exists() else 'no such folder'}")
    matches = [p for p in root.rglob("*") if p.suffix.lower() in suffixes and not p.is_dir()]
    odd = sorted(str(p.relative_to(root)) for p in matches if not p.is_file())
    if odd:  # a dangling link, a named pipe, a device: never opened (a pipe would block the job)
        raise InputError(f"{folder}: not regular files: {', '.join(map(repr, odd[:5]))}{' ...' if len(odd) > 5 else ''}")
    found = sorted(p.relative_to(root).as_posix() for p in matches)
    bad = [f for f in found if f != f.encode("utf-8", "surrogateescape").decode("utf-8", "replace")]
    if bad:  # undecodable bytes in a name: no JSON or Parquet string can hold it as it is
        raise InputError(f"{folder}: file names that are not UTF-8, rename them: {', '.join(map(repr, bad[:5]))}")
    if not found:
        raise InputError(f"{folder}: no input files ({', '.join(suffixes)})")
    return found


def _batches(paths: list[str], size: int) -> list[dict]:
    return [{"path": paths[i : i + size]} for i in range(0, len(paths), size)]


def workers_used(workers: int, inputs: int, batch_size: int) -> int:
    """How many of ``workers`` a job of ``inputs`` in batches of ``batch_size`` starts: one per
    batch at most (a worker without a batch would only load the models)."""
    return max(1, min(workers, -(-inputs // batch_size)))


def _start_worker(cls, args, kwargs) -> None:
    global _ROWS
    _ROWS = cls(*args, **kwargs)


def _map_in_worker(batch: dict) -> list[tuple[str, str]]:
    out = _ROWS(batch)
    return list(zip(map(str, out["path"]), map(str, out["json"])))


def run_local(cls, args: tuple, kwargs: dict, paths: list[str], batch_size: int, workers: int, step: Callable) -> dict:
    """``{path: json}`` of ``paths`` through ``cls(*args, **kwargs)``: in this process where
    ``workers`` is 1, else in that many processes started by ``spawn`` (at most one per batch,
    ``workers_used``). ``step(n)`` after each batch of ``n`` results."""
    results: dict[str, str] = {}
    batches = _batches(paths, batch_size)
    workers = workers_used(workers, len(paths), batch_size)
    if workers == 1:
        rows = cls(*args, **kwargs)
        done: Iterable = (list(zip(map(str, out["path"]), map(str, out["json"]))) for out in map(rows, batches))
        return _collect(done, results, step)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker, initargs=(cls, args, kwargs)) as pool:
        return _collect(pool.map(_map_in_worker, batches), results, step)


def run_ray(
    cls, args, kwargs, paths, batch_size: int, workers: int, gpus_per_worker: float, step, address=None, cpus_per_worker=1
) -> dict:
    """As ``run_local``, on Ray (``mnnpy.ray``): the cluster at ``address``, else a new local one;
    ``workers`` actors (at most one per batch, ``workers_used``), each reserving
    ``cpus_per_worker`` CPUs and ``gpus_per_worker`` GPUs."""
    import importlib

    mnnpy_ray = importlib.import_module("mnnpy.ray")  # ImportError (saying what to install) without Ray
    ray = mnnpy_ray.ray

    mnnpy_ray.connect(address)
    ds = ray.data.from_items([{"path": p} for p in paths], override_num_blocks=max(1, -(-len(paths) // batch_size)))
    resources = {
        "workers": workers_used(workers, len(paths), batch_size),
        "gpus_per_worker": gpus_per_worker,
        "cpus_per_worker": cpus_per_worker,
    }
    mapped = mnnpy_ray.map_rows(ds, cls, *args, **resources, batch_size=batch_size, **kwargs)
    done = (
        list(zip(map(str, b["path"]), map(str, b["json"]))) for b in mapped.iter_batches(batch_size=None, batch_format="numpy")
    )
    return _collect(done, {}, step)


def _collect(done: Iterable[list[tuple[str, str]]], results: dict, step: Callable) -> dict:
    """``results`` filled from each batch's ``(path, json)`` pairs; ``RuntimeError`` on a path
    seen twice (a batch run twice and kept twice)."""
    for pairs in done:
        for path, line in pairs:
            if path in results:
                raise RuntimeError(f"{path}: two results came back for one input")
            results[path] = line
        step(len(pairs))
    return results


def checked_results(paths: list[str], results: dict[str, str]) -> list[str]:
    """The JSON lines of ``paths``, sorted by path; ``RuntimeError`` where one is missing or extra."""
    missing, extra = sorted(set(paths) - set(results)), sorted(set(results) - set(paths))
    if missing or extra:
        raise RuntimeError(f"results missing for {missing[:3]} ({len(missing)}), unexpected for {extra[:3]} ({len(extra)})")
    return [results[p] for p in sorted(paths)]


def write_results(lines: list[str], out: str | os.PathLike, types: Mapping[str, str] | None = None) -> None:
    """Write the JSON ``lines`` to ``out``: JSON Lines (``.jsonl``, ``.json``: one object per
    line) or Parquet (``.parquet``: one column per key, lists and objects as JSON text; needs
    pyarrow). ``types``: column -> Arrow type name (``"string"``, ``"float64"``, ``"int64"``),
    so that a column's type does not depend on which rows failed; ``error`` is always a
    nullable string (null where the input ran), in both formats. ``InputError`` for another
    suffix, a folder that cannot be written or no pyarrow."""
    suffix = Path(out).suffix.lower()
    if suffix in (".jsonl", ".json"):
        data = "".join(line + "\n" for line in lines).encode()
    elif suffix == ".parquet":
        data = _parquet_bytes(lines, {**(types or {}), "error": "string"})
    else:
        raise InputError(f"--out {out}: give a .jsonl or .parquet file")
    tmp = Path(f"{out}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, out)  # readers see the old file or the whole new one
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError(f"--out {out}: cannot write: {e.strerror or e}") from None


def _parquet_bytes(lines: list[str], types: Mapping[str, str]) -> bytes:
    """The records as a Parquet file: a column per key (in the first record's order), of the
    Arrow type ``types`` names where it names one (else as pyarrow infers it)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError("Parquet output needs pyarrow: pip install pyarrow (or mnnpy[ray])") from None
    records = [json.loads(line) for line in lines]
    keys = list(records[0]) if records else []
    columns = {k: [v if not isinstance(v, (list, dict)) else json.dumps(v) for v in (r.get(k) for r in records)] for k in keys}
    arrays = {k: pa.array(v, type=getattr(pa, types[k])() if k in types else None) for k, v in columns.items()}
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays), sink)
    return sink.getvalue().to_pybytes()

"""Plans in the compilation cache: a session whose ``cache_dir`` holds the plan for the same
graph, inputs, backends and options loads it instead of computing it again (``PlanStore``,
used by ``Planner.plan`` when the session has a ``mnnpy.compilation_cache.CompilationCache``).

An entry holds what ``Planner.plan`` computes before any Execution exists, as data:

- ``sizes``: the SizeComputer's ``SizeResult`` less what the graph and the call give again:
  shapes and dtypes of the tensors it inferred, the values it folded (not the graph's
  constants, not the value inputs given), each op's geometry and MFLOPs, the run-time ops,
  ``barrier`` and ``dynamic``;
- ``charges``: what the SizeComputer charged to the plan's memory budget (``PlanCharge.recording``:
  Resize's coordinate tables, the scratch of ops evaluated at resize);
- ``schedule``: the ``Schedule`` (a backend per op, partitions, border copies, reasons);
- ``layouts``: per backend its ``memory_planner.Layout`` (arena bytes, every tensor's offset).

Executions are still created and ``on_resize``d (they own device and kernel state), and the
arenas charged and allocated, exactly as for a plan computed.

Entry name ``plan/<SHA-256 of the key>``; the key (canonical JSON) holds ``FORMAT``;
``rules_digest`` (the sources of the shape functions and planner, for a source tree edited
without a new version); the graph: its position in the model where the token is the SHA-256 of the model's bytes (the
default token names the model exactly), else ``graph_digest`` (ops, attributes, tensors and a
sample of every constant: another model or another body under the same token is another
key); the segment start; each input's shape and dtype; the SHA-256 of each value input's
contents (``size_computer.value_inputs``; a sequence element by element); each backend's
``backend_identity`` (name, class, device and driver, precision, threads, tuning); and
``repr`` of AUTO's placer (preference, candidates and their capabilities). The entry's
environment (``compilation_cache.environment``) adds the mnnpy, NumPy and Python versions
and the machine.

Payload: UTF-8 JSON; values through ``mnnpy.plan_codec`` (an allow-list of types; arrays as
dtype, shape and base64 bytes; never pickle). A plan holding anything else is not cached.

Trust: ``CompilationCache.load`` checks the bytes first; a payload that then does not decode
(JSON, a codec value, an index out of range, a tensor past its arena, a schedule that does
not cover the run-time ops) is rejected with a ``RuntimeWarning`` and the plan is computed and
saved again. Limits: every tensor of a loaded plan is checked against this session's memory
limit (``limits.check_tensor``) and the recorded charges are made again, so a session with a
smaller limit refuses a cached plan as it refuses to compute it (``ShapeError``; where several
sizes pass the limit, the message may name another one than the computation would).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import warnings
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from mnnpy import limits
from mnnpy.compilation_cache import sample_digest
from mnnpy.ir import Graph
from mnnpy.log import get_logger
from mnnpy.memory_planner import Layout, MemoryPlan
from mnnpy.plan_codec import Unencodable, decode, dtype_text, encode, parse_dtype
from mnnpy.schedule import Partition, Schedule
from mnnpy.size_computer import SizeResult, graph_constants

_log = get_logger("planner")

FORMAT = 1  # of the payload; part of the key
DEVICE = "plan"  # the environment's device part: backends and devices are in the key
SAMPLE = 256  # elements of each constant hashed into the graph digest
DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError)
_DIGESTS: dict[int, tuple[weakref.ref, str]] = {}  # id(graph) -> (graph, digest)
_INT = frozenset((int,))

Found = tuple[SizeResult, Schedule, list[Layout]]


class PlanStore:
    """The plans of ``graph`` on ``backends`` (AUTO's ``placer``, if any) in ``cache``, a
    ``CompilationCache`` (module docstring); ``index``: the graph's position in its ``Net``,
    which names it where the cache's token is the SHA-256 of the model's bytes
    (``CompilationCache.names_model``), else (or for ``None``) its ``graph_digest``.

    Counters: ``hits`` (plans loaded), ``misses`` (none valid: absent, or refused by the
    cache's checks), ``rejected`` (verified but not decodable, with a ``RuntimeWarning``),
    ``unencodable`` (not saved: a value outside the allow-list)."""

    def __init__(self, cache, graph: Graph, backends: list, placer=None, index: int | None = None):
        self.cache, self.graph, self.backends, self.placer, self.index = cache, graph, backends, placer, index
        self._context: dict | None = None  # the key's parts that do not change per plan (made at first use)
        self.hits = self.misses = self.rejected = self.unencodable = 0

    def name(self, shapes: dict[int, tuple], values: dict | None, start: int, dtypes: dict | None) -> str:
        """The entry name of the plan from op ``start`` for inputs ``shapes`` (tensor -> shape),
        value inputs' contents ``values`` and input ``dtypes`` (the declared one where absent)."""
        if self._context is None:
            self._context = {
                "format": FORMAT,
                "rules": rules_digest(),
                "graph": self._graph_key(),
                "backends": [backend_identity(b) for b in self.backends],
                "placer": None if self.placer is None else repr(self.placer),
            }
        g, dtypes = self.graph, dtypes or {}
        inputs = [[t, [int(d) for d in s], np.dtype(dtypes.get(t, g.tensors[t].dtype)).str] for t, s in sorted(shapes.items())]
        contents = [[t, _content(v)] for t, v in sorted((values or {}).items())]
        key = dict(self._context, start=start, inputs=inputs, values=contents)
        return "plan/" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()

    def _graph_key(self) -> str:
        """The graph's part of the key: its position in the model the token names byte for byte,
        else its ``graph_digest``."""
        if self.index is not None and getattr(self.cache, "names_model", False):
            return f"graph {self.index} of the model"
        return graph_digest(self.graph)

    def load(self, name: str, shapes: dict[int, tuple], values: dict | None) -> Found | None:
        """``(sizes, schedule, layouts)`` of entry ``name`` for these inputs, its sizes checked
        and its charges made again within the current plan's limit; ``None`` when there is none
        valid (then the caller computes and ``save`` s it). Raises ``ShapeError`` (limits: the
        entry still counts as a hit)."""
        payload = self.cache.load(name, DEVICE)
        if payload is None:
            self.misses += 1
            return None
        try:
            entry = json.loads(payload)
            found = decode_plan(self.graph, len(self.backends), entry, values or {})
            charges = [_charge(c) for c in entry["charges"]]
        except DECODE_ERRORS as e:
            warnings.warn(f"compilation cache entry {name!r} rejected (no plan: {e}); rebuilding", RuntimeWarning, 3)
            self.rejected += 1
            return None
        self.hits += 1
        check_limits(found[0], set(shapes), charges)
        return found

    def save(self, name: str, sizes: SizeResult, schedule: Schedule, layouts: list[Layout], charges: list, values) -> None:
        """Save the plan computed for entry ``name`` (``values``: the value inputs given, left
        out); a plan with a value outside the allow-list is not saved (``unencodable``)."""
        try:
            entry = encode_plan(sizes, schedule, layouts, values or {})
            entry["charges"] = [[int(n), what, backend] for n, what, backend in charges]
            payload = json.dumps(entry, separators=(",", ":")).encode()
        except (Unencodable, TypeError, ValueError) as e:  # Unencodable, or what JSON cannot write
            self.unencodable += 1
            _log.debug("plan of graph '%s' not cached: it holds a %s", self.graph.name, e)
            return
        self.cache.save(name, DEVICE, payload)


@functools.lru_cache(maxsize=1)
def rules_digest() -> str:
    """SHA-256 (hex, 16 digits) of the sources whose rules make a plan (the op schemas' shape
    functions, the SizeComputer, Schedule, memory planner, planner and this codec): a plan made
    by other rules is another key, also where mnnpy's version did not change (a source tree
    being edited). Read once per process (about 1 ms)."""
    root = Path(__file__).resolve().parent
    files = sorted((root / "ops").glob("*.py")) + [
        root / f"{n}.py" for n in ("size_computer", "schedule", "memory_planner", "planner", "plan_cache", "plan_codec")
    ]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def graph_digest(graph: Graph) -> str:
    """SHA-256 (hex) of what a plan of ``graph`` reads from it: each op's type, tensors and
    resolved attributes, each tensor's name, dtype, declared shape and kind, and each
    constant's dtype, shape, size and ``SAMPLE`` evenly spaced elements. Computed once per
    graph object (PP-OCRv4 det: about 1 ms; only where the token is the caller's)."""
    hit = _DIGESTS.get(id(graph))
    if hit is not None and hit[0]() is graph:
        return hit[1]
    h = hashlib.sha256()
    for op in graph.ops:
        attrs = repr(op.resolved if op.resolved is not None else op.attrs)
        if "array(" in attrs:  # repr shortens large arrays: by dtype, shape and a sample instead
            attrs = _text(op.resolved if op.resolved is not None else op.attrs)
        h.update(f"{op.type}|{op.inputs}|{op.outputs}|{attrs}\n".encode())
    h.update(repr([(t.name, np.dtype(t.dtype).str, t.shape, t.kind) for t in graph.tensors]).encode())
    for t in graph.tensors:
        if t.data is not None:
            flat = t.data.reshape(-1)
            h.update(f"{t.data.dtype.str}{t.data.shape}".encode() + flat[:: max(1, flat.size // SAMPLE)].tobytes())
    h.update(f"inputs {graph.inputs} outputs {graph.outputs}".encode())
    digest, key = h.hexdigest(), id(graph)
    _DIGESTS[key] = (weakref.ref(graph, lambda _: _DIGESTS.pop(key, None)), digest)
    return digest


def backend_identity(backend) -> str:
    """What a plan on ``backend`` depends on besides the graph and the inputs: its name and
    class, its Runtime's device and driver (``Runtime.identity``) and the session options
    precision, threads and tuning."""
    c, runtime = backend.config, getattr(backend, "runtime", None)
    device = runtime.identity() if hasattr(runtime, "identity") else type(runtime).__name__
    kind = f"{type(backend).__module__}.{type(backend).__qualname__}"
    return f"{backend.name}|{kind}|{device}|precision {c.precision}|threads {c.num_threads}|tuning {c.tuning}"


def encode_plan(sizes: SizeResult, schedule: Schedule, layouts: list[Layout], given: dict) -> dict:
    """The JSON-ready entry of a plan (module docstring; ``charges`` added by the caller);
    ``given``: the value inputs, left out. Raises ``Unencodable``."""
    tensors = sizes.graph.tensors
    own = [t for t in sizes.shapes if tensors[t].data is None]
    return {
        "shapes": [[t, list(sizes.shapes[t])] for t in own],
        "dtypes": [[t, dtype_text(d)] for t, d in sizes.dtypes.items() if tensors[t].data is None],
        "values": [[t, encode(v)] for t, v in sizes.values.items() if tensors[t].data is None and t not in given],
        "geometry": [[i, [[k, encode(v)] for k, v in geo.items()]] for i, geo in sizes.geometry.items()],
        "mflops": [[i, encode(f)] for i, f in sizes.mflops.items()],
        "runtime_ops": list(sizes.runtime_ops),
        "barrier": sizes.barrier,
        "dynamic": sizes.dynamic,
        "schedule": {
            "names": list(schedule.backend_names),
            "backend_of": list(schedule.backend_of.items()),
            "partitions": [[p.backend, p.ops, p.copies_in] for p in schedule.partitions],
            "fallback": list(schedule.fallback_reasons.items()),
            "placement": list(schedule.placement_reasons.items()),
            "home": list(schedule.home.items()),
        },
        "layouts": [
            {
                "arena": lay.memory.arena_bytes,
                "offsets": list(lay.memory.offsets.items()),
                "placed": lay.placed,
                "constants": lay.constants,
            }
            for lay in layouts
        ],
    }


def decode_plan(graph: Graph, backends: int, entry: dict, given: dict) -> Found:
    """``(sizes, schedule, layouts)`` of ``encode_plan``'s ``entry`` for ``graph`` on
    ``backends`` backends; ``given``: the value inputs. Raises one of ``DECODE_ERRORS`` for an
    entry it cannot have made (module docstring)."""
    n_t, n_op = len(graph.tensors), len(graph.ops)
    r = graph_constants(graph)
    ts, shapes = _pairs(entry["shapes"], n_t)
    r.shapes.update(zip(ts, map(_shape, shapes)))
    ts, dtypes = _pairs(entry["dtypes"], n_t)
    r.dtypes.update(zip(ts, map(parse_dtype, dtypes)))
    r.values.update(given)
    ts, values = _pairs(entry["values"], n_t)
    r.values.update(zip(ts, map(decode, values)))
    ops, geometry = _pairs(entry["geometry"], n_op)
    r.geometry = {i: {_str(k): decode(v) for k, v in geo} for i, geo in zip(ops, geometry)}
    ops, mflops = _pairs(entry["mflops"], n_op)
    r.mflops = dict(zip(ops, map(decode, mflops)))
    r.runtime_ops = _indices(entry["runtime_ops"], n_op)
    r.barrier = None if entry["barrier"] is None else _indices([entry["barrier"]], n_op + 1)[0]
    r.dynamic = None if entry["dynamic"] is None else _indices([entry["dynamic"]], n_op)[0]
    _check_sizes(r)
    schedule = _schedule(entry["schedule"], r, backends)
    layouts = [_layout(d, r) for d in entry["layouts"]]
    if len(layouts) != backends:
        raise ValueError(f"{len(layouts)} memory layouts for {backends} backends")
    return r, schedule, layouts


def check_limits(sizes: SizeResult, inputs: set[int], charges: list[tuple[int, str, str | None]]) -> None:
    """What ``compute_sizes`` enforces, for a loaded plan: every tensor it inferred within the
    current plan's memory limit (``limits.check_tensor``; ``inputs``: the plan's input tensors,
    named as such), then the recorded ``charges`` made again (``limits.charge``). Raises
    ``ShapeError``."""
    g, limit, producers = sizes.graph, limits.current_limit(), None
    for t, shape in sizes.shapes.items():
        if g.tensors[t].data is not None:
            continue
        dtype = sizes.dtypes[t]
        if len(shape) <= limits.MAX_RANK and 0 not in shape and math.prod(shape) * dtype.itemsize <= limit:
            continue  # the common case, without building the message
        if t in inputs:
            where = f"input '{g.tensors[t].name}'"
        else:
            producers = producers or g.producers()
            op = g.ops[producers[t]]
            where = f"{op.type} '{op.name}' with input shapes {[sizes.shapes.get(x) if x >= 0 else None for x in op.inputs]}"
        limits.check_tensor(shape, dtype, where)
    for nbytes, what, backend in charges:
        limits.charge(nbytes, what, backend)


def _check_sizes(r: SizeResult) -> None:
    """``ValueError`` unless every shaped tensor has a dtype, every tensor of a run-time op a
    shape, and every value of an array its tensor's shape."""
    if not r.shapes.keys() <= r.dtypes.keys():
        raise ValueError("a tensor with a shape and no dtype")
    ops = r.graph.ops
    if not {t for i in r.runtime_ops for t in (*ops[i].inputs, *ops[i].outputs) if t >= 0} <= r.shapes.keys():
        raise ValueError("a run-time op has a tensor without a shape")
    for t, v in r.values.items():
        if isinstance(v, np.ndarray) and t in r.shapes and v.shape != r.shapes[t]:
            raise ValueError(f"tensor {t}: value of shape {v.shape}, not {r.shapes[t]}")


def _schedule(d: dict, r: SizeResult, backends: int) -> Schedule:
    """The ``Schedule`` of ``encode_plan``'s ``d``, checked against ``r``'s run-time ops."""
    n_t, n_op = len(r.graph.tensors), len(r.graph.ops)
    names = [_str(n) for n in d["names"]]
    if len(names) != backends:
        raise ValueError(f"a schedule of {len(names)} backends, not {backends}")
    s = Schedule(names)
    ops, on = _pairs(d["backend_of"], n_op)
    s.backend_of = dict(zip(ops, _indices(on, backends)))
    s.partitions = [
        Partition(_indices([b], backends)[0], _indices(part, n_op), _indices(copies, n_t)) for b, part, copies in d["partitions"]
    ]
    ops, why = _pairs(d["fallback"], n_op)
    s.fallback_reasons = dict(zip(ops, map(_str, why)))
    ops, why = _pairs(d["placement"], n_op)
    s.placement_reasons = dict(zip(ops, map(_str, why)))
    ts, on = _pairs(d["home"], n_t)
    s.home = dict(zip(ts, _indices(on, backends)))
    if [i for p in s.partitions for i in p.ops] != r.runtime_ops or s.backend_of.keys() != set(r.runtime_ops):
        raise ValueError("the schedule does not cover the run-time ops")
    return s


def _layout(d: dict, r: SizeResult) -> Layout:
    """A ``Layout`` of ``encode_plan``'s ``d``: every placed tensor inside its arena."""
    n_t, arena = len(r.graph.tensors), _count(d["arena"])
    roots, at = _pairs(d["offsets"], n_t)
    ts, offsets = _pairs(d["placed"], n_t)
    _indices(at, arena + 1)
    _indices(offsets, arena + 1)
    for t, o in zip(ts, offsets):
        if t not in r.shapes or o + math.prod(r.shapes[t]) * r.dtypes[t].itemsize > arena:
            raise ValueError(f"tensor {t} at offset {o} passes the arena's {arena} bytes")
    constants = _indices(d["constants"], n_t)
    if not all(t in r.values for t in constants):
        raise ValueError("a constant without a value")
    return Layout(MemoryPlan(dict(zip(roots, at)), arena), list(zip(ts, offsets)), constants)


def _content(v: Any) -> list:
    """A value input's contents as key data: dtype, shape and SHA-256 of its bytes (a sequence:
    each element's)."""
    if isinstance(v, list):
        return ["seq", *(_content(e) for e in v)]
    a = np.ascontiguousarray(v)
    return [a.dtype.str, list(a.shape), hashlib.sha256(a.tobytes()).hexdigest()]


def _text(v: Any) -> str:
    """Attribute values as digest text: arrays by dtype, shape and a sample (``repr`` shortens
    large ones), containers element by element, the rest by ``repr``."""
    if isinstance(v, np.ndarray):
        return f"array({v.dtype.str},{v.shape},{sample_digest(v, SAMPLE)})"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__}({','.join(_text(x) for x in v)})"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k!r}:{_text(x)}" for k, x in v.items()) + "}"
    return repr(v)


def _charge(c: Any) -> tuple[int, str, str | None]:
    nbytes, what, backend = c
    if backend is not None:
        backend = _str(backend)
    return _count(nbytes), _str(what), backend


def _pairs(items: Any, n: int) -> tuple[list[int], list]:
    """``[[index, value], ...]`` as (indices, each in ``range(n)``; values)."""
    if type(items) is not list:
        raise ValueError("not a list of pairs")
    if not items:
        return [], []
    keys, values = zip(*items)  # ValueError where an item is not a pair
    return _indices(keys, n), list(values)


def _indices(seq: Any, n: int) -> list[int]:
    """``seq`` as a list of ints in ``range(n)``; ``ValueError`` otherwise (bools too)."""
    seq = list(seq)
    if not _INT.issuperset(map(type, seq)) or (seq and (min(seq) < 0 or max(seq) >= n)):
        raise ValueError(f"an index out of range({n}) or not an int")
    return seq


def _count(n: Any) -> int:
    if type(n) is not int or n < 0:
        raise ValueError(f"not a byte count: {n!r:.20}")
    return n


def _shape(s: Any) -> tuple[int, ...]:
    if type(s) is not list or not _INT.issuperset(map(type, s)) or (s and min(s) < 0):
        raise ValueError(f"not a shape: {s!r:.40}")
    return tuple(s)


def _str(s: Any) -> str:
    if type(s) is not str:
        raise ValueError(f"not text: {s!r:.20}")
    return s

"""Limits before memory: every size a model can ask for is checked here before it is taken.

A session has a **memory limit** (``create_session(memory_limit=...)``, bytes; by default
``DEFAULT_FRACTION`` of the memory available when it is created, ``available_bytes``). Its
``MemoryBudget`` keeps the limit and the bytes its live plans hold; a plan being made is a
``PlanCharge`` on it, and every allocation a resize makes is charged to it first: each
tensor's bytes (the SizeComputer, ``check_tensor``), every backend's arena and constant
copies (the planner), the Executions' scratch and workspaces (``charge``: the CPU's
``scratch``, the GPU backends' scratch and staging), Loop and Scan outputs (``check``).
Beyond the limit: ``ShapeError`` naming the op, its shapes and the bytes asked for, before
anything is allocated.

Arithmetic is on Python integers (exact: a product of dims cannot wrap as NumPy's int64
does). Ranks are capped at ``MAX_RANK`` (NumPy's), and the product of a tensor's non-zero
dims at ``MAX_EXTENT`` bytes (NumPy refuses larger arrays even when they are empty).

The budget of the plan being made reaches code that has no session at hand (an Execution's
``on_resize``, a shape function) through a context variable (``planning``); outside any
plan (the converter's constant folding) ``charge`` checks one allocation against the
default limit.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import math
import numbers
import os
import threading
import weakref
from collections.abc import Callable, Iterator

import numpy as np

from mnnpy.errors import InputError, ShapeError

MAX_RANK = 64  # NumPy's largest ndim (numpy.ndarray); ONNX sets none
MAX_EXTENT = 2**63 - 1  # bytes: NumPy's bound on the product of the non-zero dims times the item size
DEFAULT_FRACTION = 0.75  # of the memory available now: a session's default memory limit


def _physical_bytes() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


PHYSICAL_BYTES = _physical_bytes()  # bytes of physical memory (2^62 where the OS does not say)


def available_bytes() -> int:
    """Bytes of memory available now without swapping: Linux's ``MemAvailable``
    (``/proc/meminfo``, kB), else free pages (``os.sysconf``), else ``PHYSICAL_BYTES``."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return PHYSICAL_BYTES


def default_memory_limit() -> int:
    """``DEFAULT_FRACTION`` of ``available_bytes()`` (bytes): a session's limit when none is given."""
    return int(DEFAULT_FRACTION * available_bytes())


def checked_limit(value) -> int:
    """A ``memory_limit`` argument as bytes: ``None`` gives ``default_memory_limit()``; else a
    positive integer (``InputError`` otherwise)."""
    if value is None:
        return default_memory_limit()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or int(value) <= 0:
        raise InputError(f"memory_limit must be a positive integer number of bytes, got {value!r}")
    return int(value)


def gib(nbytes: int) -> str:
    """``nbytes`` for messages: exact bytes, and GiB when large (``"19112345600 bytes (17.8 GiB)"``)."""
    return f"{nbytes} bytes" + (f" ({nbytes / 2**30:.1f} GiB)" if nbytes >= 2**30 else "")


def tensor_bytes(shape, dtype) -> int:
    """Bytes of a ``shape``/``dtype`` tensor, exactly (Python integers)."""
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def check_tensor(shape, dtype, where: str, limit: int | None = None) -> int:
    """The bytes of a ``shape``/``dtype`` tensor, after checking that it can exist: rank at most
    ``MAX_RANK``, integer dims >= 0, non-zero dims spanning at most ``MAX_EXTENT`` bytes, and at
    most ``limit`` bytes (default: the current plan's limit, ``current_limit``). Raises
    ``ShapeError`` starting with ``where`` (the op and its input shapes)."""
    shape = tuple(shape)
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{where}: rank {len(shape)} exceeds the maximum of {MAX_RANK}")
    if any(isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0 for d in shape):
        raise ShapeError(f"{where}: shape {shape} must hold integers >= 0")
    size = np.dtype(dtype).itemsize
    extent = math.prod(int(d) for d in shape if d) * size
    if extent > MAX_EXTENT:
        raise ShapeError(f"{where}: shape {shape} spans {extent} bytes, more than any array can ({MAX_EXTENT})")
    nbytes = math.prod(int(d) for d in shape) * size
    limit = current_limit() if limit is None else limit
    if nbytes > limit:
        raise ShapeError(
            f"{where}: output {shape} {np.dtype(dtype)} asks for {gib(nbytes)}, over the memory limit of {gib(limit)}"
        )
    return nbytes


class MemoryBudget:
    """A session's memory limit (``limit``, bytes) and what its live plans hold (``held``).

    Each plan is made inside ``plan(what)`` (a ``PlanCharge``); the plan keeps its bytes
    (``PlanCharge.keep``) until it is garbage (a plan cache dropped it). When a charge would
    pass the limit, the budget first asks its reclaimers (``add_reclaimer``: the session's
    graph runners, which drop cached plans not in use) to free memory, then refuses.
    Thread-safe; shared by a session's main graph and every control-flow body.
    """

    def __init__(self, limit: int):
        self.limit = int(limit)
        self._held: dict[int, int] = {}
        self._total = 0  # sum of _held's values
        self._next = 0
        self._lock = threading.Lock()
        self._reclaimers: list[Callable[[], Callable[[], None] | None]] = []

    @property
    def held(self) -> int:
        """Bytes held by this session's live plans (kept as a running sum: every charge of a
        resize reads it)."""
        return self._total

    def add_reclaimer(self, method) -> None:
        """Register a bound method that drops plans not in use (held weakly)."""
        self._reclaimers.append(weakref.WeakMethod(method))

    def reclaim(self) -> None:
        """Let every reclaimer drop its unused plans, then collect them."""
        for ref in list(self._reclaimers):
            fn = ref()
            if fn is not None:
                fn()
        gc.collect()

    def check(self, nbytes: int, what: str) -> None:
        """``ShapeError`` when ``nbytes`` more would pass the limit (after reclaiming), naming
        ``what``. For memory a run holds for a while outside any plan (scan outputs)."""
        if nbytes + self.held > self.limit:
            self.reclaim()
            held = self.held
            if nbytes + held > self.limit:
                raise ShapeError(
                    f"{what}: {gib(nbytes)} with the {gib(held)} this session's plans hold "
                    f"pass its memory limit of {gib(self.limit)}"
                )

    def plan(self, where: str) -> PlanCharge:
        """A ``PlanCharge`` for one plan; ``with`` it to make it the current one (``planning``)."""
        return PlanCharge(self, where)

    def _keep(self, owner, nbytes: int) -> None:
        with self._lock:
            token, self._next = self._next, self._next + 1
            self._held[token] = nbytes
            self._total += nbytes
        weakref.finalize(owner, self._release, token)

    def _release(self, token: int) -> None:
        with self._lock:
            self._total -= self._held.pop(token, 0)


class PlanCharge:
    """The bytes one plan asks for, charged against its session's ``MemoryBudget``.

    ``where`` names what is being prepared (set per op by the planner: the op, its input
    shapes) for the messages; ``used`` is what was charged so far (bytes); ``by_backend``: the
    part of it charged for a backend by name (bytes: every backend's arena, and a GPU
    backend's constants, weights, scratch and staging: its device memory).
    """

    def __init__(self, budget: MemoryBudget, where: str):
        self.budget = budget
        self.where = where
        self.used = 0
        self.by_backend: dict[str, int] = {}
        self.log: list[tuple[int, str, str | None]] | None = None  # see ``recording``
        # per backend, where it carves this plan's buffers from (the CPU backend's ScratchRegion)
        self.regions: dict[str, object] = {}

    def charge(self, nbytes: int, what: str, backend: str | None = None) -> None:
        """Count ``nbytes`` more for ``what`` (e.g. "the CPU arena"), held by ``backend`` (its
        name: ``by_backend``) if given; ``ShapeError`` when this plan's bytes with those of the
        session's other plans would pass the limit (after the budget reclaimed what it could).
        ``what`` may be a callable returning the text, called only when it is needed."""
        nbytes = int(nbytes)
        b = self.budget
        if self.used + nbytes + b.held > b.limit:
            b.reclaim()
            held = b.held
            if self.used + nbytes + held > b.limit:
                others = f" and {gib(held)} held by the session's other plans" if held else ""
                where, what = _text(self.where), _text(what)
                raise ShapeError(
                    f"{where}: {what} asks for {gib(nbytes)}; with the {gib(self.used)} this plan holds already{others} "
                    f"that passes the memory limit of {gib(b.limit)}"
                )
        self.used += nbytes
        if self.log is not None:
            self.log.append((nbytes, _text(what), backend))
        if backend is not None:
            self.attribute(backend, nbytes)

    def attribute(self, backend: str, nbytes: int) -> None:
        """Count ``nbytes`` already charged as held by ``backend`` (``by_backend``)."""
        self.by_backend[backend] = self.by_backend.get(backend, 0) + int(nbytes)

    def keep(self, owner) -> None:
        """Hold this plan's bytes in the budget for as long as ``owner`` (the plan) lives."""
        self.budget._keep(owner, self.used)

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[tuple[int, str, str | None]]]:
        """A list that collects ``(nbytes, what, backend)`` of every charge made for the
        duration, in order (a plan cached with them charges them again when it is loaded:
        ``mnnpy.plan_cache``)."""
        before, self.log = self.log, []
        try:
            yield self.log
        finally:
            if before is not None:
                before.extend(self.log)
            self.log = before


_CURRENT: contextvars.ContextVar[PlanCharge | None] = contextvars.ContextVar("mnnpy_plan_charge", default=None)


@contextlib.contextmanager
def planning(charge: PlanCharge) -> Iterator[PlanCharge]:
    """Make ``charge`` the current plan's for the duration (``charge``, ``current_limit``)."""
    token = _CURRENT.set(charge)
    try:
        yield charge
    finally:
        _CURRENT.reset(token)


def current() -> PlanCharge | None:
    """The ``PlanCharge`` of the plan being made in this context, or ``None``."""
    return _CURRENT.get()


def current_limit() -> int:
    """The memory limit (bytes) of the plan being made, else ``default_memory_limit()``."""
    c = _CURRENT.get()
    return c.budget.limit if c is not None else default_memory_limit()


def charge(nbytes: int, what: str, backend: str | None = None) -> None:
    """Charge an allocation of ``nbytes`` for ``what`` (held by ``backend``, a name) to the current
    plan (``PlanCharge.charge``); outside a plan, check it alone against ``default_memory_limit()``.
    Raises ``ShapeError``."""
    c = _CURRENT.get()
    if c is not None:
        c.charge(nbytes, what, backend)
        return
    limit = default_memory_limit()
    if nbytes > limit:
        raise ShapeError(f"{_text(what)} asks for {gib(nbytes)}, over the memory limit of {gib(limit)}")


def _text(what) -> str:
    """``what`` as text: a ``str``, or a callable returning one (made only for a message or a record)."""
    return what() if callable(what) else what


def attribute(backend: str, nbytes: int) -> None:
    """Count ``nbytes`` the current plan was charged as held by ``backend`` (``PlanCharge.attribute``;
    nothing outside a plan)."""
    c = _CURRENT.get()
    if c is not None:
        c.attribute(backend, nbytes)

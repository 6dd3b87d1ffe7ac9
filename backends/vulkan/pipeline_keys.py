"""The pipelines a model's sessions asked for, kept in its compilation cache (``KEYS_ENTRY``).

A session with a compilation cache asks ``Pipelines.get`` for one pipeline per dispatch while
its Executions are prepared; in a new process each pipeline the process has not made yet costs
the session's thread its shader module, layouts and a task for a pipeline thread (PP-OCRv4
rec, fourth model of a process on the H200 machine: 13 new of 138 asked for, 1.7-4.3 ms of a
22-32 ms warm resize). The keys asked for under a token are saved as the entry ``KEYS_ENTRY``
(``Pipelines.save_to``); when a later process adopts the token, a pipeline thread reads them
and creates those pipelines (``Pipelines.prefetch``) while the session's thread loads its plan
and prepares its Executions, which then find them made.

Format: UTF-8 JSON, a list of ``[variant, bindings, push bytes, [[constant id, value], ...]]``
(a value: JSON true/false for ``bool``, an integer, a number for ``float``). The entry is
checked like any (SHA-256 against the mapping, then its key); ``decode`` also drops every key
that could not have been saved (an unknown variant, a value of another type, sizes out of
range): a key only names work, and a wrong one costs a pipeline that nothing binds.
"""

from __future__ import annotations

import json

KEYS_ENTRY = "vulkan/pipeline-keys"  # the entry name in a session's compilation cache
MAX_BINDINGS = 32  # storage buffers of one set (the shaders use up to 8)
MAX_PUSH = 256  # bytes (maxPushConstantsSize is at least 128)
MAX_KEYS = 4096  # keys kept per token


def encode(keys) -> bytes:
    """``keys`` (``Pipelines.get``'s ``(variant, bindings, push_size, spec)`` tuples) as the entry's payload."""
    return json.dumps([[name, b, p, [list(c) for c in spec]] for name, b, p, spec in keys], separators=(",", ":")).encode()


def decode(payload: bytes, variants: frozenset[str]) -> list[tuple]:
    """The keys of ``payload`` (``encode``'s) whose variant is in ``variants`` and whose fields
    are what ``encode`` writes (others dropped; ``[]`` for a payload that is not such a list)."""
    try:
        items = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return []
    if type(items) is not list:
        return []
    out = []
    for item in items[:MAX_KEYS]:
        key = _key(item, variants)
        if key is not None:
            out.append(key)
    return out


def _key(item, variants: frozenset[str]) -> tuple | None:
    if type(item) is not list or len(item) != 4:
        return None
    name, bindings, push, spec = item
    if type(name) is not str or name not in variants or type(spec) is not list:
        return None
    if type(bindings) is not int or not 0 <= bindings <= MAX_BINDINGS or type(push) is not int or not 0 <= push <= MAX_PUSH:
        return None
    pairs = []
    for c in spec:
        if type(c) is not list or len(c) != 2 or type(c[0]) is not int or type(c[1]) not in (bool, int, float):
            return None
        pairs.append((c[0], c[1]))
    return name, bindings, push, tuple(pairs)

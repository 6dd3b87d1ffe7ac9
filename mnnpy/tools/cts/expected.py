"""The expected-failures list of the random-graph tests: a JSON object mapping a graph's
key (a saved spec's file stem, or ``s<seed>_g<index>`` for a generated graph) to an object
mapping a backend name (or ``"*"``: every backend) to the reason it fails there. Keys
starting with ``_`` are comments."""

from __future__ import annotations

import json
from pathlib import Path

from mnnpy.errors import ModelFormatError


def load(path: str | Path) -> dict[str, dict[str, str]]:
    """The list in ``path``. Raises ``ModelFormatError`` where it is not such an object."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"{path}: not a readable expected-failures list ({e})") from None
    entries = {k: v for k, v in data.items() if not k.startswith("_")} if isinstance(data, dict) else None
    if entries is None or not all(
        isinstance(v, dict) and all(isinstance(r, str) and r for r in v.values()) for v in entries.values()
    ):
        raise ModelFormatError(f"{path}: expected {{graph: {{backend: reason}}}}")
    return entries


def reason(known: dict, key: str, backend: str) -> str | None:
    """Why graph ``key`` is expected to fail on ``backend``, or None where it is not."""
    entry = known.get(key, {})
    return entry.get(backend) or entry.get("*")

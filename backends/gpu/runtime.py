"""What the GPU runtimes share: choosing a device by an environment variable, and finding the
shader folder (package data, else the repository's ``shaders/``). Nothing here imports a driver.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any


def choose_device(
    devices: Sequence[Any],
    wanted: str | None,
    *,
    api: str,
    env: str,
    types: dict[str, Callable[[Any], bool]],
    name: Callable[[Any], str],
    rank: Callable[[Any], int],
    named: str = "a device name",
    none: str = "device",
) -> tuple[Any | None, str]:
    """``(device, "")`` or ``(None, reason)``: the best-ranked (lowest ``rank``, the first on a
    tie) of ``devices`` after filtering by ``wanted`` (the value of ``$env``): a key of ``types``
    (a predicate per device type) or part of ``name(device)``, case-insensitive. ``api``, ``named``
    and ``none`` word the reasons ("no <api> <none>")."""
    if wanted:
        w = wanted.strip().lower()
        devices = [d for d in devices if (types[w](d) if w in types else w in name(d).lower())]
        if not devices:
            return None, f"no {api} device matches {env}={wanted!r} (a type {'/'.join(types)}, or part of {named})"
    if not devices:
        return None, f"no {api} {none}"
    return min(devices, key=rank), ""


@cache
def shader_dir(api: str, marker: str):
    """The folder of ``api``'s shaders ("opencl", "vulkan") holding ``marker``: ``shaders/<api>``
    two levels above this file (an installed package's ``mnnpy/shaders``, a checkout's
    ``shaders``), else package data ``mnnpy.shaders.<api>`` (``importlib.resources``, imported
    only then: with ``zipfile``, about 7 ms of a process's first session), else the former."""
    here = Path(__file__).resolve().parents[2] / "shaders" / api
    if (here / marker).is_file():
        return here
    try:
        from importlib.resources import files

        d = files(f"mnnpy.shaders.{api}")
        if d.joinpath(marker).is_file():
            return d
    except (ImportError, ModuleNotFoundError, TypeError):
        pass
    return here

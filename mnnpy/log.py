"""Tagged loggers through the standard ``logging`` module, and ``MNNPY_LOG``.

Every message of mnnpy goes to a logger named ``mnnpy.<tag>``, one tag per part (``TAGS``)::

    mnnpy.session   sessions created: backends, ms
    mnnpy.planner   resizes: shapes, ms per step (sizes, schedule, memory, executions),
                    arena bytes per backend; plan cache hits and misses
    mnnpy.schedule  placement: each op's backend and, where it fell back, why
    mnnpy.cache     compilation caches, hits and misses: OpenCL programs (built from source:
                    ms), OpenCL work-group tuning (tuned: ms), Vulkan pipelines (created:
                    ms), converted real models; cache files loaded, rejected (why), written
    mnnpy.opencl    the OpenCL runtime: device chosen, ms to create
    mnnpy.vulkan    the Vulkan runtime: device chosen, ms to create
    mnnpy.convert   ONNX conversions: nodes in, ops out, ms

Levels: ``DEBUG`` shows all of it; ``INFO`` what takes time (resizes, compiles, cache files
read or written, runtimes created), not per-op placement and in-memory hits.

``MNNPY_LOG`` (``debug``, ``info``, ``warning``, ``error``, any case) puts one handler on
the ``mnnpy`` logger at ``import mnnpy`` (``configure_from_env``), writing to stderr; unset,
empty or ``off``: none, and the application configures ``logging`` as it likes (mnnpy only
adds a ``NullHandler``, the standard library's advice for libraries; ``logging`` HOWTO,
"Configuring Logging for a Library"). An unknown value warns (``RuntimeWarning``) and
configures nothing.

No logger is called on the run path: a run whose input shapes are those of the session's
plan logs nothing (a test checks it), so a run costs the same with logging on or off.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

ENV = "MNNPY_LOG"
ROOT = "mnnpy"
TAGS = ("session", "planner", "schedule", "cache", "opencl", "vulkan", "convert")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
OFF = ("", "0", "off", "none", "false", "no")
FORMAT = "%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%H:%M:%S"

logging.getLogger(ROOT).addHandler(logging.NullHandler())
_handler: logging.Handler | None = None  # the handler ``configure`` installed, replaced on the next call


def get_logger(tag: str) -> logging.Logger:
    """The logger ``mnnpy.<tag>``; ``tag`` is one of ``TAGS`` (else ``ValueError``: a typo
    would make a logger nobody knows to enable)."""
    if tag not in TAGS:
        raise ValueError(f"unknown mnnpy log tag {tag!r}; the tags are {TAGS}")
    return logging.getLogger(f"{ROOT}.{tag}")


class lazy:
    """A log argument computed only when a record is formatted: ``lazy(fn, *args)`` prints
    as ``fn(*args)`` (``log.debug("%s", lazy(describe, x))`` costs nothing when off)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __str__(self) -> str:
        return str(self.fn(*self.args))


def configure(level: str | int | None, stream=None) -> logging.Handler | None:
    """Log ``mnnpy.*`` at ``level`` (a name of ``LEVELS`` or a ``logging`` level; ``None`` or
    an ``OFF`` name removes the handler) to ``stream`` (default ``sys.stderr``); returns the
    handler installed, replacing the one a previous call installed. Raises ``ValueError``
    for an unknown level name."""
    global _handler
    logger = logging.getLogger(ROOT)
    if _handler is not None:
        logger.removeHandler(_handler)
        logger.setLevel(logging.NOTSET)
        _handler = None
    if level is None or (isinstance(level, str) and level.strip().lower() in OFF):
        return None
    if isinstance(level, str):
        name = level.strip().lower()
        if name not in LEVELS:
            raise ValueError(f"unknown log level {level!r}; choose one of {sorted(LEVELS)} or off")
        level = LEVELS[name]
    _handler = logging.StreamHandler(stream or sys.stderr)
    _handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
    logger.addHandler(_handler)
    logger.setLevel(level)
    return _handler


def configure_from_env() -> logging.Handler | None:
    """``configure($MNNPY_LOG)`` (called by ``import mnnpy``); unset or off leaves ``logging``
    as it is; an unknown value warns (``RuntimeWarning``) and configures nothing."""
    value = os.environ.get(ENV, "")
    if value.strip().lower() in OFF:
        return None
    try:
        return configure(value)
    except ValueError as e:
        warnings.warn(f"${ENV}: {e}", RuntimeWarning, stacklevel=2)
        return None

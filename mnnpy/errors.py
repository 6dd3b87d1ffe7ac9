"""The mnnpy error hierarchy: every error the engine raises on bad input is one of these.

``MnnpyError`` is the root; catch it to catch them all. Each message names what was
wrong and where (file offset, tensor, op, input name) so that a user can act on it.
A class is defined here only once something raises it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class MnnpyError(Exception):
    """Root of every error raised by mnnpy on bad input or an unusable environment."""


class ModelFormatError(MnnpyError):
    """A model file (or ONNX model given to the converter) is malformed or hostile."""


class UnsupportedOperatorError(MnnpyError):
    """The model uses op types the engine lacks.

    ``missing`` maps each unsupported op type (``domain::Type`` for non-default
    domains) to how many nodes use it; the message lists all of them at once.
    """

    def __init__(self, missing: Iterable[str] | dict[str, int], where: str = "model"):
        self.missing = dict(Counter(missing)) if not isinstance(missing, dict) else dict(missing)
        listed = ", ".join(f"{k} (x{v})" for k, v in sorted(self.missing.items()))
        super().__init__(f"{where} uses {len(self.missing)} unsupported op type(s): {listed}")


class ShapeError(MnnpyError):
    """Shapes do not fit an op's rule (names the op, its inputs' shapes and the rule)."""


class InputError(MnnpyError):
    """A ``run``/``resize`` call got a wrong input name, a missing input, or a wrong rank/dtype/shape."""


class StaleTensorError(InputError):
    """A ``DeviceTensor`` was used (read, or fed to a run) after the session that made it ran
    again or was closed: its memory holds another run's output or is gone
    (``mnnpy.device_tensor``). Says which tensor and which run."""


class BackendUnavailableError(MnnpyError):
    """A backend asked for by name cannot be used here (package, driver or device missing)."""


class LoopTimeoutError(MnnpyError):
    """A Loop ran longer than the run's ``loop_timeout`` (NNAPI's loop time-out: 2 s by
    default, at most 15 s); names the op and the iteration it reached. The session stays
    usable: its next run starts afresh."""


class DeadlineMissedError(MnnpyError):
    """A run (or a session's preparation) could not complete by its deadline (NNAPI's
    ``MISSED_DEADLINE_*``): raised before the run starts when the deadline has passed, and
    between partitions (between ops on the CPU) when it passes during the run. Says how late.
    The session stays usable."""


class OutputBufferTooSmallError(MnnpyError):
    """A caller-provided output array cannot take its output (NNAPI's
    ``OUTPUT_INSUFFICIENT_SIZE``). ``needed``: output name -> the shape each output needs
    (0 for a dimension not known before the run), for every output given. The session
    stays usable."""

    def __init__(self, message: str, needed: dict[str, tuple[int, ...]]):
        self.needed = dict(needed)
        super().__init__(message)


class DependencyFailedError(MnnpyError):
    """A fenced run did not start because a fence it waited for signalled a failed run
    (NNAPI: an execution whose sync fence signals an error fails too); names the fence."""


__all__ = [
    "DeadlineMissedError",
    "DependencyFailedError",
    "OutputBufferTooSmallError",
    "MnnpyError",
    "ModelFormatError",
    "UnsupportedOperatorError",
    "ShapeError",
    "InputError",
    "StaleTensorError",
    "BackendUnavailableError",
    "LoopTimeoutError",
]

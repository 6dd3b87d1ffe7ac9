"""The mnnpy error hierarchy: every error the engine raises on bad input is one of these.

``MnnpyError`` is the root; catch it to catch them all. Each message names what was
wrong and where (file offset, tensor, op, input name) so that a user can act on it.
A class is defined here only once something raises it: the NNAPI execution errors
(output buffer too small, deadline missed) arrive with those features.
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


class BackendUnavailableError(MnnpyError):
    """A backend asked for by name cannot be used here (package, driver or device missing)."""


class LoopTimeoutError(MnnpyError):
    """A Loop ran longer than the run's ``loop_timeout`` (NNAPI's loop time-out: 2 s by
    default, at most 15 s); names the op and the iteration it reached. The session stays
    usable: its next run starts afresh."""


__all__ = [
    "MnnpyError",
    "ModelFormatError",
    "UnsupportedOperatorError",
    "ShapeError",
    "InputError",
    "BackendUnavailableError",
    "LoopTimeoutError",
]

"""Floating-point errors ignored for the span of a run: NaN and inf propagate silently, as
in onnxruntime (NumPy would warn, or raise under ``np.seterr``).

``token = quiet()`` ... ``loud(token)`` (in a ``finally``), for the run loop, where
``with np.errstate(all="ignore")`` costs 0.8 µs a run (about a sixth of a burst's run on a
one-op model). NumPy 2 keeps the error state in a context variable (NumPy's
``_core/_ufunc_config.py``); the state "ignore all" is made once and the variable set to it
and reset, 0.1 µs. Where that module differs, ``np.errstate`` is used.
"""

from __future__ import annotations

import numpy as np

try:  # NumPy >= 2.0
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    _IGNORE = _make_extobj(all="ignore")

    def quiet():
        """Ignore floating-point errors in this context until ``loud(token)``; returns the token."""
        return _extobj_contextvar.set(_IGNORE)

    def loud(token) -> None:
        """Put back the error state from before ``quiet()`` returned ``token``."""
        _extobj_contextvar.reset(token)

except (ImportError, AttributeError, TypeError):  # another NumPy: its public context manager

    def quiet():
        """Ignore floating-point errors in this context until ``loud(token)``; returns the token."""
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def loud(token) -> None:
        """Put back the error state from before ``quiet()`` returned ``token``."""
        token.__exit__(None, None, None)

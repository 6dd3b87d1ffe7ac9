"""Bursts: rapid successive runs of one session (NNAPI's ``ANeuralNetworksBurst``).

``with session.burst() as burst: burst.run(feeds)``. What a plain ``run`` checks on every
call is checked once per burst while it stays true: the feeds' names, array types, shapes
and dtypes are compared with the previous run's as one tuple, and when they match the
inputs are not validated again and the plan key is reused (a model whose plan depends on
input contents, ``Session.value_inputs``, is checked every time). The options of a run
(``output_names``, ``measure_timing``...) are checked once per distinct set. The plan,
its arenas, the GPU staging buffers and command buffers stay bound from run to run, as
they do for ``run``. A burst is for one thread at a time; runs of its session from other
threads still take their turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mnnpy.errors import InputError
from mnnpy.session_runs import execute


class Burst:
    """Successive runs of ``session`` with the checks that stay true done once (see the
    module doc). ``run(feeds, output_names=None, **options)`` as ``Session.run``."""

    def __init__(self, session):
        self.session = session
        self._signature: tuple | None = None
        self._arrays_index: list[tuple[str, int]] = []
        self._key: tuple | None = None
        self._requests: dict[tuple, Any] = {}
        self._closed = False

    def run(self, feeds: Mapping[str, Any], output_names: list[str] | None = None, **options: Any):
        """``Session.run(feeds, output_names, **options)`` for the burst; returns its ``RunOutputs``."""
        if self._closed:
            raise InputError("the burst is closed")
        s = self.session
        try:
            signature = tuple((n, a.shape, a.dtype) for n, a in feeds.items() if type(a) is np.ndarray)
        except AttributeError:  # not a mapping: the full check below says so
            signature = None
        if signature is not None and signature == self._signature and len(signature) == len(feeds) and not s.runner.value_inputs:
            arrays = {t: feeds[n] for n, t in self._arrays_index}
            key = self._key
        else:
            arrays = s._check_feeds(feeds)
            key = s.runner.key(arrays)
            self._signature = signature if signature is not None and len(signature) == len(feeds) else None
            self._arrays_index = [(n, s._input_index[n]) for n in feeds]
            self._key = key
        request = self._request(output_names, options)
        return execute(s, arrays, request, key)

    def _request(self, output_names, options: dict):
        if options.get("deadline") is not None or options.get("timeout_ms") is not None:
            return self.session._request(output_names, **options)  # a deadline is relative to now: never cached
        cache_key = (None if output_names is None else tuple(output_names), tuple(sorted(options.items(), key=lambda kv: kv[0])))
        try:
            hash(cache_key)
        except TypeError:  # caller-provided output arrays: checked each time
            return self.session._request(output_names, **options)
        if cache_key not in self._requests:
            self._requests[cache_key] = self.session._request(output_names, **options)
        return self._requests[cache_key]

    def close(self) -> None:
        """End the burst; its session stays usable."""
        self._closed = True
        self._requests.clear()

    def __enter__(self) -> Burst:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

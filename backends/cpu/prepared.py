"""Prepared constant data of CPU executions through the compilation cache (the data cache of
``mnnpy.compilation_cache``; NNAPI's ``ANeuralNetworksCompilation_setCaching``).

An execution whose weights are constants calls ``prepared(exe, what, w, compute, *params)``
in ``on_resize``: with a cache (``create_session(cache_dir=...)``) the result is looked up
under ``<op name>/<what>/<params>/<shape>/<dtype>/<sample>`` of the session's token and
loaded when valid, else ``compute()`` runs and its result is saved. ``<sample>`` is the
SHA-256 of at most ``SAMPLE`` evenly spaced elements of ``w`` (and its byte count): a cheap
guard against one token given to two models (NNAPI makes the token's uniqueness the caller's
promise; the sample catches a retrained model under an old token, not a deliberate collision).

Only transforms that cost more than reading their result back are worth an entry: Winograd's
``U = G w G^T`` (float64 products). Plain re-layouts (im2col, depthwise, pointwise) stay
computed: caching the packed panels of PP-OCRv4 det's pointwise and im2col weights from 32K
elements made its warm creation slower (median 33.5 -> 40.3 ms, 2026-12-03), the entries read
ahead on another thread notwithstanding.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from mnnpy.compilation_cache import sample_digest

SAMPLE = 4096  # elements of the weights hashed into an entry's name


def prepared(exe, what: str, w: np.ndarray, compute, *params) -> np.ndarray:
    """``compute()`` for the constant weights ``w`` of ``exe``, from the session's compilation
    cache where it holds a valid entry (module doc); without a cache, or for weights that
    are not constants, just ``compute()``."""
    cache = exe.backend.config.cache
    if cache is None or not getattr(exe, "const", False):
        return compute()
    w = np.asarray(w)
    key = "/".join([exe.op.name, what, repr(params), "x".join(map(str, w.shape)), str(w.dtype), sample_digest(w, SAMPLE)])
    return cache.array(key, "cpu", compute)


@functools.cache
def code_digest(fn) -> str:
    """12 hex digits of SHA-256 over ``fn``'s bytecode and constants: part of an entry's
    parameters, so that an edited transform (a new layout in the same mnnpy version) does not
    load the entries of the old one."""
    code = fn.__code__
    return hashlib.sha256(code.co_code + repr(code.co_consts).encode()).hexdigest()[:12]


def bias_into(dst: np.ndarray, b) -> None:
    """``dst (M,)`` float32 = the Conv's bias ``b (M,)``, or zeros where it has none."""
    if b is None:
        dst.fill(0)
    else:
        np.copyto(dst, b)

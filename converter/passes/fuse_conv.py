"""Fold what follows a Conv into it: BatchNormalization, a constant scale/shift, an activation.

Each rewrite needs the Conv's output to be read only by the folded op (and not be a
graph output); the Conv then writes the folded op's output tensor, so names seen by
users never change. Weights are new constant tensors (a shared ``W`` is not touched).

- ``fold_batchnorm``: ``Y = BN(Conv(X, W, b))`` -> ``Conv(X, W', b')`` with
  ``s = gamma / sqrt(var + eps)``, ``W' = W * s`` (per output channel),
  ``b' = (b - mean) * s + beta``. Also ConvTranspose (``W: (C, M/g, k...)``).
- ``fold_affine``: ``Conv(...) * c``, ``c * Conv(...)``, ``Conv(...) / c``,
  ``Conv(...) + c``, ``c + Conv(...)``, ``Conv(...) - c`` with ``c`` a float32 constant
  that is a scalar or per output channel (``(M, 1, 1)``, ``(1, M, 1, 1)``...): scales
  ``W`` and ``b``, or shifts ``b`` (PP-OCRv4's "learnable affine blocks" are this).
- ``fold_affine_into_next``: ``Conv(x * a + b)`` with scalar constants ``a``, ``b``
  (also ``a * x``, ``x / a``, ``b + x``, ``x - b``) -> ``Conv(x)`` with ``W' = W * a`` and
  ``b'[m] = b[m] + b * sum(W[m])``. Scaling commutes with zero padding, a shift does not,
  so a shift is folded only into a Conv without padding.
- ``fuse_activation``: ``act(Conv(...))`` -> Conv with ``activation``/``activation_params``
  for the activations with ``fuse`` in ``mnnpy.ops.activation`` (Clip: constant bounds).
"""

from __future__ import annotations

import numpy as np

from mnnpy.ir import Graph
from mnnpy.ops.activation import ACTIVATIONS

from .common import GraphView, scalar, scalar_step

CONVS = ("Conv", "ConvTranspose")


def _conv_feeding(v: GraphView, t: int, types=CONVS):
    """The un-fused conv (of ``types``, constant float32 weights) writing ``t``, when ``t`` has one reader."""
    if t < 0 or not v.private(t):
        return None
    conv = v.producer(t)
    if conv is None or conv.type not in types or conv.outputs[0] != t or conv.attrs.get("activation"):
        return None
    w = v.const(conv.inputs[1]) if len(conv.inputs) > 1 else None
    has_b = len(conv.inputs) > 2 and conv.inputs[2] >= 0
    if not _weights_ok(conv, w) or (has_b and _bias(v, conv, _out_channels(conv, w)) is None):
        return None
    return conv


def _weights_ok(conv, w: np.ndarray | None) -> bool:
    """Whether ``w`` is a float32 constant a conv of ``conv``'s type and group can have
    (``(M, C/G, k...)``; ConvTranspose ``(C, M/G, k...)`` with ``G`` dividing ``C``) and at
    least one output channel; a malformed conv is left alone (the loader or the shape
    function names what is wrong)."""
    if w is None or w.dtype != np.float32 or w.ndim < 3:
        return False
    g = conv.attrs.get("group", 1)
    if isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
        return False
    return _out_channels(conv, w) > 0 and (conv.type == "Conv" or w.shape[0] % g == 0)


def _out_channels(conv, w: np.ndarray) -> int:
    return w.shape[0] if conv.type == "Conv" else w.shape[1] * int(conv.attrs.get("group", 1))


def _scale_weights(conv, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``W`` scaled by ``s`` (one factor per output channel), computed in float64."""
    w64 = w.astype(np.float64)
    if conv.type == "Conv":
        return (w64 * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    g = int(conv.attrs.get("group", 1))
    c, mg = w.shape[0], w.shape[1]
    ws = w64.reshape((g, c // g, mg) + w.shape[2:]) * s.reshape((g, 1, mg) + (1,) * (w.ndim - 2))
    return ws.reshape(w.shape).astype(w.dtype)


def _bias(v: GraphView, conv, m: int) -> np.ndarray | None:
    """The conv's bias as ``(m,)`` float64 (zeros without one); ``None`` when it is not a
    float constant of ``m`` elements (nothing is folded then)."""
    if not (len(conv.inputs) > 2 and conv.inputs[2] >= 0):
        return np.zeros(m, np.float64)
    b = v.const(conv.inputs[2])
    if b is None or b.dtype.kind != "f" or b.shape != (m,):
        return None
    return b.astype(np.float64)


def _rewrite(v: GraphView, conv, w_new: np.ndarray | None, b_new: np.ndarray, folded) -> None:
    """Give ``conv`` new weights (``None``: keep) and bias, make it write ``folded``'s output, drop ``folded``."""
    w_t = conv.inputs[1] if w_new is None else v.add_const(w_new, conv.name + "_W")
    b_t = v.add_const(b_new.astype(np.float32), conv.name + "_B")
    conv.inputs = [conv.inputs[0], w_t, b_t]
    conv.outputs = [folded.outputs[0]]
    v.kill(folded)


def fold_batchnorm(graph: Graph, keep_names=frozenset()) -> int:
    """Fold each BatchNormalization into the Conv/ConvTranspose before it; returns the count."""
    v = GraphView(graph, keep_names)
    for op in list(graph.ops):
        if op.type != "BatchNormalization" or len(op.inputs) < 5 or op.attrs.get("training_mode", 0):
            continue
        conv = _conv_feeding(v, op.inputs[0])
        params = [v.const(t) for t in op.inputs[1:5]]
        if conv is None or any(p is None or p.dtype.kind != "f" for p in params):
            continue
        w = v.const(conv.inputs[1])
        m = _out_channels(conv, w)
        gamma, beta, mean, var = (p.astype(np.float64).reshape(-1) for p in params)
        if any(p.size != m for p in (gamma, beta, mean, var)):
            continue
        s = gamma / np.sqrt(var + float(op.attrs.get("epsilon", 1e-5)))
        _rewrite(v, conv, _scale_weights(conv, w, s), (_bias(v, conv, m) - mean) * s + beta, op)
    return v.finish()


def _per_channel(c: np.ndarray | None, rank: int, m: int) -> np.ndarray | None:
    """``c`` as ``(m,)`` float64 when it broadcasts onto ``(N, m, ...)`` of ``rank`` without growing it."""
    if c is None or c.dtype != np.float32 or c.ndim > rank:
        return None
    full = (1,) * (rank - c.ndim) + c.shape
    if any(d != 1 for k, d in enumerate(full) if k != 1) or full[1] not in (1, m):
        return None
    flat = c.astype(np.float64).reshape(-1)
    return np.full(m, flat[0]) if flat.size == 1 else flat


def fold_affine(graph: Graph, keep_names=frozenset()) -> int:
    """Fold constant per-channel Mul/Div/Add/Sub after a Conv into its weights/bias; returns the count."""
    v = GraphView(graph, keep_names)
    for op in list(graph.ops):
        if op.type not in ("Mul", "Div", "Add", "Sub") or len(op.inputs) != 2:
            continue
        for k in (0, 1) if op.type in ("Mul", "Add") else (0,):
            conv = _conv_feeding(v, op.inputs[k])
            if conv is None:
                continue
            w = v.const(conv.inputs[1])
            m = _out_channels(conv, w)
            s = _per_channel(v.const(op.inputs[1 - k]), w.ndim, m)
            if s is None or (op.type == "Div" and not np.all(s != 0)):
                continue
            b = _bias(v, conv, m)
            if op.type in ("Mul", "Div"):
                s = s if op.type == "Mul" else 1.0 / s
                _rewrite(v, conv, _scale_weights(conv, w, s), b * s, op)
            else:
                _rewrite(v, conv, None, b + s if op.type == "Add" else b - s, op)
            break
    return v.finish()


def _unpadded(conv, w: np.ndarray) -> bool:
    """Whether ``conv`` reads no padding (explicit zero pads, or 1x1 stride-1 SAME)."""
    a = conv.attrs
    if a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"):
        return a.get("auto_pad", "NOTSET") == "VALID" or not any(a.get("pads", []))
    return all(k == 1 for k in w.shape[2:]) and all(s == 1 for s in a.get("strides", []))


def _scalar_step(v: GraphView, t: int):
    """``(op, x, kind, value)`` when private ``t = x*a | a*x | x/a | x+b | b+x | x-b`` with a scalar constant."""
    op = v.producer(t) if v.private(t) else None
    step = scalar_step(v, op) if op is not None else None
    return None if step is None else (op, *step)


def fold_affine_into_next(graph: Graph, keep_names=frozenset()) -> int:
    """Fold scalar scale/shift ops that feed only a Conv into its weights/bias; returns the count."""
    v, count = GraphView(graph, keep_names), 0
    for conv in list(graph.ops):
        if conv.type != "Conv" or conv.attrs.get("activation") or len(conv.inputs) < 2:
            continue
        w = v.const(conv.inputs[1])
        if not _weights_ok(conv, w) or _bias(v, conv, w.shape[0]) is None:
            continue
        while (step := _scalar_step(v, conv.inputs[0])) is not None:
            op, x, kind, value = step
            m = w.shape[0]
            b = _bias(v, conv, m)
            if kind == "shift":
                if not _unpadded(conv, w):
                    break
                b = b + value * w.astype(np.float64).reshape(m, -1).sum(axis=1)
                w_new = None
            else:
                w_new = (w.astype(np.float64) * value).astype(np.float32)
            w_t = conv.inputs[1] if w_new is None else v.add_const(w_new, conv.name + "_W")
            conv.inputs = [x, w_t, v.add_const(b.astype(np.float32), conv.name + "_B")]
            w = v.const(w_t)
            v.kill(op)
            count += 1
    v.finish()
    return count


def _activation(v: GraphView, op) -> tuple[str, list[float]] | None:
    """(activation, params) for an op Conv may fuse (``Activation.fuse``), else ``None``;
    Clip's bounds must be constants."""
    act = ACTIVATIONS.get(op.type)
    if act is None or not act.fuse:
        return None
    values = [None] + [scalar(v.const(t)) if t >= 0 else None for t in op.inputs[1:]]
    if any(t >= 0 and value is None for t, value in zip(op.inputs[1:], values[1:])):
        return None
    return op.type, [float(p) for p in act.scalars(op.attrs, values)]


def fuse_activation(graph: Graph, keep_names=frozenset()) -> int:
    """Fuse each activation into the Conv before it (not ConvTranspose); returns the count."""
    v = GraphView(graph, keep_names)
    for op in list(graph.ops):
        act = _activation(v, op) if op.inputs else None
        conv = _conv_feeding(v, op.inputs[0], ("Conv",)) if act else None
        if conv is None:
            continue
        conv.attrs["activation"], conv.attrs["activation_params"] = act
        conv.outputs = [op.outputs[0]]
        v.kill(op)
    return v.finish()

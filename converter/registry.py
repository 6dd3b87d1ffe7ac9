"""Registry of ONNX op converters: ``@onnx_op("Conv", ...)`` on ``fn(node, ctx)`` in ``onnx_ops/``.

A converter function reads one ``onnx.NodeProto`` (attributes via ``ctx.attrs``) and
emits canonical mnnpy ops with ``ctx.emit``; ``ctx.opset`` is the model's default-
domain opset, so one function handles every opset's form of its op.
"""

from __future__ import annotations

from collections.abc import Callable

from mnnpy.registry import Registry

_CONVERTERS = Registry("converter", "mnnpy.converter.onnx_ops")
onnx_op = _CONVERTERS.register


def converters() -> dict[str, Callable]:
    """Every registered converter function by ONNX op type (imports ``onnx_ops/*`` once)."""
    return _CONVERTERS.entries()

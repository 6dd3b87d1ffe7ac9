"""Registry of ONNX op converters: ``@onnx_op("Conv", ...)`` on ``fn(node, ctx)``.

A converter function reads one ``onnx.NodeProto`` (attributes via ``ctx.attrs``) and
emits canonical mnnpy ops with ``ctx.emit``; ``ctx.opset`` is the model's default-
domain opset, so one function handles every opset's form of its op.
"""

from __future__ import annotations

from collections.abc import Callable

_CONVERTERS: dict[str, Callable] = {}


def onnx_op(*op_types: str):
    """Register the decorated function for ONNX ``op_types`` (default domain); twice is an error."""

    def deco(fn):
        for t in op_types:
            if t in _CONVERTERS:
                raise ValueError(f"converter for {t} registered twice")
            _CONVERTERS[t] = fn
        return fn

    return deco


_loaded = False


def converters() -> dict[str, Callable]:
    """Every registered converter function by ONNX op type (imports ``onnx_ops/*`` once)."""
    global _loaded
    if not _loaded:
        _loaded = True
        import importlib
        import pkgutil

        from mnnpy.converter import onnx_ops

        for m in pkgutil.iter_modules(onnx_ops.__path__):
            importlib.import_module(f"mnnpy.converter.onnx_ops.{m.name}")
    return _CONVERTERS

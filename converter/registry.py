"""Registry of ONNX op converters: ``@onnx_op("Conv", ...)`` on ``fn(node, ctx)`` in ``onnx_ops/``.

A converter function reads one ``onnx.NodeProto`` (attributes via ``ctx.attrs``) and
emits canonical mnnpy ops with ``ctx.emit``; ``ctx.opset`` is the model's default-
domain opset, so one function handles every opset's form of its op.
"""

from __future__ import annotations

from collections.abc import Callable

from mnnpy.ops import get_schema
from mnnpy.registry import Registry

_CONVERTERS = Registry("converter", "mnnpy.converter.onnx_ops")
onnx_op = _CONVERTERS.register


def copy_node(node, ctx, type_: str | None = None) -> None:
    """Emit ``node`` as it is (as ``type_``, default its own type), keeping only the
    attributes the canonical schema declares (older opsets' extras, such as
    ``consumed_inputs``, are dropped; absent ones take the schema's defaults)."""
    type_ = type_ or node.op_type
    schema = get_schema(type_)
    attrs = {k: v for k, v in ctx.attrs(node).items() if k in schema.attrs}
    ctx.emit(type_, list(node.input), list(node.output), attrs, node.name)


def converters() -> dict[str, Callable]:
    """Every registered converter function by ONNX op type (imports ``onnx_ops/*`` once)."""
    return _CONVERTERS.entries()

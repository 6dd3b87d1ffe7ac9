"""LSTM, GRU, RNN: every form from opset 7 on is the canonical one.

Version history (ONNX Changelog.md): LSTM 7, 14, 22; GRU 7, 14, 22; RNN 7, 14, 22.
Opset 14 added ``layout`` (absent before: 0, the canonical default); 22 added bfloat16.
Attributes, inputs and outputs are otherwise unchanged, so the node is copied, keeping
the attributes the schema declares. Absent optional inputs/outputs (empty names) stay
absent.
"""

from __future__ import annotations

from mnnpy.converter.registry import onnx_op
from mnnpy.ops import get_schema


@onnx_op("LSTM", "GRU", "RNN")
def recurrent(node, ctx):
    """Copy the node; attributes the canonical schema does not know are dropped."""
    schema = get_schema(node.op_type)
    attrs = {k: v for k, v in ctx.attrs(node).items() if k in schema.attrs}
    if isinstance(attrs.get("activations"), (list, tuple)):
        attrs["activations"] = [str(a) for a in attrs["activations"]]
    name = node.name or next((o for o in node.output if o), node.op_type)
    ctx.emit(node.op_type, list(node.input), list(node.output), attrs, name)

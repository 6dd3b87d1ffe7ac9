"""Sequence ops: every opset form is the canonical one (``mnnpy/ops/sequence.py``).

Version history (ONNX Changelog.md): SequenceEmpty, SequenceConstruct, SequenceInsert,
SequenceAt, SequenceLength, SequenceErase, ConcatFromSequence, SplitToSequence 11;
SplitToSequence 24 (more element types). The node is copied; a sequence it gives is marked
``kind="sequence"`` with its element dtype (SequenceEmpty's ``dtype``, else that of the
sequence or tensor it starts from), and a tensor taken from a sequence gets the element dtype.
"""

from __future__ import annotations

import numpy as np

from mnnpy import dtypes
from mnnpy.converter.importer import label
from mnnpy.converter.registry import copy_node, onnx_op

# op type -> (index of the input whose dtype the output has (None: its own rule), output kind)
_OUTPUT = {
    "SequenceEmpty": (None, "sequence"),
    "SequenceConstruct": (0, "sequence"),
    "SequenceInsert": (0, "sequence"),
    "SequenceErase": (0, "sequence"),
    "SplitToSequence": (0, "sequence"),
    "SequenceAt": (0, "tensor"),
    "ConcatFromSequence": (0, "tensor"),
    "SequenceLength": (None, "tensor"),
}


@onnx_op(*_OUTPUT)
def sequence_op(node, ctx):
    """Copy the node; type its output (kind and element dtype)."""
    copy_node(node, ctx)
    if not node.output or not node.output[0]:
        return
    src, kind = _OUTPUT[node.op_type]
    out = ctx.desc(node.output[0])
    if node.op_type == "SequenceEmpty":
        code = ctx.attrs(node).get("dtype", 1)
        out.dtype = dtypes.from_onnx(code, f"node '{label(node)}' (SequenceEmpty) dtype")
    elif node.op_type == "SequenceLength":
        out.dtype = np.dtype(np.int64)
    elif node.input and node.input[src]:
        out.dtype = ctx.desc(node.input[src]).dtype
    out.kind = kind

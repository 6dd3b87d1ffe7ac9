"""The in-memory Net IR: what the converter builds, the model file stores and the engine runs.

A ``Net`` holds graphs (``graphs[0]`` is the main graph; control-flow bodies are the
others, referenced by index from ``GRAPH`` attributes). A ``Graph`` holds tensors
(indexed by position) and ops in topological order. Shapes use ``int`` for fixed
dims and ``str`` (the dim's name) or ``None`` (unnamed) for dynamic ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Dim = int | str | None


@dataclass
class TensorDesc:
    """A value of a graph: name, dtype, shape (``None`` = rank unknown), constant data, kind.

    ``data`` is set for constants (weights): a read-only ndarray, usually a zero-copy
    ``numpy.frombuffer`` view of the model file. ``kind``: ``"tensor"``, or ``"sequence"``
    (ONNX's sequence type: an ordered list of tensors of ``dtype``, held on the host as a
    Python list of ndarrays; ``shape`` is then the elements' shape, if known).
    """

    name: str
    dtype: np.dtype
    shape: tuple[Dim, ...] | None = None
    data: np.ndarray | None = None
    kind: str = "tensor"

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclass
class Op:
    """One node: ONNX op ``type`` (canonical form), tensor indices in/out, attributes.

    An input index of ``-1`` marks an absent optional input. Attribute values are
    Python scalars/lists/str, ``numpy`` arrays (TENSOR) or ``GraphRef`` (GRAPH).
    ``resolved``: every attribute of the op's schema, defaults filled and checked, set once
    when the model is loaded (``mnnpy.ops.resolve_attrs``); what the engine reads.
    """

    type: str
    name: str
    inputs: list[int]
    outputs: list[int]
    attrs: dict[str, Any] = field(default_factory=dict)
    resolved: dict[str, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class GraphRef:
    """An attribute value naming a subgraph: index into ``Net.graphs``."""

    index: int


@dataclass
class Graph:
    """Tensors, topologically ordered ops, and the indices of graph inputs/outputs."""

    name: str = "main"
    tensors: list[TensorDesc] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)

    def add_tensor(self, desc: TensorDesc) -> int:
        """Append a tensor and return its index."""
        self.tensors.append(desc)
        return len(self.tensors) - 1

    def producers(self) -> dict[int, int]:
        """tensor index -> index of the op that writes it."""
        return {t: i for i, op in enumerate(self.ops) for t in op.outputs if t >= 0}

    def consumers(self) -> dict[int, list[int]]:
        """tensor index -> indices of the ops that read it."""
        out: dict[int, list[int]] = {}
        for i, op in enumerate(self.ops):
            for t in op.inputs:
                if t >= 0:
                    out.setdefault(t, []).append(i)
        return out


@dataclass
class Net:
    """A whole model: graphs, metadata (key/value strings) and who produced it."""

    graphs: list[Graph] = field(default_factory=lambda: [Graph()])
    metadata: dict[str, str] = field(default_factory=dict)
    producer_name: str = ""
    producer_version: str = ""
    format_version: int = 1
    # the bytes the model was read from (a read-only mmap or bytes; None for a Net built in
    # memory): the compilation cache's default token is their SHA-256 (``model_token``)
    source: object = field(default=None, repr=False, compare=False)
    # their SHA-256 being computed (``model_file.SourceDigest``), set with ``source``
    source_digest: object = field(default=None, repr=False, compare=False)

    @property
    def main(self) -> Graph:
        return self.graphs[0]

"""A random graph as a spec: plain JSON that names its ops, shapes, attributes and data.

A spec is a dict::

    {"seed": 7, "graph": 3, "opset": 17,
     "inputs":    [{"name": "x0", "dtype": "float32", "shape": [1, 3, 7, 7], "dist": "normal"}],
     "constants": [{"name": "c1", "dtype": "float32", "shape": [6, 3, 3, 3], "dist": "normal", "scale": 0.19},
                   {"name": "c2", "dtype": "int64", "shape": [2], "values": [21, 7]}],
     "nodes":     [{"op": "Conv", "inputs": ["x0", "c1"], "outputs": ["t2"], "attrs": {"pads": [1, 1, 1, 1]}}],
     "outputs":   ["t2"]}

Data entries (``inputs``, ``constants``) either list their ``values`` or say how to draw
them: ``dist`` ``"normal"`` (times ``scale``, default 1), ``"uniform"`` (``low`` to
``high``; integers: inclusive) or ``"bernoulli"`` (bool); the generator for an entry is
``numpy.random.default_rng([seed, graph, crc32(name)])``, so removing one entry changes no
other's data. An input with ``"dynamic": true`` is declared with symbolic dims.
``output_types`` (optional: output name -> [dtype, rank]) types the outputs
whose shapes ONNX's shape inference cannot derive (after a Loop). An attribute value is a JSON number, string or list,
``{"graph": body}`` for a body (``body``: ``inputs`` and ``outputs`` as ``{"name", "dtype", "shape"}``, ``nodes``) or
``{"tensor": {"dtype", "values"}}`` for a 1-element tensor. Nothing else: the spec is the
whole reproduction.
"""

from __future__ import annotations

import copy
import json
import re
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from mnnpy.errors import ModelFormatError

DTYPES = ("float32", "int32", "int64", "bool")
INT_MAX = 2**63 - 1


def entry_array(spec: dict, entry: dict) -> np.ndarray:
    """The array of one data entry (an input or a constant) of ``spec``: its ``values``, or
    drawn as its ``dist`` says from a generator seeded by the spec's seed and the entry's name.
    Raises ``ModelFormatError`` for an unknown dtype or distribution."""
    dtype, shape = entry["dtype"], tuple(entry["shape"])
    if dtype not in DTYPES:
        raise ModelFormatError(f"spec entry {entry['name']!r}: dtype {dtype!r} is not one of {DTYPES}")
    if "values" in entry:
        return np.asarray(entry["values"], dtype=dtype).reshape(shape)
    rng = np.random.default_rng([spec.get("seed", 0), spec.get("graph", 0), zlib.crc32(entry["name"].encode())])
    dist = entry.get("dist", "normal")
    if dist == "normal":
        return (rng.standard_normal(shape) * entry.get("scale", 1.0)).astype(dtype)
    if dist == "uniform" and dtype == "float32":
        return rng.uniform(entry["low"], entry["high"], shape).astype(dtype)
    if dist == "uniform":
        return rng.integers(entry["low"], entry["high"], shape, endpoint=True).astype(dtype)
    if dist == "bernoulli":
        return np.asarray(rng.random(shape) < entry.get("p", 0.5))
    raise ModelFormatError(f"spec entry {entry['name']!r}: unknown dist {dist!r}")


def feeds(spec: dict) -> dict[str, np.ndarray]:
    """The graph inputs' arrays (name -> array), as ``entry_array`` draws them."""
    return {e["name"]: entry_array(spec, e) for e in spec["inputs"]}


def _value_info(entry: dict) -> onnx.ValueInfoProto:
    shape = entry.get("shape")
    if entry.get("dynamic"):  # declared with symbolic dims: the session plans at run time
        shape = [f"{entry['name']}_{i}" for i in range(len(shape))]
    return helper.make_tensor_value_info(entry["name"], helper.np_dtype_to_tensor_dtype(np.dtype(entry["dtype"])), shape)


def _attr(value):
    if isinstance(value, dict) and "graph" in value:
        return _graph(value["graph"], "body")
    if isinstance(value, dict) and "tensor" in value:
        t = value["tensor"]
        return numpy_helper.from_array(np.asarray(t["values"], dtype=t["dtype"]).reshape(-1))
    return value


def _nodes(nodes: list[dict]) -> list[onnx.NodeProto]:
    return [
        helper.make_node(
            n["op"], n["inputs"], n["outputs"], name=f"n{i}_{n['op']}", **{k: _attr(v) for k, v in n["attrs"].items()}
        )
        for i, n in enumerate(nodes)
    ]


def _graph(body: dict, name: str) -> onnx.GraphProto:
    outs = [_value_info(o) for o in body["outputs"]]
    return helper.make_graph(_nodes(body["nodes"]), name, [_value_info(i) for i in body["inputs"]], outs)


def to_model(spec: dict, extra_outputs: list[str] = ()) -> onnx.ModelProto:
    """The ONNX model of ``spec`` (main graph outputs as declared, then ``extra_outputs``,
    e.g. intermediate tensors for the reference run); IR version for its opset."""
    ins = [_value_info(e) for e in spec["inputs"]]
    inits = [numpy_helper.from_array(entry_array(spec, e), e["name"]) for e in spec["constants"]]
    names = [*spec["outputs"], *extra_outputs]
    graph = helper.make_graph(_nodes(spec["nodes"]), "cts", ins, [helper.make_empty_tensor_value_info(o) for o in names], inits)
    opset = spec.get("opset", 17)
    ir = 8 if opset <= 14 else 9 if opset <= 18 else 10
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir, producer_name="mnnpy-cts")
    # the outputs' element types, as ONNX's shape inference derives them (the checker needs them)
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {
        v.name: v
        for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
        if v.type.tensor_type.elem_type
    }
    declared = spec.get("output_types", {})
    for out in model.graph.output:
        if out.name in known:
            out.type.CopyFrom(known[out.name].type)
        tt = out.type.tensor_type
        if out.name in declared and not tt.HasField("shape"):  # e.g. after a Loop: dtype and rank, dims symbolic
            dtype, rank = declared[out.name]
            tt.elem_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
            tt.shape.dim.extend(onnx.TensorShapeProto.Dimension(dim_param=f"{out.name}_{i}") for i in range(rank))
    return model


def bodies(node: dict) -> list[dict]:
    """The bodies (graph attributes) of a node, as spec graphs."""
    return [v["graph"] for v in node["attrs"].values() if isinstance(v, dict) and "graph" in v]


def reads(node: dict) -> set[str]:
    """The tensors a node reads, its bodies' reads of outer tensors included (and their
    own tensors: a name is read where it is defined)."""
    names = set(node["inputs"])
    for body in bodies(node):
        for n in body["nodes"]:
            names |= reads(n)
    return names - {""}


def node_count(spec: dict) -> int:
    """Nodes of the main graph and of every body, recursively."""

    def count(nodes):
        return sum(1 + sum(count(b["nodes"]) for b in bodies(n)) for n in nodes)

    return count(spec["nodes"])


def op_types(spec: dict) -> list[str]:
    """The op types of the main graph and every body, sorted, each once."""
    seen = set()

    def walk(nodes):
        for n in nodes:
            seen.add(n["op"])
            for b in bodies(n):
                walk(b["nodes"])

    walk(spec["nodes"])
    return sorted(seen)


def clone(spec: dict) -> dict:
    """A deep copy (the shrinker edits copies)."""
    return copy.deepcopy(spec)


def save(spec: dict, path: str | Path) -> Path:
    """Write ``spec`` as indented JSON (one small text file) and return its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec, indent=1, sort_keys=True)
    # lists of numbers and strings on one line: a spec reads as one line per shape or attribute
    text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)
    path.write_text(text + "\n")
    return path


def load(path: str | Path) -> dict:
    """Read a spec written by ``save``. Raises ``ModelFormatError`` if it is not one."""
    try:
        spec = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ModelFormatError(f"{path}: not a readable CTS spec ({e})") from None
    missing = [k for k in ("inputs", "constants", "nodes", "outputs") if not isinstance(spec, dict) or k not in spec]
    if missing:
        raise ModelFormatError(f"{path}: CTS spec lacks {missing}")
    return spec

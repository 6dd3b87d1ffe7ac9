"""A seeded generator of valid random ONNX graphs, as specs (``mnnpy.tools.cts.spec``).

``generate(seed, index)`` draws graph ``index`` of the series ``seed``: opset 17 or 18; one
or two float32 inputs of rank 1 to 4 with odd sizes (1, 3, 7, 13 and now and then 127),
N(0, 1) data (N(0, 10²) or N(0, 100²) now and then), an int32/int64 input and a bool input
sometimes, and now and then declared with symbolic dims; then 3 to 12 draws, each of an op family of
``FAMILIES`` (by weight) that reads tensors already made: the newest with probability 0.6
(chains), else any (fan-out). Every tensor left unread is a graph output, and a read one
now and then. How validity and judgeability are kept: ``mnnpy.tools.cts.builder``.
"""

from __future__ import annotations

import numpy as np

from mnnpy.tools.cts import families as f
from mnnpy.tools.cts import indexing as ix
from mnnpy.tools.cts import movement as m
from mnnpy.tools.cts import patterns as p
from mnnpy.tools.cts.builder import BOOL, FLOAT, Builder
from mnnpy.tools.cts.spec import reads

# (weight, family): elementwise and movement ops most, since they are most of a real graph
FAMILIES = (
    (8, f.unary),
    (3, f.step_unary),
    (8, f.binary),
    (2, f.variadic),
    (1, f.prelu),
    (3, f.integer),
    (3, f.compare),
    (2, f.logic),
    (2, f.where),
    (3, f.cast),
    (4, f.conv),
    (2, f.conv_transpose),
    (3, f.pool),
    (2, f.gemm),
    (3, f.matmul),
    (4, f.reduce),
    (2, f.arg_reduce),
    (2, f.softmax),
    (3, f.norm),
    (1, f.cumsum),
    (1, f.topk),
    (4, m.reshape),
    (3, m.transpose),
    (3, m.slice_),
    (3, m.concat),
    (2, m.split),
    (3, m.gather),
    (2, m.pad),
    (2, m.resize),
    (2, m.expand_tile),
    (1, m.depth_space),
    (1, m.trilu),
    (1, m.if_),
    (1, m.loop),
    (4, p.conv_epilogue),
    (1, p.affine_into_conv),
    (2, p.spelled_out),
    (1, p.on_constants),
    (1, ix.scatter_elements),
    (1, ix.scatter_nd),
    (1, ix.gather_nd),
    (1, ix.one_hot),
    (2, ix.shape_ops),
    (2, ix.einsum),
    (1, ix.compress),
    (1, ix.reverse_sequence),
    (1, ix.inverse_trig),
    (1, ix.non_finite),
)


def generate(seed: int, index: int = 0, max_ops: int = 12) -> dict:
    """Graph ``index`` of series ``seed`` as a spec: the same arguments give the same graph
    on every machine (NumPy's PCG64 seeded by ``[seed, index]``). ``max_ops``: most draws."""
    rng = np.random.default_rng([seed, index])
    spec = {
        "seed": seed,
        "graph": index,
        "opset": int(rng.choice([17, 18])),
        "inputs": [],
        "constants": [],
        "nodes": [],
        "outputs": [],
    }
    b = Builder(rng, spec)
    for _ in range(1 + int(b.chance(0.4))):
        scale = float(b.choice((1.0, 1.0, 1.0, 10.0, 100.0)))
        b.pool.append(b.input(FLOAT, b.dims(int(b.choice((1, 2, 3, 4, 4, 4)))), dist="normal", scale=scale, mag=4 * scale))
    if b.chance(0.3):
        b.pool.append(
            b.input(b.choice(("int32", "int64")), b.dims(int(rng.integers(1, 4))), dist="uniform", low=-20, high=20, mag=20)
        )
    if b.chance(0.2):
        b.pool.append(b.input(BOOL, b.dims(int(rng.integers(1, 4))), dist="bernoulli"))
    weights = np.array([w for w, _ in FAMILIES], float)
    draws, tries = int(rng.integers(3, max_ops + 1)), 0
    while draws > 0 and tries < 200:
        tries += 1
        family = FAMILIES[int(rng.choice(len(FAMILIES), p=weights / weights.sum()))][1]
        if family(b):
            draws -= 1
    read = {i for n in spec["nodes"] for i in reads(n)}
    made = [o for n in spec["nodes"] for o in n["outputs"]]
    spec["outputs"] = [o for o in made if o not in read]
    hidden = set(spec.pop("_empty", [])) | set(spec.pop("_internal", []))  # empty or not finite
    extra = [o for o in made if o in read and o not in hidden]
    if extra and b.chance(0.3):
        spec["outputs"].append(b.choice(extra))
    for e in spec["inputs"]:
        if e["shape"] and b.chance(0.15):
            e["dynamic"] = True
    spec["output_types"] = {o: [b.dtypes[o], len(b.shapes[o])] for o in spec["outputs"]}
    spec.pop("_counter", None)
    spec.pop("_shapes", None)
    spec.pop("_dtypes", None)
    return spec

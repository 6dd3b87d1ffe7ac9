"""Data-movement and control-flow families of the generator (see ``families``): Reshape,
Flatten, Squeeze/Unsqueeze, Transpose, Slice, Concat, Split, Gather, GatherElements, Pad,
Resize, Expand, Tile, DepthToSpace/SpaceToDepth, Trilu, Identity; If and Loop. Movement
keeps a tensor's exactness and bound (Resize's linear and cubic modes excepted)."""

from __future__ import annotations

import math

from mnnpy.tools.cts.builder import BOOL, FLOAT, INTS, MAX_ELEMENTS, Builder, T, axis_of

ANY = (FLOAT, *INTS, BOOL)
NUMERIC = (FLOAT, *INTS)


def _factor(n: int, rank: int, rng) -> list[int]:
    """``rank`` positive ints whose product is ``n`` (prime factors dealt at random)."""
    dims = [1] * rank
    p, m = 2, n
    while m > 1:
        while m % p == 0:
            dims[int(rng.integers(rank))] *= p
            m //= p
        p += 1
    return dims


def reshape(b: Builder) -> bool:
    """Reshape to a random factorisation of the size (a -1 and 0s for copied dims
    sometimes), or Flatten (axis), Squeeze (of size-1 axes) or Unsqueeze (new axes)."""
    x = b.pick(dtype=ANY)
    if x is None:
        return False
    rank = len(x.shape)
    op = b.choice(("Reshape", "Reshape", "Flatten", "Squeeze", "Unsqueeze"))
    if op == "Flatten":
        ax = int(b.rng.integers(-rank, rank + 1)) if rank else 0
        a = ax + rank if ax < 0 else ax
        out = (math.prod(x.shape[:a]), math.prod(x.shape[a:]))
        b.node(op, [x.name], [(x.dtype, out)], x.exact, x.mag, axis=ax)
        return True
    if op == "Squeeze":
        ones = [i for i, d in enumerate(x.shape) if d == 1]
        if not ones:
            return False
        axes = sorted(set(b.rng.choice(ones, int(b.rng.integers(1, len(ones) + 1)), replace=False).tolist()))
        out = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        ins = [x.name] + (
            [b.const("int64", [len(axes)], [a - rank if b.chance(0.3) else a for a in axes])] if b.chance(0.8) else []
        )
        if len(ins) == 1:
            out = tuple(d for d in x.shape if d != 1)
        b.node(op, ins, [(x.dtype, out)], x.exact, x.mag)
        return True
    if op == "Unsqueeze":
        if rank >= 5:
            return False
        new_rank = rank + int(b.rng.integers(1, 3))
        axes = sorted(b.rng.choice(new_rank, new_rank - rank, replace=False).tolist())
        it = iter(x.shape)
        out = tuple(1 if i in axes else next(it) for i in range(new_rank))
        listed = [a - new_rank if b.chance(0.3) else a for a in axes]
        b.node(op, [x.name, b.const("int64", [len(axes)], listed)], [(x.dtype, out)], x.exact, x.mag)
        return True
    new_rank = int(b.rng.integers(1, 5))
    out = _factor(x.size, new_rank, b.rng)
    target = list(out)
    for i in range(new_rank):
        if i < rank and x.shape[i] == out[i] and b.chance(0.3):
            target[i] = 0
    if b.chance(0.4):
        target[int(b.rng.integers(new_rank))] = -1
    b.node(op, [x.name, b.const("int64", [new_rank], target)], [(x.dtype, tuple(out))], x.exact, x.mag)
    return True


def transpose(b: Builder) -> bool:
    """Transpose by a random permutation (none given: reversed)."""
    x = b.pick(lambda t: len(t.shape) >= 2, dtype=ANY)
    if x is None:
        return False
    if b.chance(0.2):
        b.node("Transpose", [x.name], [(x.dtype, x.shape[::-1])], x.exact, x.mag)
        return True
    perm = b.rng.permutation(len(x.shape)).tolist()
    b.node("Transpose", [x.name], [(x.dtype, tuple(x.shape[p] for p in perm))], x.exact, x.mag, perm=perm)
    return True


def _slice_len(d: int, start: int, end: int, step: int) -> int:
    """Output length of ONNX Slice on a dim of size ``d`` (clamping as operators.md #Slice
    says: negative values count from the end, then forward ``[0, d]`` for both, backward
    ``[0, d - 1]`` for the start and ``[-1, d - 1]`` for the end)."""
    start, end = start + d if start < 0 else start, end + d if end < 0 else end
    if step > 0:
        start, end = min(max(start, 0), d), min(max(end, 0), d)
        return max(0, -(-(end - start) // step))
    start, end = min(max(start, 0), d - 1), min(max(end, -1), d - 1)
    return max(0, -(-(start - end) // -step))


def slice_(b: Builder) -> bool:
    """Slice on a random subset of axes: starts/ends negative or beyond the dim (clamped),
    steps of +-1, +-2, +-3; axes and steps inputs left out sometimes."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=ANY)
    if x is None:
        return False
    rank = len(x.shape)
    axes = sorted(set(b.rng.integers(0, rank, int(b.rng.integers(1, rank + 1))).tolist()))
    starts, ends, steps, out = [], [], [], list(x.shape)
    for a in axes:
        d = x.shape[a]
        step = int(b.choice((1, 1, 1, 2, 3, -1, -2)))
        s = int(b.rng.integers(-d - 2, d + 2))
        e = int(b.rng.integers(-d - 2, d + 3)) if b.chance(0.8) else (2**63 - 1 if step > 0 else -(2**63))
        n = _slice_len(d, s, e, step)
        if n == 0 and not b.chance(0.1):  # an empty result now and then (a graph output only)
            s, e = (0, d) if step > 0 else (d - 1, -(2**63))
            n = _slice_len(d, s, e, step)
        starts.append(s), ends.append(e), steps.append(step)
        out[a] = n
    ins = [x.name, b.const("int64", [len(axes)], starts), b.const("int64", [len(axes)], ends)]
    full = axes == list(range(rank))
    if not (full and all(s == 1 for s in steps) and b.chance(0.5)):
        ins.append(b.const("int64", [len(axes)], [a - rank if b.chance(0.3) else a for a in axes]))
        if not (all(s == 1 for s in steps) and b.chance(0.5)):
            ins.append(b.const("int64", [len(axes)], steps))
    b.node("Slice", ins, [(x.dtype, tuple(out))], x.exact, x.mag)
    return True


def concat(b: Builder) -> bool:
    """Concat of a tensor with one or two others (from the pool where one fits, else
    constants) along a random axis."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=ANY)
    if x is None:
        return False
    rank = len(x.shape)
    ax = axis_of(b, rank)
    parts = [x]
    for _ in range(int(b.rng.integers(1, 3))):

        def fits(t):
            return len(t.shape) == rank and all(p == q for i, (p, q) in enumerate(zip(t.shape, x.shape)) if i != ax % rank)

        other = b.pick(fits, dtype=x.dtype) if b.chance(0.5) else None
        if other is None:
            shape = list(x.shape)
            shape[ax] = int(b.choice((1, 2, 3, 7)))
            other = T(b.const_like(x.dtype, shape, 3.0 if x.dtype == FLOAT else 5), x.dtype, tuple(shape), True, 3.0)
        parts.insert(int(b.rng.integers(len(parts) + 1)), other)
    out = list(x.shape)
    out[ax] = sum(p.shape[ax] for p in parts)
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node(
        "Concat",
        [p.name for p in parts],
        [(x.dtype, tuple(out))],
        all(p.exact for p in parts),
        max(p.mag for p in parts),
        axis=ax,
    )
    return True


def split(b: Builder) -> bool:
    """Split along an axis of size >= 2: given sizes (an input), equal parts, or at opset 18
    ``num_outputs`` (the last part smaller)."""
    x = b.pick(lambda t: any(d >= 2 for d in t.shape), dtype=ANY)
    if x is None:
        return False
    rank = len(x.shape)
    ax = b.choice([a for a in range(rank) if x.shape[a] >= 2])
    d = x.shape[ax]
    listed = ax - rank if b.chance(0.3) else ax
    mode = b.choice(("sizes", "sizes", "num_outputs" if b.spec["opset"] >= 18 else "sizes"))
    if mode == "sizes":
        cuts = sorted(b.rng.choice(range(1, d), min(d - 1, int(b.rng.integers(1, 4))), replace=False).tolist())
        sizes = [e - s for s, e in zip([0, *cuts], [*cuts, d])]
        ins, attrs = [x.name, b.const("int64", [len(sizes)], sizes)], {"axis": listed}
    else:
        n = int(b.rng.integers(2, min(d, 4) + 1))
        chunk = -(-d // n)
        sizes = [min(chunk, d - i * chunk) for i in range(n) if d - i * chunk > 0]
        if len(sizes) != n:
            return False
        ins, attrs = [x.name], {"axis": listed, "num_outputs": n}
    outs = []
    for s in sizes:
        shape = list(x.shape)
        shape[ax] = s
        outs.append((x.dtype, tuple(shape)))
    b.node("Split", ins, outs, x.exact, x.mag, **attrs)
    return True


def gather(b: Builder) -> bool:
    """Gather (constant int64 or int32 indices of rank 0 to 2, negative ones too) or
    GatherElements (indices of the data's rank) along a random axis."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=ANY)
    if x is None:
        return False
    rank = len(x.shape)
    ax = axis_of(b, rank)
    d = x.shape[ax]
    itype = b.choice(("int64", "int32"))
    if b.chance(0.3):
        shape = [
            int(b.rng.integers(1, s + 2)) if i == ax % rank else int(b.rng.integers(1, s + 1)) for i, s in enumerate(x.shape)
        ]
        idx = b.rng.integers(-d, d, math.prod(shape))
        b.node("GatherElements", [x.name, b.const(itype, shape, idx)], [(x.dtype, tuple(shape))], x.exact, x.mag, axis=ax)
        return True
    ishape = [int(b.choice((1, 2, 3, 5))) for _ in range(int(b.rng.integers(0, 3)))]
    idx = b.rng.integers(-d, d, math.prod(ishape))
    out = (*x.shape[: ax % rank], *ishape, *x.shape[ax % rank + 1 :])
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node("Gather", [x.name, b.const(itype, ishape, idx)], [(x.dtype, out)], x.exact, x.mag, axis=ax)
    return True


def pad(b: Builder) -> bool:
    """Pad in constant mode (a value sometimes; negative pads crop), reflect (pads below the
    dim) or edge mode; at opset 18 on a subset of axes sometimes."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=NUMERIC)
    if x is None:
        return False
    rank = len(x.shape)
    mode = b.choice(("constant", "constant", "reflect", "edge"))
    axes = list(range(rank))
    if b.spec["opset"] >= 18 and b.chance(0.3):
        axes = sorted(set(b.rng.integers(0, rank, int(b.rng.integers(1, rank + 1))).tolist()))
    pads = []
    for a in axes * 2:
        d = x.shape[a]
        hi = d - 1 if mode == "reflect" else 3
        lo = -(d // 2) if mode == "constant" and b.chance(0.2) else 0
        pads.append(int(b.rng.integers(lo, max(lo, hi) + 1)) if b.chance(0.7) else 0)
    out = list(x.shape)
    for i, a in enumerate(axes):
        out[a] += pads[i] + pads[i + len(axes)]
    if min(out) < 1 or math.prod(out) > MAX_ELEMENTS:
        return False
    ins = [x.name, b.const("int64", [len(pads)], pads)]
    if mode == "constant" and b.chance(0.5):
        ins.append(b.const(x.dtype, [], [1.5 if x.dtype == FLOAT else 3]))
    if len(axes) != rank:
        ins += [""] * (3 - len(ins)) + [b.const("int64", [len(axes)], axes)]
    b.node("Pad", ins, [(x.dtype, tuple(out))], x.exact, x.mag + 3, mode=mode)
    return True


def resize(b: Builder) -> bool:
    """Resize of the spatial dims of a 3-D/4-D tensor: nearest (every nearest_mode; exact on
    exact input), and on 4-D tensors linear or cubic (cubic_coeff_a, exclude_outside), with every coordinate
    transformation but tf_crop_and_resize, by scales or by sizes."""
    x = b.pick(lambda t: len(t.shape) in (3, 4) and t.size <= 2048)
    if x is None:
        return False
    n, c, *spatial = x.shape
    # onnxruntime interpolates (bi)linearly and bicubically on the 2 inner dims of 4-D data only
    mode = b.choice(("nearest", "nearest", "linear", "cubic") if len(spatial) == 2 else ("nearest",))
    attrs = {"mode": mode}
    ct = b.choice(("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"))
    if ct != "half_pixel":
        attrs["coordinate_transformation_mode"] = ct
    if mode == "nearest" and b.chance(0.7):
        attrs["nearest_mode"] = b.choice(("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))
    if mode == "cubic" and b.chance(0.5):
        attrs["cubic_coeff_a"] = -0.5
        attrs["exclude_outside"] = int(b.chance(0.5))
    if b.chance(0.5):
        scales = [float(b.choice((0.5, 1.0, 1.5, 2.0, 3.0, 0.6))) for _ in spatial]
        out = [int(math.floor(s * f)) for s, f in zip(spatial, scales)]
        ins = [x.name, "", b.const(FLOAT, [len(x.shape)], [1.0, 1.0, *scales])]
    else:
        out = [int(b.rng.integers(1, 2 * s + 3)) for s in spatial]
        ins = [x.name, "", "", b.const("int64", [len(x.shape)], [n, c, *out])]
    if min(out) < 1 or math.prod((n, c, *out)) > MAX_ELEMENTS:
        return False
    ratios = scales if len(ins) == 3 else [o / i for o, i in zip(out, spatial)]
    if mode == "nearest" and ct == "half_pixel_symmetric" and _symmetric_tie(spatial, out, ratios, attrs.get("nearest_mode")):
        attrs.pop("coordinate_transformation_mode")  # half_pixel: its ties are computed alike everywhere
    b.node("Resize", ins, [(FLOAT, (n, c, *out))], mode == "nearest" and x.exact, x.mag * (1 if mode != "cubic" else 2), **attrs)
    return True


def _symmetric_tie(spatial, out, scales, nearest_mode) -> bool:
    """Whether a half_pixel_symmetric coordinate of an axis whose size changes lies (in exact
    arithmetic, within 1e-4) on a tie of ``nearest_mode`` (a half-integer; an integer for
    floor and ceil): float32 rounding of the offset then decides the pick, and
    onnxruntime and ONNX's reference implementation pick differently (7 -> 4 by scale 0.6:
    coordinate 0.5, evaluated as 0.5000002)."""
    half = 0.0 if nearest_mode in ("floor", "ceil") else 0.5
    for n_in, n_out, s in zip(spatial, out, scales):
        if n_in == n_out:
            continue
        offset = n_in / 2 * (1 - n_out / (s * n_in))
        x = [offset + (i + 0.5) / s - 0.5 for i in range(n_out)]
        if any(abs((v - half) - round(v - half)) < 1e-4 for v in x):
            return True
    return False


def expand_tile(b: Builder) -> bool:
    """Expand (size-1 dims grown, new leading dims) or Tile (repeats 1 to 3)."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=ANY)
    if x is None:
        return False
    if b.chance(0.5):
        shape = [int(b.choice((3, 7))) if d == 1 and b.chance(0.6) else (1 if b.chance(0.2) else d) for d in x.shape]
        lead = [int(b.choice((1, 2, 3)))] if b.chance(0.3) else []
        out = (*lead, *(max(d, s) for d, s in zip(x.shape, shape)))
        if math.prod(out) > MAX_ELEMENTS:
            return False
        b.node("Expand", [x.name, b.const("int64", [len(shape) + len(lead)], [*lead, *shape])], [(x.dtype, out)], x.exact, x.mag)
        return True
    reps = [int(b.choice((1, 1, 2, 3))) for _ in x.shape]
    out = tuple(d * r for d, r in zip(x.shape, reps))
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node("Tile", [x.name, b.const("int64", [len(reps)], reps)], [(x.dtype, out)], x.exact, x.mag)
    return True


def depth_space(b: Builder) -> bool:
    """DepthToSpace (DCR or CRD) or SpaceToDepth with block 2 or 3 on a 4-D tensor."""
    x = b.pick(lambda t: len(t.shape) == 4)  # float32: onnxruntime has no integer kernels
    if x is None:
        return False
    n, c, h, w = x.shape
    for bs in b.rng.permutation([2, 3]).tolist():
        if c % (bs * bs) == 0 and b.chance(0.6):
            attrs = {"blocksize": bs, **({"mode": "CRD"} if b.chance(0.5) else {})}
            b.node("DepthToSpace", [x.name], [(x.dtype, (n, c // bs // bs, h * bs, w * bs))], x.exact, x.mag, **attrs)
            return True
        if h % bs == 0 and w % bs == 0:
            b.node("SpaceToDepth", [x.name], [(x.dtype, (n, c * bs * bs, h // bs, w // bs))], x.exact, x.mag, blocksize=bs)
            return True
    return False


def trilu(b: Builder) -> bool:
    """Trilu (upper or lower, k from -2 to 2 sometimes) or Identity."""
    x = b.pick(lambda t: len(t.shape) >= 2, dtype=NUMERIC)
    if x is None:
        return False
    if b.chance(0.2):
        b.node("Identity", [x.name], [(x.dtype, x.shape)], x.exact, x.mag)
        return True
    ins = [x.name] + ([b.const("int64", [], [int(b.rng.integers(-2, 3))])] if b.chance(0.5) else [])
    b.node("Trilu", ins, [(x.dtype, x.shape)], x.exact, x.mag, upper=int(b.chance(0.5)))
    return True


# -- control flow ----------------------------------------------------------------------


def _body(b: Builder, outer: list[T], seed_pool: list[T], steps: int) -> Builder:
    """A body Builder: its pool is ``seed_pool`` (the body's inputs) and ``outer`` (outer
    tensors it may read); ``steps`` elementwise draws that keep shapes."""
    from mnnpy.tools.cts.families import binary, unary

    body = Builder(b.rng, b.spec, nodes=[], body=True)
    body.pool = [*outer, *seed_pool]
    for _ in range(steps):
        (unary if b.chance(0.5) else lambda bb: binary(bb, grow=False))(body)
    return body


def _result(body: Builder, like: T) -> T:
    """The newest float tensor of ``body`` with ``like``'s shape (the body's output)."""
    for t in reversed(body.pool):
        if t.dtype == like.dtype and t.shape == like.shape:
            return t
    return like


def _io(t: T, name: str | None = None) -> dict:
    return {"name": name or t.name, "dtype": t.dtype, "shape": list(t.shape)}


def if_(b: Builder) -> bool:
    """If on a bool scalar (a new graph input): each branch one to three elementwise ops
    on an outer float tensor, giving its shape; the branches differ."""
    x = b.pick(max_mag=100)
    if x is None or b.body:
        return False
    cond = b.input(BOOL, (), dist="bernoulli")
    branches = []
    for _ in range(2):
        body = _body(b, [x], [], int(b.rng.integers(1, 4)))
        out = _result(body, x)
        if out is x:  # a branch must compute: Identity of the outer tensor
            (out,) = body.node("Identity", [x.name], [(x.dtype, x.shape)])
        branches.append({"graph": {"inputs": [], "nodes": body.nodes, "outputs": [_io(out)]}})
    b.node("If", [cond.name], [(FLOAT, x.shape)], mag=max(100.0, x.mag * 4), then_branch=branches[0], else_branch=branches[1])
    return True


def loop(b: Builder) -> bool:
    """Loop with a constant trip count (1 to 4; a cond input too, sometimes; the body's
    condition ``iteration < k`` sometimes) carrying a float tensor through one to three
    elementwise ops (bounded by a final Tanh), its values per iteration as a scan output
    sometimes."""
    x = b.pick(max_mag=100, pred=lambda t: t.size <= 4096)
    if x is None or b.body:
        return False
    trips = int(b.rng.integers(1, 5))
    v_in = T(b.name("v"), x.dtype, x.shape, False, x.mag)
    i_name, c_name = b.name("i"), b.name("cond")
    body = _body(b, [], [v_in], int(b.rng.integers(1, 3)))
    last = _result(body, v_in)
    (v_out,) = body.node("Tanh", [last.name], [(FLOAT, x.shape)])
    if b.chance(0.3):  # the condition computed: stop after k < trips iterations
        k = int(b.rng.integers(0, trips))
        (c_out,) = body.node("Less", [i_name, b.const("int64", [], [k])], [(BOOL, ())])
        trips_run = k + 1
    else:
        (c_out,) = body.node("Identity", [c_name], [(BOOL, ())])
        trips_run = trips
    outs = [_io(c_out), _io(v_out)]
    result = [(FLOAT, x.shape)]
    if b.chance(0.5):
        (s,) = body.node("Identity", [v_out.name], [(FLOAT, x.shape)])
        outs.append(_io(s))
        result.append((FLOAT, (trips_run, *x.shape)))
    graph = {"inputs": [{"name": i_name, "dtype": "int64", "shape": []}, {"name": c_name, "dtype": BOOL, "shape": []}, _io(v_in)]}
    graph.update(nodes=body.nodes, outputs=outs)
    cond = b.const(BOOL, [], [True]) if b.chance(0.5) else ""
    made = b.node("Loop", [b.const("int64", [], [trips]), cond, x.name], result, mag=1.0, body={"graph": graph})
    if len(made) == 2 and math.prod(made[1].shape) > MAX_ELEMENTS:
        b.pool.remove(made[1])
    return True

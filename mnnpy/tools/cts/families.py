"""The op families the generator draws from: each is a function ``(builder) -> bool`` that
adds one op (and its constants, and domain guards) reading tensors of the builder's pool, or
returns False where the pool holds nothing it can read. ``FAMILIES`` weighs them.

Attribute ranges follow the ONNX operator specification (onnx.ai/onnx/operators) of each
op at opset 17 or 18; shapes are computed here by its rules.
"""

from __future__ import annotations

import math

import numpy as np

from mnnpy.tools.cts.builder import BOOL, FLOAT, INTS, MAX_ELEMENTS, MAX_MAG, Builder, T, axis_of, bshape

# unary float ops: attrs drawer, exact (bit for bit), bound of the output given the input's
UNARY = {
    "Relu": (None, True, lambda m: m),
    "Abs": (None, True, lambda m: m),
    "Neg": (None, True, lambda m: m),
    "Sigmoid": (None, False, lambda m: 1.0),
    "Tanh": (None, False, lambda m: 1.0),
    "Sin": (None, False, lambda m: 1.0),
    "Cos": (None, False, lambda m: 1.0),
    "Erf": (None, False, lambda m: 1.0),
    "Atan": (None, False, lambda m: 1.6),
    "Softsign": (None, False, lambda m: 1.0),
    "Softplus": (None, False, lambda m: m + 1),
    "Asinh": (None, False, lambda m: math.log(2 * m + 1) + 1),
    "HardSwish": (None, False, lambda m: m),
    "LeakyRelu": (lambda b: {"alpha": b.choice((0.01, 0.2, 1.5))}, False, lambda m: 1.5 * m),
    "Elu": (lambda b: {"alpha": b.choice((1.0, 0.5))}, False, lambda m: m + 1),
    "Celu": (lambda b: {"alpha": b.choice((1.0, 2.0))}, False, lambda m: m + 2),
    "Selu": (lambda b: {} if b.chance(0.5) else {"alpha": 1.5, "gamma": 1.1}, False, lambda m: 1.1 * m + 2),
    "HardSigmoid": (lambda b: {"alpha": b.choice((0.2, 0.5)), "beta": b.choice((0.5, 0.3))}, False, lambda m: 1.0),
    "Exp": (None, False, math.exp),
    "Sinh": (None, False, math.exp),
    "Cosh": (None, False, math.exp),
}
EXPLOSIVE = {"Exp": 6.0, "Sinh": 6.0, "Cosh": 6.0}
POSITIVE_UNARY = {"Sqrt": math.sqrt, "Log": lambda m: abs(math.log(m)) + 1, "Reciprocal": lambda m: 2.0}
# discontinuous unary ops: exact inputs only; attrs
STEP_UNARY = {
    "Floor": None,
    "Ceil": None,
    "Round": None,
    "Sign": None,
    "ThresholdedRelu": lambda b: {"alpha": b.choice((0.5, 1.0))},
    "Shrink": lambda b: {"lambd": 0.5, "bias": b.choice((0.0, 0.25))},
}
BINARY = ("Add", "Sub", "Mul", "Max", "Min", "Div", "Pow")


def unary(b: Builder) -> bool:
    """A unary float op (``UNARY``), or a domain-guarded one (``POSITIVE_UNARY``), or a Clip."""
    kind = b.choice((*UNARY, *POSITIVE_UNARY, "Clip", *(("Mish",) if b.spec["opset"] >= 18 else ())))
    x = b.pick(max_mag=EXPLOSIVE.get(kind, MAX_MAG))
    if x is None:
        return False
    if kind in POSITIVE_UNARY:
        src, m = b.positive(x)
        b.node(kind, [src], [(FLOAT, x.shape)], mag=POSITIVE_UNARY[kind](m))
    elif kind == "Clip":
        lo, hi = b.choice(((-0.5, 0.5), (0.0, 6.0), (-1.0, None), (None, 2.0)))
        ins = [x.name, "" if lo is None else b.const(FLOAT, [], [lo])] + ([] if hi is None else [b.const(FLOAT, [], [hi])])
        b.node("Clip", ins, [(FLOAT, x.shape)], x.exact, x.mag)
    elif kind == "Mish":
        b.node(kind, [x.name], [(FLOAT, x.shape)], mag=x.mag)
    else:
        draw, exact, mag = UNARY[kind]
        b.node(kind, [x.name], [(FLOAT, x.shape)], exact and x.exact, mag(x.mag), **(draw(b) if draw else {}))
    return True


def step_unary(b: Builder) -> bool:
    """A discontinuous unary op (``STEP_UNARY``) on an exact float tensor."""
    x = b.pick(exact=True)
    if x is None:
        return False
    op = b.choice(list(STEP_UNARY))
    draw = STEP_UNARY[op]
    b.node(op, [x.name], [(FLOAT, x.shape)], True, x.mag + 1, **(draw(b) if draw else {}))
    return True


def _second(b: Builder, a: T, dtype: str, grow: bool = True, exact: bool = False) -> T | None:
    """A second operand broadcasting with ``a``: a pool tensor of ``dtype`` (40%) or a new
    constant of a broadcast shape (as a T, not in the pool)."""
    if b.chance(0.4):

        def fits(t):
            try:
                out = bshape(a.shape, t.shape)
            except ValueError:
                return False
            return t is not a and (out == a.shape or grow) and math.prod(out) <= MAX_ELEMENTS

        other = b.pick(fits, dtype, exact=exact)
        if other is not None:
            return other
    shape = b.broadcast_shape(a.shape, grow)
    if math.prod(bshape(a.shape, shape)) > MAX_ELEMENTS:
        shape = ()
    return T(b.const_like(dtype, shape, 1.0 if dtype == FLOAT else 5), dtype, shape, True, 3.0 if dtype == FLOAT else 5)


def binary(b: Builder, grow: bool = True) -> bool:
    """A broadcasting binary float op; Div's denominator and Pow's base guarded to >= 0.5,
    Pow's exponent a constant in [-1, 2]; Mul and Pow only on bounded operands. The
    operands are swapped half the time."""
    op = b.choice(BINARY)
    a = b.pick(max_mag=30.0 if op in ("Mul", "Pow") else MAX_MAG)
    if a is None:
        return False
    if op == "Pow":
        base, m = b.positive(a)
        e = b.choice((2.0, 0.5, -1.0, 3.0)) if b.chance(0.6) else None
        exp = (
            b.const(FLOAT, [], [e])
            if e is not None
            else b.const(FLOAT, b.broadcast_shape(a.shape, False), dist="uniform", low=-1.0, high=2.0)
        )
        b.node("Pow", [base, exp], [(FLOAT, a.shape)], mag=m**3)
        return True
    c = _second(b, a, FLOAT, grow)
    if c is None or (op == "Mul" and c.mag > 30):
        return False
    out = bshape(a.shape, c.shape)
    if op == "Div":
        den, _ = b.positive(c)
        b.node("Div", [a.name, den], [(FLOAT, out)], mag=2 * a.mag)
        return True
    ins = [a.name, c.name] if b.chance(0.5) else [c.name, a.name]
    mag = {"Add": a.mag + c.mag, "Sub": a.mag + c.mag, "Mul": a.mag * c.mag}.get(op, max(a.mag, c.mag))
    b.node(op, ins, [(FLOAT, out)], op in ("Max", "Min") and a.exact and c.exact, mag)
    return True


def variadic(b: Builder) -> bool:
    """Sum, Mean, Max or Min of two or three broadcasting operands."""
    a = b.pick()
    if a is None:
        return False
    op = b.choice(("Sum", "Mean", "Max", "Min"))
    others = [_second(b, a, FLOAT, True) for _ in range(int(b.rng.integers(1, 3)))]
    try:
        out = bshape(a.shape, *(o.shape for o in others))
    except ValueError:  # two operands that each broadcast with a, not with each other
        return False
    if math.prod(out) > MAX_ELEMENTS:
        return False
    exact = op in ("Max", "Min") and a.exact and all(o.exact for o in others)
    b.node(op, [a.name, *(o.name for o in others)], [(FLOAT, out)], exact, a.mag + sum(o.mag for o in others))
    return True


def prelu(b: Builder) -> bool:
    """PRelu with a constant slope that broadcasts to the input (unidirectionally)."""
    x = b.pick(lambda t: len(t.shape) >= 1)
    if x is None:
        return False
    shape = b.broadcast_shape(x.shape, grow=False)
    b.node("PRelu", [x.name, b.const(FLOAT, shape, dist="uniform", low=-0.5, high=0.5)], [(FLOAT, x.shape)], mag=x.mag)
    return True


def integer(b: Builder) -> bool:
    """Integer arithmetic on an int32/int64 tensor: Add, Sub, Mul, Max, Min, Div and Mod (by
    a non-zero constant, of either sign), Neg, Abs; bitwise ops at opset 18."""
    ops = ["Add", "Sub", "Mul", "Max", "Min", "Div", "Mod", "Neg", "Abs"]
    if b.spec["opset"] >= 18:
        ops += ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"]
    op = b.choice(ops)
    a = b.pick(dtype=INTS, max_mag=1000 if op == "Mul" else 1e6)
    if a is None:
        return False
    if op in ("Neg", "Abs", "BitwiseNot"):
        b.node(op, [a.name], [(a.dtype, a.shape)], True, a.mag + 1)
        return True
    if op in ("Div", "Mod"):
        shape = b.broadcast_shape(a.shape, False)
        vals = b.rng.integers(1, 8, math.prod(shape)) * b.rng.choice([-1, 1], math.prod(shape))
        attrs = {"fmod": int(b.chance(0.5))} if op == "Mod" else {}
        b.node(op, [a.name, b.const(a.dtype, shape, vals)], [(a.dtype, a.shape)], True, a.mag, **attrs)
        return True
    c = _second(b, a, a.dtype, exact=True)
    if op == "Mul" and c.mag > 1000:
        return False
    out = bshape(a.shape, c.shape)
    if math.prod(out) > MAX_ELEMENTS:
        return False
    mag = a.mag * c.mag if op == "Mul" else a.mag + c.mag
    b.node(op, [a.name, c.name] if b.chance(0.5) else [c.name, a.name], [(a.dtype, out)], True, mag)
    return True


def compare(b: Builder) -> bool:
    """A comparison of exact tensors (float or integer) with a broadcasting operand -> bool."""
    a = b.pick(dtype=(FLOAT, *INTS), exact=True)
    if a is None:
        return False
    op = b.choice(("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"))
    return _to_bool(b, op, a, _second(b, a, a.dtype, exact=True))


def logic(b: Builder) -> bool:
    """And, Or, Xor with a broadcasting bool operand, or Not."""
    a = b.pick(dtype=BOOL)
    if a is None:
        return False
    op = b.choice(("And", "Or", "Xor", "Not"))
    if op == "Not":
        b.node(op, [a.name], [(BOOL, a.shape)], True, 1)
        return True
    return _to_bool(b, op, a, _second(b, a, BOOL))


def _to_bool(b: Builder, op: str, a: T, c: T) -> bool:
    """``op(a, c)`` broadcast to a bool tensor, where its size stays within ``MAX_ELEMENTS``."""
    out = bshape(a.shape, c.shape)
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node(op, [a.name, c.name], [(BOOL, out)], True, 1)
    return True


def where(b: Builder) -> bool:
    """Where(cond, x, y): cond a pool bool tensor or a constant, x and y broadcasting."""
    x = b.pick(dtype=(FLOAT, *INTS))
    if x is None:
        return False
    cond = _second(b, x, BOOL, grow=False)
    y = _second(b, x, x.dtype, grow=False)
    out = bshape(bshape(x.shape, cond.shape), y.shape)
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node("Where", [cond.name, x.name, y.name], [(x.dtype, out)], x.exact and y.exact, max(x.mag, y.mag))
    return True


def cast(b: Builder) -> bool:
    """Cast between float32, int32, int64 and bool: float to int or bool from exact tensors
    of moderate size only (truncation is a step function)."""
    x = b.pick(dtype=(FLOAT, *INTS, BOOL))
    if x is None:
        return False
    targets = [d for d in (FLOAT, *INTS, BOOL) if x.dtype != FLOAT or (x.exact and x.mag < 1e6) or d == FLOAT]
    to = b.choice(targets)
    b.node("Cast", [x.name], [(to, x.shape)], x.exact, x.mag, to=int(_onnx_dtype(to)))
    return True


def _onnx_dtype(name: str) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(name))


def _window(b: Builder, size: int, max_k: int = 5, dilate: bool = True, pad_below_kernel: bool = False):
    """(kernel, stride, dilation, pad_begin, pad_end) for one spatial dim of ``size`` such
    that the output has at least one element, or None."""
    for _ in range(8):
        k = int(b.rng.integers(1, max_k + 1))
        d = int(b.choice((1, 1, 2))) if dilate else 1
        s = int(b.choice((1, 1, 2, 3)))
        eff = (k - 1) * d + 1
        limit = k - 1 if pad_below_kernel else eff - 1
        pb, pe = (int(b.rng.integers(0, limit + 1)) for _ in range(2)) if limit > 0 and b.chance(0.6) else (0, 0)
        if size + pb + pe >= eff:
            return k, s, d, pb, pe
    return None


def _windows(b: Builder, spatial: tuple, **kw):
    """``_window`` per spatial dim, as ONNX attribute lists, or None."""
    ws = [_window(b, s, **kw) for s in spatial]
    if any(w is None for w in ws):
        return None
    k, s, d, pb, pe = (list(v) for v in zip(*ws))
    return {"kernel_shape": k, "strides": s, "dilations": d, "pads": pb + pe}


def _out_dim(size, k, s, d, pb, pe, ceil=False):
    span = size + pb + pe - ((k - 1) * d + 1)
    return (-(-span // s) if ceil else span // s) + 1


def _auto_pad(b: Builder, attrs: dict, spatial: tuple) -> tuple:
    """Sometimes replace explicit pads by ``auto_pad``; the output's spatial dims."""
    same = tuple(-(-x // s) for x, s in zip(spatial, attrs["strides"]))
    # onnxruntime refuses SAME where the needed pad is negative (a stride above the kernel)
    negative = any((o - 1) * s + k - x < 0 for o, s, k, x in zip(same, attrs["strides"], attrs["kernel_shape"], spatial))
    if b.chance(0.25):
        mode = b.choice(("VALID",) if negative else ("SAME_UPPER", "SAME_LOWER", "VALID"))
        del attrs["pads"]
        attrs["auto_pad"] = mode
        if mode != "VALID":  # SAME with dilation left out: onnxruntime's output size differs by version
            attrs["dilations"] = [1] * len(spatial)
        if mode == "VALID":
            return tuple(
                _out_dim(x, k, s, d, 0, 0)
                for x, k, s, d in zip(spatial, attrs["kernel_shape"], attrs["strides"], attrs["dilations"])
            )
        return same
    n = len(spatial)
    pads = attrs["pads"]
    return tuple(
        _out_dim(x, k, s, d, pads[i], pads[i + n])
        for i, (x, k, s, d) in enumerate(zip(spatial, attrs["kernel_shape"], attrs["strides"], attrs["dilations"]))
    )


def _spatial(t: T) -> bool:
    return len(t.shape) in (3, 4) and t.shape[1] <= 16 and t.size <= 4096


def conv(b: Builder) -> bool:
    """Conv (1-D or 2-D; groups 1, depthwise or another divisor of C; strides, dilations,
    pads or auto_pad; a bias half the time), He-scaled constant weights."""
    x = b.pick(_spatial, max_mag=100)
    if x is None:
        return False
    n, c, *spatial = x.shape
    attrs = _windows(b, tuple(spatial))
    if attrs is None:
        return False
    out_sp = _auto_pad(b, attrs, tuple(spatial))
    if min(out_sp) < 1:
        return False
    group = b.choice([g for g in (1, c, *(g for g in (2, 3) if c % g == 0)) if c % g == 0])
    m = group * int(b.choice((1, 2, 3))) if group > 1 else int(b.choice((1, 3, 4, 7, 8)))
    fan = c // group * math.prod(attrs["kernel_shape"])
    ins = [x.name, b.const(FLOAT, [m, c // group, *attrs["kernel_shape"]], dist="normal", scale=1 / math.sqrt(fan))]
    if b.chance(0.5):
        ins.append(b.const(FLOAT, [m], dist="normal", scale=0.5))
    if group > 1:
        attrs["group"] = group
    if math.prod((n, m, *out_sp)) > MAX_ELEMENTS:
        return False
    b.node("Conv", ins, [(FLOAT, (n, m, *out_sp))], mag=3 * x.mag + 2, **attrs)
    return True


def conv_transpose(b: Builder) -> bool:
    """ConvTranspose (1-D or 2-D, groups, strides, dilations, pads, output_padding below the
    stride), constant weights (C, M/group, k...)."""
    x = b.pick(_spatial, max_mag=100)
    if x is None:
        return False
    n, c, *spatial = x.shape
    nd = len(spatial)
    k = [int(b.rng.integers(1, 4)) for _ in spatial]
    s = [int(b.choice((1, 2, 3))) for _ in spatial]
    d = [int(b.choice((1, 1, 2))) for _ in spatial]
    pads = [int(b.rng.integers(0, (kk - 1) * dd + 1)) if b.chance(0.5) else 0 for kk, dd in zip(k * 2, d * 2)]
    op = [int(b.rng.integers(0, ss)) if b.chance(0.3) else 0 for ss in s]  # below the stride (onnxruntime's rule)
    out_sp = [
        ss * (x_ - 1) + o + (kk - 1) * dd + 1 - pads[i] - pads[i + nd]
        for i, (x_, kk, ss, dd, o) in enumerate(zip(spatial, k, s, d, op))
    ]
    group = b.choice([g for g in (1, c) if c % g == 0])
    m = group * int(b.choice((1, 2)))
    if min(out_sp) < 1 or math.prod((n, m, *out_sp)) > MAX_ELEMENTS:
        return False
    w = b.const(FLOAT, [c, m // group, *k], dist="normal", scale=1 / math.sqrt(max(1, c // group * math.prod(k) // math.prod(s))))
    ins = [x.name, w] + ([b.const(FLOAT, [m], dist="normal", scale=0.5)] if b.chance(0.5) else [])
    attrs = {"kernel_shape": k, "strides": s, "dilations": d, "pads": pads}
    if any(op):
        attrs["output_padding"] = op
    if group > 1:
        attrs["group"] = group
    b.node("ConvTranspose", ins, [(FLOAT, (n, m, *out_sp))], mag=3 * x.mag + 2, **attrs)
    return True


def pool(b: Builder) -> bool:
    """MaxPool (dilations), AveragePool (count_include_pad), LpPool, each with pads below the
    kernel and ceil_mode sometimes; or GlobalAveragePool/GlobalMaxPool/GlobalLpPool."""
    x = b.pick(lambda t: len(t.shape) in (3, 4) and t.size <= 8192)
    if x is None:
        return False
    op = b.choice(("MaxPool", "MaxPool", "AveragePool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool"))
    n, c, *spatial = x.shape
    if op.startswith("Global"):
        b.node(op, [x.name], [(FLOAT, (n, c, *[1] * len(spatial)))], op == "GlobalMaxPool" and x.exact, x.mag)
        return True
    attrs = _windows(b, tuple(spatial), dilate=op == "MaxPool", pad_below_kernel=True)
    if attrs is None:
        return False
    ceil = b.chance(0.25) and op != "LpPool"  # LpPool's ceil_mode: opset 18
    nd = len(spatial)
    if ceil:
        attrs["ceil_mode"] = 1
        pads = attrs["pads"]
        out_sp = []
        for i, (sz, k, s, d) in enumerate(zip(spatial, attrs["kernel_shape"], attrs["strides"], attrs["dilations"])):
            o = _out_dim(sz, k, s, d, pads[i], pads[i + nd], ceil=True)
            if (o - 1) * s >= sz + pads[i]:  # a last window starting in the right pad: the rule differs by version
                return False
            out_sp.append(o)
        out_sp = tuple(out_sp)
    else:
        out_sp = _auto_pad(b, attrs, tuple(spatial))
    if op != "MaxPool":
        del attrs["dilations"]
    if op == "AveragePool" and b.chance(0.5):
        attrs["count_include_pad"] = 1
    if op == "LpPool":
        attrs["p"] = int(b.choice((1, 2, 3)))
    if min(out_sp) < 1 or op == "MaxPool" and _padding_only(spatial, out_sp, attrs):
        return False
    b.node(op, [x.name], [(FLOAT, (n, c, *out_sp))], op == "MaxPool" and x.exact, x.mag * (1 if op != "LpPool" else 30), **attrs)
    return True


def _padding_only(spatial, out_sp, attrs) -> bool:
    """Whether a (dilated) window lies wholly in the padding: ONNX leaves its max undefined
    (onnxruntime gives -3.4e38, ONNX's reference 0, mnnpy -inf; ``tests/cts_specs``)."""
    if "pads" not in attrs:
        return False
    for i, (size, out) in enumerate(zip(spatial, out_sp)):
        k, s, d, pb = attrs["kernel_shape"][i], attrs["strides"][i], attrs["dilations"][i], attrs["pads"][i]
        if any(all(not 0 <= o * s - pb + j * d < size for j in range(k)) for o in range(out)):
            return True
    return False


def gemm(b: Builder) -> bool:
    """Gemm on a 2-D tensor (transA, transB, alpha, beta, a bias C broadcast from a scalar, a
    row, a column or a full matrix) with constant B."""
    a = b.pick(lambda t: len(t.shape) == 2, max_mag=100)
    if a is None:
        return False
    ta = b.chance(0.3)
    m, k = a.shape[::-1] if ta else a.shape
    n = int(b.choice((1, 3, 7, 13, 16)))
    tb = b.chance(0.4)
    attrs = {}
    if ta:
        attrs["transA"] = 1
    if tb:
        attrs["transB"] = 1
    if b.chance(0.3):
        attrs["alpha"] = b.choice((0.5, 2.0))
    ins = [a.name, b.const(FLOAT, [n, k] if tb else [k, n], dist="normal", scale=1 / math.sqrt(k))]
    if b.chance(0.6):
        ins.append(b.const(FLOAT, b.choice(([], [n], [1, n], [m, 1], [m, n])), dist="normal", scale=0.5))
        if b.chance(0.3):
            attrs["beta"] = b.choice((0.5, 2.0))
    b.node("Gemm", ins, [(FLOAT, (m, n))], mag=3 * a.mag + 2, **attrs)
    return True


def matmul(b: Builder) -> bool:
    """MatMul: a tensor of rank >= 1 times a constant (K, N) or (K,), or times another pool
    tensor whose last-but-one dim matches (batch dims broadcasting)."""
    a = b.pick(lambda t: len(t.shape) >= 1, max_mag=100)
    if a is None:
        return False
    k = a.shape[-1]

    def fits(t):
        if t is a or len(t.shape) < 2 or t.shape[-2] != k or t.mag > 100:
            return False
        try:
            out = (*bshape(a.shape[:-2], t.shape[:-2]), *a.shape[-2:-1], t.shape[-1])
        except ValueError:
            return False
        return math.prod(out) <= MAX_ELEMENTS

    other = b.pick(fits) if len(a.shape) >= 2 and b.chance(0.3) else None
    if other is not None:
        out = (*bshape(a.shape[:-2], other.shape[:-2]), *a.shape[-2:-1], other.shape[-1])
        b.node("MatMul", [a.name, other.name], [(FLOAT, out)], mag=a.mag * other.mag * 3)
        return True
    if b.chance(0.15):
        b.node(
            "MatMul", [a.name, b.const(FLOAT, [k], dist="normal", scale=1 / math.sqrt(k))], [(FLOAT, a.shape[:-1])], mag=3 * a.mag
        )
        return True
    n = int(b.choice((1, 3, 7, 13)))
    out = (*a.shape[:-1], n)
    if math.prod(out) > MAX_ELEMENTS:
        return False
    b.node("MatMul", [a.name, b.const(FLOAT, [k, n], dist="normal", scale=1 / math.sqrt(k))], [(FLOAT, out)], mag=3 * a.mag)
    return True


REDUCE = {  # op: (dtypes it takes, exact on exact input, output bound (input bound, count))
    "ReduceSum": ((FLOAT, *INTS), False, lambda m, n: m * n),
    "ReduceMean": ((FLOAT,), False, lambda m, n: m),
    "ReduceMax": ((FLOAT, *INTS), True, lambda m, n: m),
    "ReduceMin": ((FLOAT, *INTS), True, lambda m, n: m),
    "ReduceProd": ((FLOAT,), False, lambda m, n: m**n),
    "ReduceL1": ((FLOAT,), False, lambda m, n: m * n),
    "ReduceL2": ((FLOAT,), False, lambda m, n: m * math.sqrt(n)),
    "ReduceSumSquare": ((FLOAT,), False, lambda m, n: m * m * n),
    "ReduceLogSumExp": ((FLOAT,), False, lambda m, n: m + math.log(n) + 1),
    "ReduceLogSum": ((FLOAT,), False, lambda m, n: m + math.log(n) + 1),
}


def reduce(b: Builder) -> bool:
    """A reduction over a random set of axes (none: all; negative axes; keepdims either way),
    axes as an attribute or, for ReduceSum and at opset 18 for all, an input.
    ReduceLogSum reads ``Abs(x) + 0.5``; ReduceProd only few, bounded elements."""
    op = b.choice(list(REDUCE))
    dtypes, exact, bound = REDUCE[op]
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=dtypes, max_mag=3.0 if op == "ReduceProd" else 1000)
    if x is None:
        return False
    rank = len(x.shape)
    axes = sorted({axis_of(b, rank) % rank for _ in range(int(b.rng.integers(1, rank + 1)))}) if b.chance(0.8) else None
    count = math.prod(x.shape[a] for a in axes) if axes else x.size
    if op == "ReduceProd" and count > 13:
        return False
    keep = b.chance(0.5)
    shape = tuple(
        1 if (axes is None or i in axes) else d for i, d in enumerate(x.shape) if keep or not (axes is None or i in axes)
    )
    src = x.name
    if op == "ReduceLogSum":
        src, _ = b.positive(x)
    attrs = {} if keep else {"keepdims": 0}
    ins = [src]
    if axes is not None:
        listed = [a - rank if b.chance(0.3) else a for a in axes]
        if op == "ReduceSum" or b.spec["opset"] >= 18:
            ins.append(b.const("int64", [len(listed)], listed))
        else:
            attrs["axes"] = listed
    b.node(op, ins, [(x.dtype, shape)], exact and x.exact or x.dtype != FLOAT, bound(x.mag, count), **attrs)
    return True


def _exact_along_axis(b: Builder):
    """An exact float or integer tensor of rank >= 1, its rank and an axis drawn for it;
    ``(None, 0, 0)`` where the pool has none."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=(FLOAT, *INTS), exact=True)
    if x is None:
        return None, 0, 0
    return x, len(x.shape), axis_of(b, len(x.shape))


def arg_reduce(b: Builder) -> bool:
    """ArgMax/ArgMin of an exact tensor (axis, keepdims, select_last_index) -> int64."""
    x, rank, ax = _exact_along_axis(b)
    if x is None:
        return False
    keep = b.chance(0.5)
    shape = tuple(1 if i == ax % rank else d for i, d in enumerate(x.shape) if keep or i != ax % rank)
    attrs = {"axis": ax, "keepdims": int(keep)}
    if b.chance(0.3):
        attrs["select_last_index"] = 1
    b.node(b.choice(("ArgMax", "ArgMin")), [x.name], [("int64", shape)], True, max(x.shape), **attrs)
    return True


def softmax(b: Builder) -> bool:
    """Softmax or LogSoftmax along a random axis; Hardmax (a step function) on exact tensors."""
    op = b.choice(("Softmax", "LogSoftmax", "Hardmax"))
    x = b.pick(lambda t: len(t.shape) >= 1, exact=op == "Hardmax", max_mag=1000)
    if x is None:
        return False
    rank = len(x.shape)
    attrs = {"axis": axis_of(b, rank)} if b.chance(0.8) else {}
    b.node(op, [x.name], [(FLOAT, x.shape)], op == "Hardmax", 1.0 if op != "LogSoftmax" else 2 * x.mag + 10, **attrs)
    return True


def norm(b: Builder) -> bool:
    """A normalisation with constant parameters: LayerNormalization (axis, epsilon; bias
    sometimes), BatchNormalization (inference), InstanceNormalization, LpNormalization,
    MeanVarianceNormalization, LRN."""
    op = b.choice(
        (
            "LayerNormalization",
            "BatchNormalization",
            "InstanceNormalization",
            "LpNormalization",
            "MeanVarianceNormalization",
            "LRN",
        )
    )
    need = {
        "LayerNormalization": 1,
        "LpNormalization": 1,
        "BatchNormalization": 2,
        "InstanceNormalization": 3,
        "MeanVarianceNormalization": 4,
        "LRN": 4,
    }[op]
    # MeanVarianceNormalization: graph inputs only (a variance of 0 is 0/0, NaN on onnxruntime)
    inputs = {e["name"] for e in b.spec["inputs"]} if op == "MeanVarianceNormalization" else None
    x = b.pick(
        lambda t: len(t.shape) >= need and (need < 4 or len(t.shape) == 4) and (inputs is None or t.name in inputs), max_mag=1000
    )
    if x is None:
        return False
    rank, c = len(x.shape), x.shape[1] if len(x.shape) > 1 else 1
    attrs, ins, mag = {}, [x.name], 10.0
    if op == "LayerNormalization":
        ax = axis_of(b, rank)
        attrs["axis"] = ax
        ins.append(b.const(FLOAT, x.shape[ax % rank :], dist="normal"))
        if b.chance(0.6):
            ins.append(b.const(FLOAT, x.shape[ax % rank :], dist="normal"))
        if b.chance(0.3):
            attrs["epsilon"] = 1e-3
    elif op == "BatchNormalization":
        ins += [b.const(FLOAT, [c], dist="normal"), b.const(FLOAT, [c], dist="normal")]
        ins += [b.const(FLOAT, [c], dist="normal"), b.const(FLOAT, [c], dist="uniform", low=0.5, high=2.0)]
        mag = 3 * x.mag + 3
    elif op == "InstanceNormalization":
        ins += [b.const(FLOAT, [c], dist="normal"), b.const(FLOAT, [c], dist="normal")]
    elif op == "LpNormalization":
        attrs = {"axis": axis_of(b, rank), "p": int(b.choice((1, 2)))}
        mag = 1.0
    elif op == "MeanVarianceNormalization":
        attrs["axes"] = b.choice(([0, 2, 3], [2, 3], [1], [0, 1, 2, 3]))
        if math.prod(x.shape[a] for a in attrs["axes"]) < 2:
            return False
    else:
        attrs = {"size": int(b.choice((1, 3, 5))), "alpha": 1e-3, "beta": 0.75, "bias": b.choice((1.0, 2.0))}
        mag = x.mag
    b.node(op, ins, [(FLOAT, x.shape)], mag=mag, **attrs)
    return True


def cumsum(b: Builder) -> bool:
    """CumSum along an axis given as an input (exclusive, reverse sometimes)."""
    x = b.pick(lambda t: len(t.shape) >= 1, dtype=(FLOAT, *INTS), max_mag=1000)
    if x is None:
        return False
    rank = len(x.shape)
    ax = axis_of(b, rank)
    attrs = {k: 1 for k in ("exclusive", "reverse") if b.chance(0.3)}
    b.node("CumSum", [x.name, b.const("int64", [], [ax])], [(x.dtype, x.shape)], x.dtype != FLOAT, x.mag * x.shape[ax], **attrs)
    return True


def topk(b: Builder) -> bool:
    """TopK of an exact tensor (k from 1 to the axis size, largest or smallest, sorted)."""
    x, rank, ax = _exact_along_axis(b)
    if x is None:
        return False
    k = int(b.rng.integers(1, x.shape[ax] + 1))
    shape = tuple(k if i == ax % rank else d for i, d in enumerate(x.shape))
    attrs = {"axis": ax}
    if b.chance(0.3):
        attrs["largest"] = 0
    b.node("TopK", [x.name, b.const("int64", [1], [k])], [(x.dtype, shape), ("int64", shape)], True, x.mag, **attrs)
    return True

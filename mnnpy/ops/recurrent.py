"""LSTM, GRU and RNN (ONNX operators.md, opset-14+ form with ``layout``).

Shapes (``D`` = num_directions: 2 when ``direction`` is bidirectional, else 1;
``G`` = gates * hidden_size with 4 gates for LSTM, 3 for GRU, 1 for RNN):

- X: ``(seq, batch, input)`` (layout 0) or ``(batch, seq, input)`` (layout 1)
- W: ``(D, G, input)``, R: ``(D, G, hidden)``, B: ``(D, 2G)``, sequence_lens: ``(batch,)``
- initial_h / initial_c: ``(D, batch, hidden)`` (layout 0) or ``(batch, D, hidden)``
- P (LSTM peepholes): ``(D, 3 * hidden)``
- Y: ``(seq, D, batch, hidden)`` (layout 0) or ``(batch, seq, D, hidden)``;
  Y_h / Y_c: as initial_h.

Opsets 7..13 have no ``layout`` attribute (it is 0); every other attribute is the same
from opset 7 on, so the converter copies the node.
"""

from __future__ import annotations

from mnnpy.ops.flops import numel
from mnnpy.ops.registry import Attr, In, op_schema

DIRECTIONS = ("forward", "reverse", "bidirectional")
ACTIVATIONS = (
    "relu",
    "tanh",
    "sigmoid",
    "affine",
    "leakyrelu",
    "thresholdedrelu",
    "scaledtanh",
    "hardsigmoid",
    "elu",
    "softsign",
    "softplus",
)

# op type -> (number of gates, activations per direction, default activations)
GATES = {"LSTM": (4, 3, ("Sigmoid", "Tanh", "Tanh")), "GRU": (3, 2, ("Sigmoid", "Tanh")), "RNN": (1, 1, ("Tanh",))}


def _common_attrs(extra: dict[str, Attr]) -> dict[str, Attr]:
    attrs = {
        "activation_alpha": Attr("floats", ()),
        "activation_beta": Attr("floats", ()),
        "activations": Attr("strings", ()),
        "clip": Attr("float", None),
        "direction": Attr("string", "forward", DIRECTIONS),
        "hidden_size": Attr("int", None),
        "layout": Attr("int", 0, (0, 1)),
    }
    attrs.update(extra)
    return attrs


def _infer(ctx):
    """Shared shape rules; returns ``[(shape, dtype)]`` for Y, Y_h (and Y_c)."""
    op = ctx.op.type
    n_gates, n_act, _ = GATES[op]
    x, w, r = ctx.shapes[0], ctx.shapes[1], ctx.shapes[2]
    if len(x) != 3 or len(w) != 3 or len(r) != 3:
        ctx.fail("X, W and R must be 3-D")
    layout = ctx.attrs["layout"]
    seq, batch = (x[0], x[1]) if layout == 0 else (x[1], x[0])
    d = 2 if ctx.attrs["direction"] == "bidirectional" else 1
    hidden = r[2]
    hs = ctx.attrs["hidden_size"]
    if hs is not None and hs != hidden:
        ctx.fail(f"hidden_size {hs} does not match R's last dim {hidden}")
    g = n_gates * hidden
    if tuple(w) != (d, g, x[2]):
        ctx.fail(f"W must have shape {(d, g, x[2])} (num_directions, {n_gates}*hidden_size, input_size)")
    if tuple(r) != (d, g, hidden):
        ctx.fail(f"R must have shape {(d, g, hidden)} (num_directions, {n_gates}*hidden_size, hidden_size)")
    if ctx.has(3) and tuple(ctx.shapes[3]) != (d, 2 * g):
        ctx.fail(f"B must have shape {(d, 2 * g)}")
    if ctx.has(4):
        if tuple(ctx.shapes[4]) != (batch,):
            ctx.fail(f"sequence_lens must have shape ({batch},)")
        if ctx.dtypes[4].kind not in "iu":
            ctx.fail("sequence_lens must be an integer tensor")
    state = (d, batch, hidden) if layout == 0 else (batch, d, hidden)
    for i in (5, 6) if op == "LSTM" else (5,):
        if ctx.has(i) and tuple(ctx.shapes[i]) != state:
            ctx.fail(f"initial state input {i} must have shape {state}")
    if op == "LSTM" and ctx.has(7) and tuple(ctx.shapes[7]) != (d, 3 * hidden):
        ctx.fail(f"P must have shape {(d, 3 * hidden)}")
    acts = ctx.attrs["activations"]
    if acts:
        if len(acts) != n_act * d:
            ctx.fail(f"activations must list {n_act * d} functions ({n_act} per direction), got {len(acts)}")
        for a in acts:
            if a.lower() not in ACTIVATIONS:
                ctx.fail(f"unknown activation '{a}'")
    if ctx.dtypes[0].kind != "f":
        ctx.fail("X must be a float tensor")
    y = (seq, d, batch, hidden) if layout == 0 else (batch, seq, d, hidden)
    dt = ctx.dtypes[0]
    outs = [(y, dt), (state, dt)]
    if op == "LSTM":
        outs.append((state, dt))
    return outs


GATE_FLOPS = {"LSTM": 20, "GRU": 16, "RNN": 3}  # per hidden unit and step: biases, activations, state update


def recurrent_flops(ctx, outs) -> float:
    """per step, direction and batch row: ``2 G (input + hidden)`` (the gate products, ``G`` =
    gates * hidden) and the gate arithmetic (LSTM 20, GRU 16, RNN 3 per hidden unit)"""
    d, g, n_in = ctx.shapes[1]
    hidden = ctx.shapes[2][2]
    steps = numel(ctx.shapes[0][:2])  # seq * batch
    return d * steps * (2 * g * (n_in + hidden) + GATE_FLOPS[ctx.op.type] * hidden)


@op_schema(
    "LSTM",
    [
        "X",
        "W",
        "R",
        In("B", optional=True),
        In("sequence_lens", optional=True),
        In("initial_h", optional=True),
        In("initial_c", optional=True),
        In("P", optional=True),
    ],
    ["Y", "Y_h", "Y_c"],
    attrs=_common_attrs({"input_forget": Attr("int", 0, (0, 1))}),
    flops=recurrent_flops,
)
def lstm(ctx):
    """LSTM (gates i, o, f, c; default activations Sigmoid, Tanh, Tanh; peepholes P[iof]).

    ``it = f(Xt Wi^T + Ht-1 Ri^T + Pi*Ct-1 + Wbi + Rbi)``, ``ft`` likewise (``1 - it`` with
    ``input_forget``), ``ct = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc)``, ``Ct = ft*Ct-1 + it*ct``,
    ``ot = f(Xt Wo^T + Ht-1 Ro^T + Po*Ct + Wbo + Rbo)``, ``Ht = ot*h(Ct)``; ``clip`` bounds
    every gate's pre-activation.
    """
    return _infer(ctx)


@op_schema(
    "GRU",
    ["X", "W", "R", In("B", optional=True), In("sequence_lens", optional=True), In("initial_h", optional=True)],
    ["Y", "Y_h"],
    attrs=_common_attrs({"linear_before_reset": Attr("int", 0)}),
    flops=recurrent_flops,
)
def gru(ctx):
    """GRU (gates z, r, h; default activations Sigmoid, Tanh).

    ``zt = f(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz)``, ``rt`` likewise,
    ``ht = g(Xt Wh^T + (rt*Ht-1) Rh^T + Rbh + Wbh)`` (or ``rt*(Ht-1 Rh^T + Rbh)`` with
    ``linear_before_reset``), ``Ht = (1 - zt)*ht + zt*Ht-1``.
    """
    return _infer(ctx)


@op_schema(
    "RNN",
    ["X", "W", "R", In("B", optional=True), In("sequence_lens", optional=True), In("initial_h", optional=True)],
    ["Y", "Y_h"],
    attrs=_common_attrs({}),
    flops=recurrent_flops,
)
def rnn(ctx):
    """Simple RNN: ``Ht = f(Xt Wi^T + Ht-1 Ri^T + Wbi + Rbi)`` (default activation Tanh)."""
    return _infer(ctx)

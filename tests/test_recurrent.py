"""LSTM, GRU and RNN against onnxruntime: directions, layouts, optional inputs and outputs,
sequence lengths, initial states, activations, clip, peepholes, input_forget,
linear_before_reset, weights as constants and as graph inputs."""

import numpy as np
import pytest
from onnx import helper

from tests.oracle import ACCUMULATE, check, make_model, rand, run_mnnpy, run_ort

SEQ, BATCH, INPUT, HIDDEN = 7, 3, 5, 11
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
LENS = np.array([7, 4, 1], np.int32)


def _build(op, params, names, outs, layout, opset, weights_as_inputs, attrs, dtype=np.float32):
    """The node's model and feeds for ``layout`` (``params`` are in layout-0 form)."""
    params = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in params.items()}
    if layout == 1:
        params["X"] = params["X"].transpose(1, 0, 2).copy()
        for k in ("initial_h", "initial_c"):
            if k in params:
                params[k] = params[k].transpose(1, 0, 2).copy()
    if opset >= 14:
        attrs = dict(attrs, layout=layout)
    node = helper.make_node(op, names, outs, **attrs)
    x = params.pop("X")
    feeds = {"X": x, **(params if weights_as_inputs else {})}
    inits = {} if weights_as_inputs else params
    return make_model([node], feeds, [o for o in outs if o], inits, opset=opset), feeds


def _model(
    rng,
    op,
    direction="forward",
    layout=0,
    bias=True,
    lens=None,
    initial=False,
    peephole=False,
    outputs=("Y", "Y_h", "Y_c"),
    weights_as_inputs=False,
    opset=14,
    seq=SEQ,
    batch=BATCH,
    **attrs,
):
    """``(model, feeds, layout-0 twin model, its feeds, layout)``.

    onnxruntime runs only layout 0: a layout-1 model is checked against its layout-0 twin
    (inputs and outputs transposed).
    """
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op] * HIDDEN
    params = {
        "X": rand(rng, seq, batch, INPUT),
        "W": rand(rng, d, g, INPUT, scale=0.5),
        "R": rand(rng, d, g, HIDDEN, scale=0.5),
    }
    names = ["X", "W", "R"]
    if bias:
        params["B"] = rand(rng, d, 2 * g, scale=0.5)
    names.append("B" if bias else "")
    if lens is not None:
        params["sequence_lens"] = np.asarray(lens, np.int32)
    names.append("sequence_lens" if lens is not None else "")
    if initial:
        params["initial_h"] = rand(rng, d, batch, HIDDEN)
    names.append("initial_h" if initial else "")
    if op == "LSTM":
        if initial:
            params["initial_c"] = rand(rng, d, batch, HIDDEN)
        names.append("initial_c" if initial else "")
        if peephole:
            params["P"] = rand(rng, d, 3 * HIDDEN, scale=0.5)
        names.append("P" if peephole else "")
    while names and not names[-1]:
        names.pop()
    n_out = 3 if op == "LSTM" else 2
    outs = [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:n_out]]
    while outs and not outs[-1]:
        outs.pop()
    attrs = dict(attrs, hidden_size=HIDDEN, direction=direction)
    model, feeds = _build(op, params, names, outs, layout, opset, weights_as_inputs, attrs)
    twin, twin_feeds = _build(op, params, names, outs, 0, opset, weights_as_inputs, attrs)
    return model, feeds, twin, twin_feeds, layout


def _to_layout1(name, a):
    return a.transpose(2, 0, 1, 3) if name == "Y" else a.transpose(1, 0, 2)


def _check(model, feeds, twin, twin_feeds, layout):
    if layout == 0:
        check(model, feeds, **ACCUMULATE)
        return
    expected = run_ort(twin, twin_feeds)
    actual = run_mnnpy(model, feeds)
    for e, a, o in zip(expected, actual, model.graph.output):
        e = _to_layout1(o.name, e)
        assert a.shape == e.shape and a.dtype == e.dtype, (o.name, a.shape, e.shape)
        np.testing.assert_allclose(a, e, err_msg=o.name, **ACCUMULATE)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_layouts(rng, op, direction, layout):
    _check(*_model(rng, op, direction, layout, initial=True))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_sequence_lens(rng, op, direction, layout):
    """Shorter sequences: Y zero past each length, Y_h (Y_c) at the last valid step."""
    _check(*_model(rng, op, direction, layout, lens=LENS, initial=layout == 1))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_full_lengths_and_no_bias(rng, op):
    _check(*_model(rng, op, "bidirectional", bias=False, lens=[SEQ] * BATCH))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("outputs", [("Y",), ("Y_h",), ("Y_c",), ("Y", "Y_c")])
def test_optional_outputs(rng, op, outputs):
    if op != "LSTM" and outputs == ("Y_c",):
        outputs = ("Y_h",)
    if op != "LSTM":
        outputs = tuple(o for o in outputs if o != "Y_c") or ("Y",)
    _check(*_model(rng, op, "bidirectional", outputs=outputs, initial=True))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_weights_as_inputs(rng, op):
    """Weights, lengths and states fed at run time (reloaded every run)."""
    _check(*_model(rng, op, "bidirectional", lens=LENS, initial=True, weights_as_inputs=True))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("opset", [7, 13, 22])
def test_opsets(rng, op, opset):
    _check(*_model(rng, op, "reverse", lens=LENS, initial=True, opset=opset))


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_peepholes(rng, direction, layout):
    _check(*_model(rng, "LSTM", direction, layout, lens=LENS, initial=True, peephole=True))


@pytest.mark.parametrize("peephole", [False, True])
def test_lstm_input_forget(rng, peephole):
    _check(*_model(rng, "LSTM", "bidirectional", initial=True, peephole=peephole, input_forget=1))


@pytest.mark.parametrize("op,peephole", [("LSTM", False), ("LSTM", True), ("GRU", False), ("RNN", False)])
def test_clip(rng, op, peephole):
    _check(*_model(rng, op, "bidirectional", initial=True, peephole=peephole, clip=0.7))


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("layout", [0, 1])
def test_gru_linear_before_reset(rng, lbr, layout):
    _check(*_model(rng, "GRU", "bidirectional", layout, lens=LENS, initial=True, linear_before_reset=lbr))


ACTS = [
    ("Relu", [], []),
    ("Tanh", [], []),
    ("Sigmoid", [], []),
    ("Affine", [0.7], [0.2]),
    ("LeakyRelu", [0.3], []),
    ("LeakyRelu", [], []),
    ("ThresholdedRelu", [0.25], []),
    ("ScaledTanh", [1.3], [0.6]),
    ("HardSigmoid", [0.3], [0.4]),
    ("HardSigmoid", [], []),
    ("Elu", [0.8], []),
    ("Softsign", [], []),
    ("Softplus", [], []),
]


@pytest.mark.parametrize("act,alpha,beta", ACTS, ids=[f"{a}{'_args' if al else ''}" for a, al, _ in ACTS])
def test_rnn_activations(rng, act, alpha, beta):
    attrs = {"activations": [act, "Tanh"]}
    # alphas/betas are consumed in activation order by the activations that use them
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    _check(*_model(rng, "RNN", "bidirectional", lens=LENS, initial=True, **attrs))


def test_lstm_activations(rng):
    attrs = {
        "activations": ["HardSigmoid", "Softsign", "LeakyRelu", "Sigmoid", "ScaledTanh", "Elu"],
        "activation_alpha": [0.25, 0.2, 1.1, 0.9],
        "activation_beta": [0.45, 0.7],
    }
    _check(*_model(rng, "LSTM", "bidirectional", lens=LENS, initial=True, **attrs))


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_activations(rng, lbr):
    attrs = {
        "activations": ["Sigmoid", "Softsign", "HardSigmoid", "Affine"],
        "activation_alpha": [0.3, 0.5],
        "activation_beta": [0.4, -0.1],
    }
    _check(*_model(rng, "GRU", "bidirectional", 1, initial=True, linear_before_reset=lbr, **attrs))


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_repeated_runs(rng, op):
    """A session run twice (states reset per run) and fed new lengths gives onnxruntime's outputs."""
    import mnnpy
    from mnnpy.converter import convert

    model, feeds, _, _, _ = _model(rng, op, "bidirectional", lens=LENS, initial=True, weights_as_inputs=True)
    session = mnnpy.Interpreter(convert(model)).create_session(backend="cpu")
    for lens in (LENS, np.array([2, 7, 5], np.int32), np.full(BATCH, SEQ, np.int32)):
        feeds = dict(feeds, sequence_lens=lens)
        expected = run_ort(model, feeds)
        for _ in range(2):
            out = session.run(feeds)
            for e, o in zip(expected, model.graph.output):
                np.testing.assert_allclose(out[o.name], e, **ACCUMULATE)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
def test_single_step_batch_one(rng, op):
    _check(*_model(rng, op, "bidirectional", 1, seq=1, batch=1, initial=True))


# a one-off bound for float16 data through a recurrence: each step's fp16 rounding is carried on
FP16_RECURRENCE = {"atol": 1e-2, "rtol": 1e-2}


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, ACCUMULATE), (np.float16, FP16_RECURRENCE)])
def test_dtypes(rng, op, dtype, tol):
    """float64 / float16 models against onnxruntime's float32 result of the same values."""
    args = (op, "bidirectional", 0, True, LENS, True)
    model32, feeds32 = _model(rng, *args)[:2]
    node = model32.graph.node[0]
    names, outs = list(node.input), list(node.output)
    attrs = {a.name: helper.get_attribute_value(a) for a in model32.graph.node[0].attribute}
    attrs = {k: [x.decode() for x in v] if k == "activations" else v for k, v in attrs.items()}
    from onnx import numpy_helper

    params = {"X": feeds32["X"], **{t.name: numpy_helper.to_array(t) for t in model32.graph.initializer}}
    model, feeds = _build(op, params, names, outs, 0, 14, False, attrs, dtype)
    expected = run_ort(model32, feeds32)
    actual = run_mnnpy(model, feeds)
    for e, a, o in zip(expected, actual, model.graph.output):
        assert a.dtype == dtype and a.shape == e.shape, o.name
        np.testing.assert_allclose(a.astype(np.float64), e, err_msg=o.name, **tol)

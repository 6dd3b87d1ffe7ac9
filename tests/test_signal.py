"""Signal ops against onnxruntime: windows, DFT (opsets 17 and 20), STFT, MelWeightMatrix."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.oracle import ACCUMULATE, FLOAT64, check, make_model, rand

# a one-off bound for the generated float32 tables (windows, mel weights): cosines and
# ratios evaluated in another order than onnxruntime's, a few ulp of values up to 1
TABLES = {"atol": 1e-6, "rtol": 1e-6}


def _model(op, inputs, inits, opset, outputs=("y",), **attrs):
    node = helper.make_node(op, list(inputs) + list(inits), list(outputs), **attrs)
    return make_model([node], inputs, list(outputs), initializers=inits, opset=opset)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [1, 2, 10, 33])
def test_windows(op, periodic, size):
    m = _model(op, {}, {"size": np.array(size, np.int64)}, 17, periodic=periodic)
    check(m, {}, **TABLES)


def test_window_float64_output():
    m = _model("HannWindow", {}, {"size": np.array(17, np.int32)}, 17, output_datatype=TensorProto.DOUBLE)
    check(m, {}, **FLOAT64)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("complex_in,onesided,inverse", [(0, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)])
@pytest.mark.parametrize("axis,length", [(1, None), (2, None), (1, 6), (1, 13)])
def test_dft(rng, opset, complex_in, onesided, inverse, axis, length):
    x = rand(rng, 2, 9, 5, 2 if complex_in else 1)
    inits = {}
    names = ["x"]
    if length is not None or opset >= 20:
        inits["n"] = np.array(length if length is not None else x.shape[axis], np.int64)
    attrs = {"onesided": onesided, "inverse": inverse}
    if opset >= 20:
        inits["axis"] = np.array(axis, np.int64)
    else:
        attrs["axis"] = axis
    node = helper.make_node("DFT", names + list(inits), ["y"], **attrs)
    m = make_model([node], {"x": x}, ["y"], initializers=inits, opset=opset)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("with_window", [False, True])
def test_stft(rng, onesided, with_window):
    x = rand(rng, 2, 67, 1)
    inits = {"step": np.array(7, np.int64)}
    names = ["x", "step"]
    if with_window:
        inits["win"] = np.hanning(16).astype(np.float32)
        names.append("win")
    else:
        names.append("")
        inits["fl"] = np.array(16, np.int64)
        names.append("fl")
    node = helper.make_node("STFT", names, ["y"], onesided=onesided)
    m = make_model([node], {"x": x}, ["y"], initializers=inits, opset=17)
    check(m, {"x": x}, **ACCUMULATE)


@pytest.mark.parametrize("nmel,dft,rate,lo,hi", [(8, 64, 8000, 0.0, 4000.0), (5, 33, 16000, 100.0, 6000.0)])
def test_mel_weight_matrix(nmel, dft, rate, lo, hi):
    inits = {
        "nmel": np.array(nmel, np.int64),
        "dft": np.array(dft, np.int64),
        "rate": np.array(rate, np.int64),
        "lo": np.array(lo, np.float32),
        "hi": np.array(hi, np.float32),
    }
    check(_model("MelWeightMatrix", {}, inits, 17), {}, **TABLES)

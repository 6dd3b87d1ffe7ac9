"""The activation table (``mnnpy/ops/activation.py``) and what it feeds: one CPU kernel per
entry, Conv fusion, the GPU expressions (every entry with one runs on each GPU backend against
the CPU, NaN and infinities included), float16 through float32, in-place fused kernels."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import mnnpy
from mnnpy.ir import Graph, Net, Op, TensorDesc
from mnnpy.ops.activation import ACTIVATIONS, FUSED, GPU, fused_code
from tests.backend_compare import conv_model, gpu_backends
from tests.oracle import ELEMENTWISE, HALF, rand

# float16 in and out: the input is rounded to fp16 before the kernel and the result after it,
# so both errors and their growth through exp/tanh count: 4x the fp16 bound
FP16_KERNEL = {k: 4 * v for k, v in HALF.items()}

SHAPE = (13, 7, 127)
SPECIAL = [0.0, -0.0, np.nan, 1e-3, -1e-3, 30.0, -30.0]  # infinities: tests/test_gpu_elementwise.py


def unary_net(op_type: str, shape, dtype=np.float32, attrs=None) -> Net:
    """A Net of one table op ``x -> op -> y`` built in the IR (defaults for every attribute)."""
    g = Graph()
    tx = g.add_tensor(TensorDesc("x", np.dtype(dtype), shape))
    ty = g.add_tensor(TensorDesc("y", np.dtype(dtype), None))
    g.ops.append(Op(op_type, "op", [tx], [ty], dict(attrs or {})))
    g.inputs, g.outputs = [tx], [ty]
    return Net(graphs=[g])


def _input(rng, op_type: str) -> np.ndarray:
    x = rand(rng, *SHAPE, scale=3.0)
    if op_type == "Acosh":
        x = np.abs(x) + 1
    x.flat[: len(SPECIAL)] = SPECIAL
    return x


# -- the table and its consumers -------------------------------------------------------


def test_every_entry_has_a_cpu_kernel_and_nothing_else():
    from mnnpy.backends.cpu.ops.activation import KERNELS

    assert set(KERNELS) == set(ACTIVATIONS)


def test_every_entry_is_an_op_with_a_converter_and_cpu_execution():
    from mnnpy.backends.cpu.registry import executions
    from mnnpy.converter.registry import converters
    from mnnpy.ops import get_schema

    for name, act in ACTIVATIONS.items():
        s = get_schema(name)
        assert s.elementwise and s.same_rank == (0,) and list(s.attrs) == list(act.attrs), name
        assert name in converters() and name in executions(), name


def test_fused_activations_run_on_gpus_and_have_codes():
    from mnnpy.ops.conv import FUSED_ACTIVATIONS

    assert set(FUSED) <= set(GPU), "a Conv-fusable activation needs a GPU expression"
    assert FUSED_ACTIVATIONS == ("", *FUSED)
    assert [fused_code(a) for a in ("", *FUSED)] == list(range(len(FUSED) + 1))
    with pytest.raises(KeyError):
        fused_code("Exp")


def test_gpu_entries_are_registered_on_both_gpu_backends():
    from mnnpy.backends.opencl.registry import executions as opencl
    from mnnpy.backends.vulkan.registry import executions as vulkan

    for table in (opencl(), vulkan()):
        assert set(GPU) <= set(table)
        assert {t for t, cls in table.items() if cls.__name__ == "Unary"} == set(GPU)


def test_scalars():
    assert ACTIVATIONS["HardSigmoid"].scalars({}) == (0.2, 0.5)
    assert ACTIVATIONS["LeakyRelu"].scalars({"alpha": 0.3}) == (0.3,)
    assert ACTIVATIONS["Gelu"].scalars({"approximate": "tanh"}) == (1.0,)
    big = float(np.finfo(np.float32).max)
    assert ACTIVATIONS["Clip"].scalars({}, [None, np.array(-1.0, np.float32), None]) == (-1.0, big)
    assert ACTIVATIONS["Relu"].scalars({}) == ()


def test_opencl_source_selects_each_activation():
    from mnnpy.backends.opencl.activation import activation, source

    text = source()
    for name in GPU:
        assert f"defined(ACT_{name.upper()})" in text and f"#define act_{name.lower()}(x, a0, a1)" in text
    assert activation("")[0] == "-D ACT_NONE"
    with pytest.raises(KeyError):
        activation("Erf")


@pytest.mark.parametrize("op", FUSED)
def test_converter_fuses_each_fusable_activation(rng, op):
    """With default attributes (Clip: constant bounds); the values: tests/test_optimize.py."""
    from mnnpy.converter import to_net
    from mnnpy.converter.optimize import op_counts, optimize

    bounds = [np.float32(-1), np.float32(2)] if op == "Clip" else []
    model, _ = conv_model(rng, (1, 3, 9, 11), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, after=[(op, {}, bounds)])
    net = to_net(model, optimize_graph=False)
    optimize(net)
    assert op_counts(net) == Counter({"Conv": 1})
    conv = net.main.ops[0]
    assert conv.attrs["activation"] == op
    assert list(conv.attrs["activation_params"]) == list(ACTIVATIONS[op].scalars({}, [None, *bounds]))


# -- kernels ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", list(ACTIVATIONS))
def test_float16_is_close_to_float32(rng, op):
    """Each kernel on float16 (through float32 where marked ``f32``) against float32."""
    x = _input(rng, op)
    with np.errstate(all="ignore"):
        x16 = x.astype(np.float16)
        want = mnnpy.Interpreter(unary_net(op, SHAPE)).create_session().run({"x": x16.astype(np.float32)})["y"]
        got = mnnpy.Interpreter(unary_net(op, SHAPE, np.float16)).create_session().run({"x": x16})["y"]
    assert got.dtype == np.float16
    finite = np.isfinite(want) & (np.abs(want) < 6e4)
    np.testing.assert_allclose(got[finite], want[finite], **FP16_KERNEL)
    with np.errstate(over="ignore"):
        assert np.array_equal(np.isnan(got), np.isnan(want.astype(np.float16)))


@pytest.mark.parametrize("op", FUSED)
def test_in_place_fused_kernel_matches_the_op(rng, op):
    from mnnpy.backends.cpu.ops.activation import apply_activation, needs_scratch

    x = _input(rng, op)
    params = (-0.5, 0.75) if op == "Clip" else ACTIVATIONS[op].scalars({})
    want = mnnpy.Interpreter(unary_net(op, SHAPE)).create_session().run({"x": x})["y"] if op != "Clip" else np.clip(x, *params)
    y = x.copy()
    apply_activation(op, params, y, np.empty_like(y) if needs_scratch(op) else None)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op", ["Relu", "Neg", "Abs", "Sign", "Clip"])
def test_integer_inputs(op):
    x = np.arange(-6, 7, dtype=np.int32).reshape(13, 1)
    y = mnnpy.Interpreter(unary_net(op, x.shape, np.int32)).create_session().run({"x": x})["y"]
    want = {"Relu": np.maximum(x, 0), "Neg": -x, "Abs": np.abs(x), "Sign": np.sign(x), "Clip": x}[op]
    np.testing.assert_array_equal(y, want)


# -- GPU expressions against the CPU -----------------------------------------------------


@pytest.mark.parametrize("op", GPU)
@pytest.mark.parametrize("backend", gpu_backends())
def test_gpu_expression_matches_cpu(rng, backend, op):
    x = _input(rng, op)
    net = unary_net(op, SHAPE)
    dev = mnnpy.Interpreter(net).create_session(backend=[backend, "cpu"])
    with np.errstate(all="ignore"):
        got, want = dev.run({"x": x})["y"], mnnpy.Interpreter(net).create_session().run({"x": x})["y"]
    np.testing.assert_allclose(got, want, **ELEMENTWISE, equal_nan=True)
    assert "on cpu" not in dev.partitions()


@pytest.mark.parametrize("backend", gpu_backends())
def test_gpu_swish_alpha(rng, backend):
    """Swish's ``alpha`` reaches the GPU kernels (``x * sigmoid(alpha * x)``)."""
    x = rand(rng, *SHAPE, scale=3.0)
    net = unary_net("Swish", SHAPE, attrs={"alpha": 0.37})
    got = mnnpy.Interpreter(net).create_session(backend=[backend, "cpu"]).run({"x": x})["y"]
    np.testing.assert_allclose(got, x / (1 + np.exp(-0.37 * x)), atol=ELEMENTWISE["atol"], rtol=1e-6)


def test_elu_with_infinite_alpha_keeps_non_negative_inputs():
    """``Elu(x) = x`` for ``x >= 0`` whatever ``alpha`` is: with ``alpha=inf`` the CPU took
    ``0 * inf`` (NaN) for them (onnxruntime: ``[-inf, 0, 0.5, 2]``)."""
    from onnx import helper

    from tests.oracle import check, make_model

    x = np.array([-1.0, 0.0, 0.5, 2.0, -0.0], np.float32)
    model = make_model([helper.make_node("Elu", ["x"], ["y"], alpha=float("inf"))], {"x": x}, ["y"])
    got = check(model, {"x": x}, **ELEMENTWISE)[0]
    np.testing.assert_array_equal(got, [-np.inf, 0.0, 0.5, 2.0, 0.0])

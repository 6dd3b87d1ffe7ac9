"""Helpers for GPU-backend tests: run one ONNX model on a backend and on the CPU, compare.

Tolerances (DESIGN.md, NNAPI CTS): fp32 elementwise ``ELEMENTWISE``; ops that accumulate
``ACCUMULATE``; fp16 storage (``precision="low"``) ``HALF``.
"""

from __future__ import annotations

import numpy as np
from onnx import helper

import mnnpy
from mnnpy.converter import convert

ELEMENTWISE = (1e-5, 5 * 2**-23)
ACCUMULATE = (1e-4, 1e-4)
HALF = (5 * 2**-10, 5 * 2**-10)


def sessions(model, backend: str = "opencl", precision: str = "normal", **options):
    """(``[backend, "cpu"]`` session, CPU-only session) of one ONNX model."""
    interp = mnnpy.Interpreter(convert(model))
    return interp.create_session(backend=[backend, "cpu"], precision=precision, **options), interp.create_session(backend="cpu")


def compare(model, feeds, tol=ELEMENTWISE, on_device=True, backend: str = "opencl", precision: str = "normal", **options):
    """Run on both; assert ``|cpu - dev| <= atol + rtol*|cpu|`` per output (NaN where the CPU
    has NaN). ``on_device``: also assert that every op ran on ``backend`` (no CPU partition).
    Returns the device session."""
    atol, rtol = tol
    dev, cpu = sessions(model, backend, precision, **options)
    got, want = dev.run(feeds), cpu.run(feeds)
    for name, e in want.items():
        a = got[name]
        assert a.shape == e.shape and a.dtype == e.dtype, (name, a.shape, e.shape, a.dtype, e.dtype)
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, equal_nan=True, err_msg=name)
    if on_device:
        desc = dev.partitions()
        assert "on cpu" not in desc and f"on {backend}" in desc, desc
    return dev


def partitioned_model(rng):
    """x (1, 3, h, w) -> Relu -> Erf (no GPU execution: CPU) -> Add z (3, 1, 1) -> Sigmoid -> y:
    GPU, CPU, GPU partitions with one border copy each way."""
    from tests.oracle import make_model, rand

    x, z = rand(rng, 1, 3, 13, 7), rand(rng, 3, 1, 1)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Erf", ["r"], ["c"]),
        helper.make_node("Add", ["c", "z"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["y"]),
    ]
    return make_model(nodes, {"x": x, "z": z}, ["y"], input_shapes={"x": [1, 3, "h", "w"]})

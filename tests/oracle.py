"""The test oracle: build a small ONNX model, run it on onnxruntime and on mnnpy, compare.

The tolerances (``ELEMENTWISE``, ``ACCUMULATE``, ``HALF``, ``EXACT``) are defined once, in
``mnnpy.tools.tolerances`` (DESIGN.md, after the Android NNAPI CTS), and imported here.
Each is a read-only mapping ``{"atol": ..., "rtol": ...}``: pass it as ``**TOL`` to
``check`` or ``numpy.testing.assert_allclose``, or as ``tol=TOL`` to the helpers of
``tests/backend_compare.py``. A looser bound for one test is a named constant beside that
test, with its reason.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import mnnpy
from mnnpy.converter import convert
from mnnpy.tools.tolerances import ACCUMULATE, ELEMENTWISE, EXACT, HALF  # noqa: F401 - the tests' names for them

# float64 data (a few CPU ops against onnxruntime): a double-precision bound
FLOAT64 = MappingProxyType({"atol": 1e-12, "rtol": 1e-12})
# a one-off, looser bound: chains of a dozen dependent elementwise ops that each add their
# input back, where the rounding of every step adds up (GPU against CPU)
ELEMENTWISE_CHAIN = MappingProxyType({"atol": 1e-4, "rtol": 1e-5})


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    outputs: list[str],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    input_shapes: dict[str, list] | None = None,
) -> onnx.ModelProto:
    """A one-graph ModelProto; input dtypes/shapes from the sample arrays (override with ``input_shapes``)."""
    ins = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), (input_shapes or {}).get(k, list(v.shape)))
        for k, v in inputs.items()
    ]
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "test", ins, outs, inits)
    ir = 7 if opset <= 12 else 8 if opset <= 14 else 9 if opset <= 18 else 10
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs (single thread, all optimisations off for a faithful reference)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_mnnpy(model: onnx.ModelProto, feeds: dict[str, np.ndarray], backend: str = "cpu") -> list[np.ndarray]:
    """mnnpy's outputs in graph-output order, after a round trip through the file format."""
    session = mnnpy.Interpreter(convert(model)).create_session(backend=backend)
    out = session.run(feeds)
    return [out[o.name] for o in model.graph.output]


def assert_outputs(expected: list, actual: list, names: list[str], atol: float, rtol: float) -> None:
    """Assert each ``actual`` output has the ``expected`` one's shape and dtype and lies within
    ``atol + rtol*|expected|`` of it (equal where both are 0)."""
    assert len(actual) == len(expected)
    for e, a, name in zip(expected, actual, names):
        assert a.shape == e.shape, f"{name}: shape {a.shape} != {e.shape}"
        assert a.dtype == e.dtype, f"{name}: dtype {a.dtype} != {e.dtype}"
        if atol == 0 and rtol == 0:
            np.testing.assert_array_equal(a, e, err_msg=name)
        else:
            np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, err_msg=name)


def check(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], atol: float, rtol: float, backend: str = "cpu"
) -> list[np.ndarray]:
    """Assert mnnpy matches onnxruntime elementwise within ``atol + rtol*|expected|``; exact dtype and shape."""
    actual = run_mnnpy(model, feeds, backend)
    assert_outputs(run_ort(model, feeds), actual, [o.name for o in model.graph.output], atol, rtol)
    return actual


def rand(rng: np.random.Generator, *shape: int, dtype=np.float32, scale: float = 1.0) -> np.ndarray:
    """Seeded standard-normal data of ``shape`` and ``dtype``."""
    return np.asarray(rng.standard_normal(shape) * scale).astype(dtype)

"""ONNX backend node tests on mnnpy's OpenCL backend.

Each case runs with the inputs it feeds a fixed value as constants (weights, bounds, indices:
``node_cases.with_constant_inputs``) and the CPU running the ops OpenCL lacks; it passes when
its outputs match, and ``docs/conformance.md`` counts it for OpenCL only by where its ops ran
(``conformance.outcome``). Expected failures, each with its reason:
``opencl_expected_failures.json``. Skipped, with the reason, where OpenCL is unusable.
"""

import pytest

from mnnpy.backend import backend_availability
from tests.conformance.conformance import node_tests

_available, _reason = backend_availability("opencl")
pytestmark = pytest.mark.skipif(not _available, reason=f"OpenCL unavailable here: {_reason}")

test_node, test_expected_failures_name_selected_cases = node_tests("opencl")

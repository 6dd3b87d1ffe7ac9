"""ONNX backend node tests on mnnpy's OpenCL backend (the CPU runs the ops it lacks).

Expected failures, each with its reason: ``opencl_expected_failures.json``. Skipped, with
the reason, where no OpenCL device is usable.
"""

import pytest

from mnnpy.backend import backend_availability
from tests.conformance.conformance import node_tests

_available, _reason = backend_availability("opencl")
pytestmark = pytest.mark.skipif(not _available, reason=f"OpenCL unavailable here: {_reason}")

test_node, test_expected_failures_name_selected_cases = node_tests("opencl")

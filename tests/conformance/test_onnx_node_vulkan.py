"""ONNX backend node tests on mnnpy's Vulkan backend (the CPU runs the ops it lacks).

Expected failures, each with its reason: ``vulkan_expected_failures.json`` (the CPU's: every
op this backend lacks falls back to the CPU). Skipped, with the reason, where Vulkan is
unusable.
"""

import pytest

from mnnpy.backend import backend_availability
from tests.conformance.conformance import node_tests

_available, _reason = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _available, reason=f"Vulkan unavailable here: {_reason}")

test_node, test_expected_failures_name_selected_cases = node_tests("vulkan")

"""ONNX backend node tests on mnnpy's Vulkan backend.

Each case runs with the inputs it feeds a fixed value as constants (weights, bounds, indices:
``node_cases.with_constant_inputs``) and the CPU running the ops Vulkan lacks; it passes when
its outputs match, and ``docs/conformance.md`` counts it for Vulkan only by where its ops ran
(``conformance.outcome``). Expected failures, each with its reason:
``vulkan_expected_failures.json``. Skipped, with the reason, where Vulkan is unusable.
"""

import pytest

from mnnpy.backend import backend_availability
from tests.conformance.conformance import node_tests

_available, _reason = backend_availability("vulkan")
pytestmark = pytest.mark.skipif(not _available, reason=f"Vulkan unavailable here: {_reason}")

test_node, test_expected_failures_name_selected_cases = node_tests("vulkan")

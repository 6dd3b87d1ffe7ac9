"""The tolerances of every comparison with the reference, defined here once (DESIGN.md,
after the Android NNAPI CTS): ``|expected - actual| <= atol + rtol*|expected|`` with

- ``ELEMENTWISE``: fp32 elementwise ops, ``atol = 1e-5, rtol = 5 * 2**-23``;
- ``ACCUMULATE``: ops that accumulate (conv, matmul, pooling, softmax, reductions,
  normalisations), ``atol = rtol = 1e-4``;
- ``HALF``: fp16 data or storage (``precision="low"``), ``atol = rtol = 5 * 2**-10``;
- ``EXACT``: data movement, integers and booleans.

Each is a read-only mapping ``{"atol": ..., "rtol": ...}`` (pass it as ``**TOL`` to
``numpy.testing.assert_allclose``). The tests (``tests/oracle.py``) and the random-graph
tests (``mnnpy.tools.cts``) import them from here.
"""

from __future__ import annotations

from types import MappingProxyType

ELEMENTWISE = MappingProxyType({"atol": 1e-5, "rtol": 5 * 2**-23})
ACCUMULATE = MappingProxyType({"atol": 1e-4, "rtol": 1e-4})
HALF = MappingProxyType({"atol": 5 * 2**-10, "rtol": 5 * 2**-10})
EXACT = MappingProxyType({"atol": 0.0, "rtol": 0.0})

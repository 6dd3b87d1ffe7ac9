"""Power-of-two rounding for work-group shapes, shared by the GPU backends' reductions
(``backends/opencl/reduce.py``, ``backends/vulkan/reduce.py``)."""

from __future__ import annotations


def pow2_floor(n: int) -> int:
    """The largest power of two ``<= max(n, 1)``."""
    return 1 << (max(1, int(n)).bit_length() - 1)


def pow2_ceil(n: int) -> int:
    """The smallest power of two ``>= max(n, 1)``."""
    return 1 << (max(1, int(n)) - 1).bit_length()

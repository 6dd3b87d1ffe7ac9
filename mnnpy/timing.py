"""NNAPI's ``Timing`` of one execution (a run call), and the outputs that carry it.

``Timing(on_device_us, in_driver_us)``, µs, as NNAPI's ``Timing`` (``hardware/interfaces/
neuralnetworks/1.2/types.hal``): ``in_driver_us`` is the time the backends spent on the run,
from the start of its first partition to the end of its last (border copies and the host
steps of control flow included, the caller's input checks and the output copies not);
``on_device_us`` the part of it the devices computed: on a GPU partition the device's own
clock (Vulkan timestamp queries, OpenCL profiling events: ``Backend.device_time_us``), on a
CPU partition its kernels' wall time. ``None`` where not measured (NNAPI's ``UINT64_MAX``):
a GPU that gave no device time makes ``on_device_us`` ``None``. ``on_device_us`` is never
above ``in_driver_us``.
"""

from __future__ import annotations

import time
from typing import NamedTuple


class Timing(NamedTuple):
    """NNAPI's ``Timing``: device and driver time of one run, µs (``None``: not measured)."""

    on_device_us: float | None
    in_driver_us: float | None


class RunOutputs(dict):
    """A run's outputs, output name -> ndarray (a list for a sequence output), as ``run``
    has always returned them; ``timing`` is the run's ``Timing`` when ``measure_timing=True``
    was asked for, else ``None``."""

    timing: Timing | None = None


class TimingMeter:
    """Sums one run's partitions: ``partition(step, seconds)`` after each partition ran
    (``step``: the ``PartitionStep``, its ``backend`` asked for ``device_time_us``), and the
    wall time of the whole ``execute`` (``span``)."""

    def __init__(self):
        self.device_us: float | None = 0.0
        self.driver_s = 0.0

    def partition(self, step, seconds: float) -> None:
        us = step.backend.device_time_us(step)
        if us is None:
            us = seconds * 1e6 if step.backend.name == "cpu" else None
        if us is None or self.device_us is None:
            self.device_us = None
        else:
            self.device_us += min(us, seconds * 1e6)

    def span(self, seconds: float) -> None:
        self.driver_s += seconds

    def timing(self) -> Timing:
        driver = self.driver_s * 1e6
        device = None if self.device_us is None else min(self.device_us, driver)
        return Timing(device, driver)


def clock() -> float:
    """The clock of timings and deadlines: ``time.monotonic()``, s."""
    return time.monotonic()
